"""What ``tools/list`` answers in each mode, as MCP tool definitions.

- **meta**: the toolset's eager tools, ``search_tools`` (the manifest in its description),
  ``call_tool`` and ``read_result`` (reads a large result kept behind a handle): the same bytes for
  a whole catalog version, however many searches run.
- **progressive**: the eager tools, ``search_tools``, ``call_tool`` (a found tool stays callable
  by name where a host never refreshes its list) and the tools this session's searches loaded, in
  the order they were loaded.
- **all**: every tool of the toolset.

A toolset with nothing deferred has no search tool: every mode lists its tools. The definitions
are discovery's (names are the pool's LLM-facing names); one MCP object per tool definition is
built once and reused.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import mcp_types as types
from pydantic import ValidationError
from toolscout.client import Tool

from mcp_gateway_svc.views import ToolsetView

__all__ = ["listed_tools", "mcp_tool", "signature"]

_OWN_FIELDS = frozenset({"name", "title", "description", "inputSchema", "outputSchema", "annotations"})


@functools.lru_cache(maxsize=65536)
def mcp_tool(tool: Tool) -> types.Tool:
    """The MCP definition of one catalog tool: as its server sent it (schemas, annotations, icons,
    ``execution``, ``_meta``, ...), but for the name. Fields this SDK cannot read are left out."""
    definition: dict[str, Any] = {
        **tool.extra,
        "name": tool.llm_name,
        "inputSchema": tool.input_schema or {"type": "object", "properties": {}},
    }
    for key, value in (
        ("title", tool.title),
        ("description", tool.description),
        ("outputSchema", tool.output_schema),
        ("annotations", tool.annotations),
    ):
        if value:
            definition[key] = value
    try:
        return types.Tool.model_validate(definition, by_alias=True)
    except ValidationError:
        # One unreadable field must not hide the tool: the fields of its own (annotations dropped
        # if they are what does not validate).
        plain = {k: v for k, v in definition.items() if k in _OWN_FIELDS}
        try:
            return types.Tool.model_validate(plain, by_alias=True)
        except ValidationError:
            plain.pop("annotations", None)
            return types.Tool.model_validate(plain, by_alias=True)


def listed_tools(
    view: ToolsetView, mode: str, loaded: Sequence[str] = (), search_tool: Tool | None = None
) -> list[Tool]:
    """The catalog tools (and discovery's synthetic ones) that ``mode`` lists, in order.

    ``search_tool`` is progressive mode's (discovery's append-surface definition, whose description
    says found tools join the list); the view holds the stable surface's pair.
    """
    if view.search_tool is None or mode == "all":
        return [*view.eager, *view.deferred]
    if mode == "meta":
        extra = [view.call_tool] if view.call_tool is not None else []
        if extra and view.read_result is not None:
            extra.append(view.read_result)
        return [*view.eager, view.search_tool, *extra]
    found = [
        view.by_name[n] for n in dict.fromkeys(loaded) if n in view.by_name and n not in view.eager_names
    ]
    extra = [view.call_tool] if view.call_tool is not None else []
    return [*view.eager, search_tool or view.search_tool, *extra, *found]


def signature(tools: Sequence[Tool]) -> int:
    """Equal for equal tool lists (what a client would see), to tell whether to announce a change."""
    return hash(tuple(tools))
