"""FastMCP 4 with its own tool-search transform, as an MCP server over streamable HTTP (run isolated:
``uv run --isolated --no-project --with fastmcp==4.1.2 python bench/_baselines/fastmcp_gateway.py``).

It registers every tool of ``--tools`` (JSONL ``{"key", "description", "input_schema"}``: the
LLM-facing names toolscout gives the same tools, so results compare by name) as a FastMCP tool that
answers at once, adds ``BM25SearchTransform`` (clients then see only ``search_tools`` and
``call_tool``), serves ``/mcp`` on 127.0.0.1 and prints ``listening <url>`` once it accepts
connections.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
from typing import Any

import uvicorn
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
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(256)
    port = sock.getsockname()[1]
    app = server.http_app(path="/mcp")
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    sys.stdout.write(f"listening http://127.0.0.1:{port}/mcp\n")
    sys.stdout.flush()
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
