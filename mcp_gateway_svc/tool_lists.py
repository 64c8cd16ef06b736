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

A list longer than :data:`PAGE_SIZE` tools is answered in pages (:func:`page`): ``nextCursor``
is an opaque cursor that carries the catalog version, the endpoint and mode, and the offset of the
next page (base64url JSON, no secret), so any replica of the gateway serving that catalog
version accepts it. A cursor from an older catalog version, another endpoint, or one that does
not decode is refused (:class:`CursorError`, JSON-RPC -32602): the client lists again from the
start, as it would after a ``list_changed``.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
from collections.abc import Collection, Sequence
from typing import Any, TypeVar

import mcp_types as types
from pydantic import ValidationError
from toolscout.client import GatewayMode, Tool

from mcp_gateway_svc.views import ToolsetView

__all__ = [
    "PAGE_SIZE",
    "CursorError",
    "list_signature",
    "listed_tools",
    "mcp_tool",
    "page",
    "signature",
    "tools_for",
]

# Tools per tools/list page: about 50 KB of definitions on real catalogs (the first page of a
# 50,000-tool ``all`` list is answered in tens of milliseconds), one page for the meta and
# progressive lists of a typical toolset, 500 pages for 50,000 tools.
PAGE_SIZE = 100


# What a page is of: tools, or the resources, templates and prompts the gateway lists alike.
_Item = TypeVar("_Item")


class CursorError(ValueError):
    """A ``tools/list`` cursor this gateway cannot continue from (stale, foreign or damaged)."""


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


def _view_list(view: ToolsetView, mode: GatewayMode) -> tuple[Tool, ...]:
    if view.search_tool is None or mode == GatewayMode.ALL:
        return (*view.eager, *view.deferred)
    extra: tuple[Tool, ...] = (view.call_tool,) if view.call_tool is not None else ()
    if extra and view.read_result is not None:
        extra = (*extra, view.read_result)
    return (*view.eager, view.search_tool, *extra)


def listed_tools(
    view: ToolsetView, mode: GatewayMode, loaded: Sequence[str] = (), search_tool: Tool | None = None
) -> list[Tool]:
    """The catalog tools (and discovery's synthetic ones) that ``mode`` lists, in order.

    ``search_tool`` is progressive mode's (discovery's append-surface definition, whose description
    says found tools join the list); the view holds the stable surface's pair.
    """
    return list(tools_for(view, mode, loaded, search_tool))


def tools_for(
    view: ToolsetView, mode: GatewayMode, loaded: Sequence[str] = (), search_tool: Tool | None = None
) -> Sequence[Tool]:
    """:func:`listed_tools` without the copy: the meta and all lists are built once per view."""
    if view.search_tool is None or mode in (GatewayMode.ALL, GatewayMode.META):
        listed = view.lists.get(mode)
        if listed is None:
            listed = view.lists[mode] = _view_list(view, mode)
        return listed
    found = [
        view.by_name[n] for n in dict.fromkeys(loaded) if n in view.by_name and n not in view.eager_names
    ]
    extra = (view.call_tool,) if view.call_tool is not None else ()
    return (*view.eager, search_tool or view.search_tool, *extra, *found)


def signature(tools: Sequence[Tool]) -> int:
    """Equal for equal tool lists (what a client would see), to tell whether to announce a change."""
    return hash(tuple(tools))


def shared_signature(tools: Sequence[Tool], per_user: Collection[str]) -> int:
    """:func:`signature` of ``tools`` without those of the ``per_user`` servers: the part of a
    caller's own list (:func:`~mcp_gateway_svc.user_tools.tools_as_seen_by`) that follows the
    catalog (the rest is what those servers list to the caller)."""
    return signature(tuple(t for t in tools if t.server not in per_user))


def list_signature(
    view: ToolsetView,
    mode: GatewayMode,
    loaded: Sequence[str] = (),
    search_tool: Tool | None = None,
    per_user: Collection[str] = (),
) -> int:
    """:func:`signature` of what :func:`listed_tools` lists, computed once per view for the modes
    whose list depends on the view alone (meta, all); with ``per_user`` (a caller's own list),
    :func:`shared_signature` of it."""
    if per_user:
        return shared_signature(tools_for(view, mode, loaded, search_tool), per_user)
    if mode == GatewayMode.PROGRESSIVE:
        return signature(tools_for(view, mode, loaded, search_tool))
    cached = view.signatures.get(mode)
    if cached is None:
        cached = view.signatures[mode] = signature(tools_for(view, mode))
    return cached


def page(
    tools: Sequence[_Item], cursor: str | None, *, version: str, where: str
) -> tuple[Sequence[_Item], str | None]:
    """The page of ``tools`` that ``cursor`` asks for (None: the first), and the next page's cursor
    (None: this is the last). ``version``: the catalog version the list is of; ``where``: the
    endpoint and mode it was listed at.

    Raises:
        CursorError: the cursor does not decode, is of another catalog version or endpoint, or
            points past the list.
    """
    start = 0 if not cursor else _offset(cursor, version, where)
    if start > len(tools) or (start == len(tools) and start > 0):
        raise CursorError("the cursor points past the end of the tool list; list again without a cursor")
    end = start + PAGE_SIZE
    if end >= len(tools):
        return tools[start:], None
    token = json.dumps({"v": version, "w": where, "o": end}, separators=(",", ":"))
    return tools[start:end], base64.urlsafe_b64encode(token.encode()).decode().rstrip("=")


def _offset(cursor: str, version: str, where: str) -> int:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        fields = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
    except (UnicodeError, binascii.Error, ValueError):
        raise CursorError("the cursor is not one this gateway issued; list again without a cursor") from None
    if not isinstance(fields, dict) or not isinstance(offset := fields.get("o"), int) or offset < 0:
        raise CursorError("the cursor is not one this gateway issued; list again without a cursor")
    if fields.get("w") != where:
        raise CursorError("the cursor was issued for another endpoint; list again without a cursor")
    if fields.get("v") != version:
        raise CursorError("the tool list changed since this cursor was issued; list again without a cursor")
    return offset
