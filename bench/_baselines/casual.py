"""casual-mcp 1.0.0's ``ToolSearchIndex`` (run isolated: ``--with casual-mcp==1.0.0``)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import mcp
from _common import run
from casual_mcp.tool_search_index import ToolSearchIndex


def build(tools: list[dict[str, Any]]) -> Callable[[str, int], list[str]]:
    mcp_tools = [
        mcp.Tool(
            name=t["key"], description=t["description"], inputSchema=t["input_schema"] or {"type": "object"}
        )
        for t in tools
    ]
    index = ToolSearchIndex(mcp_tools, {t["key"]: t["server"] for t in tools})

    def search(query: str, depth: int) -> list[str]:
        return [tool.name for _server, tool in index.search(query, max_results=depth)]

    return search


if __name__ == "__main__":
    run(build)
