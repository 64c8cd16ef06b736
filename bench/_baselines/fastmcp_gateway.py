"""FastMCP 4 with its own tool-search transform, as an MCP server over streamable HTTP (run isolated:
``uv run --isolated --no-project --with fastmcp==4.1.2 python bench/_baselines/fastmcp_gateway.py``).

It registers every tool of ``--tools`` (JSONL ``{"key", "description", "input_schema"}``: the
LLM-facing names toolscout gives the same tools, so results compare by name) as a FastMCP tool that
answers at once, adds ``BM25SearchTransform`` (clients then see only ``search_tools`` and
``call_tool``), serves ``/mcp`` on 127.0.0.1 the way FastMCP's users run it,
``server.run(transport="http", host=..., port=..., path="/mcp")`` (FastMCP's own uvicorn setup:
an earlier version of this script handed uvicorn a socket bound here, which stalled each response
~40 ms on a delayed ACK), and prints ``listening <url>`` once it accepts connections.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from _common import announced_port
from fastmcp import FastMCP
from fastmcp.server.transforms.search import BM25SearchTransform
from fastmcp.tools.base import TextContent, Tool, ToolResult


class _Answering(Tool):
    """A tool with the catalogue's schema that answers with one line of text."""

    async def run(self, arguments: dict[str, Any]) -> ToolResult:
        return ToolResult(content=[TextContent(type="text", text=f"{self.name} ok")])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tools", required=True)
    parser.add_argument("--max-results", type=int, default=5)
    args = parser.parse_args()
    server = FastMCP("fastmcp-baseline")
    with open(args.tools, encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            schema = row.get("input_schema")
            if not isinstance(schema, dict) or schema.get("type") != "object":
                schema = {"type": "object", "properties": {}}
            server.add_tool(
                _Answering(name=row["key"], description=row.get("description") or "", parameters=schema)
            )
    server.add_transform(BM25SearchTransform(max_results=args.max_results))
    server.run(
        transport="http",
        host="127.0.0.1",
        port=announced_port(),
        path="/mcp",
        show_banner=False,
        log_level="WARNING",
    )


if __name__ == "__main__":
    main()
