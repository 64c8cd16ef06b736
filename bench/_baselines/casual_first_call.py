"""What casual-mcp 1.0.0 sends on the first call with every tool deferred (run isolated:
``uv run --isolated --no-project --with casual-mcp==1.0.0 python bench/_baselines/casual_first_call.py``).

Its own code builds it: ``SearchToolsTool(...).definition`` converted by casual-llm's
``tool_to_openai`` (the search-tools tool) and ``SearchToolsTool.system_prompt`` (the system message
listing every deferred tool name). Input: ``--tools`` JSONL of ``{"key", "server", "name",
"description", "input_schema"}``. Output (stdout): ``{"search_tool_json": str, "system_prompt": str}``.
"""

from __future__ import annotations

import argparse
import json
import sys

import mcp
from casual_llm.tool_converters.openai import tool_to_openai
from casual_mcp.models.tool_discovery_config import ToolDiscoveryConfig
from casual_mcp.search_tools_tool import SearchToolsTool
from casual_mcp.tool_search_index import ToolSearchIndex


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tools", required=True)
    args = parser.parse_args()
    with open(args.tools, encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    by_server: dict[str, list[mcp.Tool]] = {}
    for row in rows:
        tool = mcp.Tool(
            name=row["key"],
            description=row["description"],
            inputSchema=row["input_schema"] or {"type": "object"},
        )
        by_server.setdefault(row["server"], []).append(tool)
    all_tools = [t for tools in by_server.values() for t in tools]
    index = ToolSearchIndex(all_tools, {r["key"]: r["server"] for r in rows})
    tool = SearchToolsTool(
        by_server, sorted(by_server), index, ToolDiscoveryConfig(enabled=True, defer_all=True)
    )
    definition = tool_to_openai(tool.definition)
    json.dump(
        {
            "search_tool_json": json.dumps(definition, ensure_ascii=False, separators=(",", ":")),
            "system_prompt": tool.system_prompt,
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main()
