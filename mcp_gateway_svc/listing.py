"""The descriptions the gateway serves: within hosts' size limits, and (``all`` mode) search-ready.

Claude Code cuts every MCP tool description and the server instructions at 2 KB; so the gateway
never serves one over :data:`DESCRIPTION_CAP_BYTES` (UTF-8), cut at a word boundary. The full text
stays reachable: ``search_tools`` answers with discovery's definitions and ``toolscout describe``
prints them.

In ``all`` mode the host searches the list itself (Claude Code's and Codex's tool search rank by
BM25 over name and description; Anthropic's regex variant matches patterns in the same text), so
each description is made *search-ready* from what the catalog already says, never invented text:
the tool's own description first, then the words of its name, its server and what the server is
for (the first sentences of the server's tool descriptions, for servers small enough to have one
purpose), its title, and its parameters' names and short descriptions, and the toolset's own
description, each section shortened to what still fits the cap. ``bench/host_search.py`` measures
what it gains over the raw list.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from toolscout.client import Tool

from mcp_gateway_svc.tool_lists import mcp_tool

__all__ = [
    "DESCRIPTION_CAP_BYTES",
    "MAX_RESULT_SIZE_META_KEY",
    "ResultLimits",
    "ServedTools",
    "all_mode_descriptions",
    "cap_bytes",
    "name_words",
]

# Claude Code's limit for a tool description and for the server instructions (bytes of UTF-8).
DESCRIPTION_CAP_BYTES = 2048
_CUT_MARK = " ..."
_SPACE = re.compile(r"\s")


def cap_bytes(text: str, limit: int = DESCRIPTION_CAP_BYTES) -> str:
    """``text`` if it fits ``limit`` bytes of UTF-8, else cut at a word boundary and marked ``...``.

    A text without a space in its second half (CJK prose, a long identifier) is cut between
    characters instead; a multi-byte character is never split.
    """
    data = text.encode()
    if len(data) <= limit:
        return text
    cut = data[: max(limit - len(_CUT_MARK), 0)].decode("utf-8", errors="ignore")
    # A list (a manifest) is cut after a whole line; prose after a whole word.
    line = cut.rfind("\n")
    spaces = [m.start() for m in _SPACE.finditer(cut)]
    if line >= len(cut) * 3 // 4:
        cut = cut[:line]
    elif spaces and spaces[-1] >= len(cut) // 2:
        cut = cut[: spaces[-1]]
    return cut.rstrip() + _CUT_MARK


# Words of an identifier: camelCase humps, acronyms, digits; anything else separates.
_IDENT_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+|[^\W\d_]+")
_WS = re.compile(r"\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?\u3002\uff01\uff1f])\s")
# A server with more tools than this has no single purpose its tools' first sentences could tell.
_PURPOSE_MAX_TOOLS = 12
_PURPOSE_CHARS = 120
_PARAM_CHARS = 100
_TITLE_CHARS = 200


def name_words(name: str) -> str:
    """The words of an identifier, lower case: ``getTeamStats`` -> ``get team stats``."""
    return " ".join(w.lower() for w in _IDENT_WORD.findall(name))


def _one_line(text: str) -> str:
    return _WS.sub(" ", text).strip()


def _first_sentence(text: str, limit: int) -> str:
    sentence = _SENTENCE_END.split(_one_line(text), maxsplit=1)[0]
    return cap_bytes(sentence, limit) if len(sentence.encode()) > limit else sentence


def _parameters(schema: Mapping[str, Any]) -> str:
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return ""
    parts = []
    for name, prop in props.items():
        words = name_words(str(name))
        label = str(name) if words in (str(name).lower(), "") else f"{name} ({words})"
        desc = prop.get("description") if isinstance(prop, Mapping) else None
        if isinstance(desc, str) and desc.strip():
            label = f"{label}: {_first_sentence(desc, _PARAM_CHARS)}"
        parts.append(label)
    return "; ".join(parts)


def _purposes(tools: Sequence[Tool]) -> dict[str, str]:
    """What each small server is for: the names of its tools."""
    by_server: dict[str, list[Tool]] = {}
    for tool in tools:
        by_server.setdefault(tool.server, []).append(tool)
    purposes = {}
    for server, members in by_server.items():
        if len(members) > _PURPOSE_MAX_TOOLS:
            continue
        names = ", ".join(dict.fromkeys(name_words(t.name) or t.name for t in members))
        purposes[server] = cap_bytes(names, _PURPOSE_CHARS)
    return purposes


def _search_ready(tool: Tool, purpose: str, toolset: str) -> str:
    sections = [_one_line(tool.description)]
    words = name_words(tool.name)
    # Labels a query might contain ("tool", "server") would match every description alike and
    # reorder a regex search's ties: the server and its tools are told without them.
    head = tool.name + (f" ({words})" if words and words != tool.name.lower() else "")
    sections.append(f"{head} in {tool.server}" + (f", beside: {purpose}" if purpose else ""))
    if tool.title and tool.title not in (tool.name, tool.description):
        sections.append(f"Title: {cap_bytes(_one_line(tool.title), _TITLE_CHARS)}")
    params = _parameters(tool.input_schema)
    if params:
        sections.append(f"Parameters: {params}")
    if toolset:
        sections.append(f"Toolset: {toolset}")
    text = ""
    for section in sections:
        if not section:
            continue
        room = DESCRIPTION_CAP_BYTES - len(text.encode()) - 2
        if room < 40:
            break
        text = f"{text}\n\n{cap_bytes(section, room)}" if text else cap_bytes(section, room)
    return text


def all_mode_descriptions(tools: Sequence[Tool], toolset: str = "") -> tuple[str, ...]:
    """The description ``all`` mode serves for each of ``tools`` (a toolset's whole list, which
    gives each server's purpose), each within :data:`DESCRIPTION_CAP_BYTES`. ``toolset``: the
    toolset's own description, when configured."""
    purposes = _purposes(tools)
    toolset = _one_line(toolset)
    return tuple(_search_ready(t, purposes.get(t.server, ""), toolset) for t in tools)


# ``_meta`` key Claude Code reads for the largest result it keeps inline (characters).
MAX_RESULT_SIZE_META_KEY = "anthropic/maxResultSizeChars"


@dataclass(frozen=True, slots=True)
class ResultLimits:
    """``anthropic/maxResultSizeChars`` per server (0: not advertised); the gateway's own tools
    (search_tools, call_tool, whose results come from any server) advertise the largest."""

    by_server: Mapping[str, int] = field(default_factory=dict)
    default: int = 500_000

    def of(self, server: str) -> int:
        if server in self.by_server:
            return self.by_server[server]
        if not server:
            return max(self.by_server.values(), default=self.default)
        return self.default


class ServedTools:
    """The MCP definitions one catalog version of a toolset is served with, built once each.

    ``all`` mode's descriptions are made search-ready over the whole toolset on first use; every
    other listing serves each tool's own description within the cap. Each definition carries the
    server's ``anthropic/maxResultSizeChars``.
    """

    def __init__(self, tools: Sequence[Tool], limits: ResultLimits, toolset_description: str = "") -> None:
        self._tools = tools
        self._limits = limits
        self._toolset = toolset_description
        self._plain: dict[Tool, types.Tool] = {}
        self._ready: dict[str, types.Tool] | None = None
        self._lock = threading.Lock()

    async def prepare_search_ready(self) -> None:
        """Builds the search-ready definitions off the event loop (seconds at 50,000 tools)."""
        if self._ready is None:
            await asyncio.to_thread(self._build_ready)

    def definition(self, tool: Tool, *, search_ready: bool = False) -> types.Tool:
        if search_ready:
            ready = self._ready if self._ready is not None else self._build_ready()
            found = ready.get(tool.llm_name)
            if found is not None:
                return found
        served = self._plain.get(tool)
        if served is None:
            served = self._plain[tool] = self._served(tool, cap_bytes(tool.description))
        return served

    def _build_ready(self) -> dict[str, types.Tool]:
        with self._lock:
            if self._ready is None:
                descriptions = all_mode_descriptions(self._tools, self._toolset)
                self._ready = {
                    t.llm_name: self._served(t, d) for t, d in zip(self._tools, descriptions, strict=True)
                }
            return self._ready

    def _served(self, tool: Tool, description: str) -> types.Tool:
        base = mcp_tool(tool)
        meta = dict(base.meta or {})
        chars = self._limits.of(tool.server)
        if chars:
            meta[MAX_RESULT_SIZE_META_KEY] = chars
        return base.model_copy(update={"description": description or None, "meta": meta or None})
