"""The BM25 index behind FastMCP 4's ``BM25SearchTransform`` (run isolated: ``--with fastmcp==4.1.2``).

It indexes what the transform indexes (``_extract_searchable_text``: name, description, parameter
names and descriptions) with the transform's own ``_BM25Index``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import run
from fastmcp.server.transforms.search.base import _extract_searchable_text
from fastmcp.server.transforms.search.bm25 import _BM25Index
from fastmcp.tools.base import Tool


def build(tools: list[dict[str, Any]]) -> Callable[[str, int], list[str]]:
    fm_tools = [
        Tool(name=t["key"], description=t["description"], parameters=t["input_schema"] or {"type": "object"})
        for t in tools
    ]
    keys = [t.name for t in fm_tools]
    index = _BM25Index()
    index.build([_extract_searchable_text(t) for t in fm_tools])

    def search(query: str, depth: int) -> list[str]:
        return [keys[i] for i in index.query(query, depth)]

    return search


if __name__ == "__main__":
    run(build)
