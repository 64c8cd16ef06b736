"""The manifest: a compact, bounded description of the deferred tools, for the LLM.

Format (the PRD's): servers sorted by name, each as ``- server (N tools): a, b, c`` plus a one-line
summary, big servers abbreviated with ``..., and N more``. The text has a token budget it never
exceeds however large the catalog: it degrades step by step (fewer names, shorter summaries, then
server lines only, then ``... and N more servers``). It depends only on the deferred tools, so it
is byte-identical for the same catalog version and toolset, which keeps provider prompt caches warm.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from toolscout.client import Tool

__all__ = [
    "MANIFEST_HEADER",
    "BuiltManifest",
    "build_manifest",
    "manifest_answer",
    "search_tool_description",
    "stable_search_tool_description",
    "system_message",
]

MANIFEST_HEADER = "Available tool servers (call search_tools to load their definitions):"

_SEARCH_TOOL_INTRO = (
    "Search for and load tool definitions from available MCP servers. "
    "Use this before calling a tool that isn't currently loaded."
)
# The stable surface (call_tool): found tools do not join the tool list, so the model must be told.
_STABLE_SEARCH_TOOL_INTRO = (
    "Search for tool definitions from available MCP servers. Found tools are not added to your "
    "tool list: call them through call_tool with their name and arguments."
)
# The stable surface's description holds a short manifest (MCP hosts cut longer descriptions);
# the full one answers a call without arguments.
_BROWSE_HINT = "Call search_tools with no arguments for the full list of servers and tools."
_WS = re.compile(r"\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s")

Counter = Callable[[str], int]


@dataclass(frozen=True, slots=True)
class _Level:
    """One degree of detail. ``list_all_upto``: servers with at most this many tools list them all."""

    list_all_upto: int
    shown_names: int
    summary_chars: int
    blank_lines: bool


# Richest first; the first level that fits the budget wins.
_LEVELS: tuple[_Level, ...] = (
    _Level(list_all_upto=10, shown_names=4, summary_chars=80, blank_lines=True),
    _Level(list_all_upto=8, shown_names=3, summary_chars=60, blank_lines=False),
    _Level(list_all_upto=5, shown_names=3, summary_chars=40, blank_lines=False),
    _Level(list_all_upto=5, shown_names=2, summary_chars=25, blank_lines=False),
    _Level(list_all_upto=4, shown_names=2, summary_chars=0, blank_lines=False),
    _Level(list_all_upto=3, shown_names=1, summary_chars=0, blank_lines=False),
    _Level(list_all_upto=0, shown_names=0, summary_chars=0, blank_lines=False),
)


@dataclass(frozen=True, slots=True)
class BuiltManifest:
    """The manifest text as built for a toolset, with how it was built (the ``GetManifest`` answer
    is :class:`toolscout.client.Manifest`, counted per provider from this)."""

    text: str
    # Tokens of ``text`` under the counter it was built with (the largest of the encodings).
    tokens: int
    deferred_servers: int
    deferred_tools: int
    # Which degree of detail fitted: 0 = richest, len(_LEVELS) = servers cut off.
    level: int


def _one_line(text: str) -> str:
    return _WS.sub(" ", text).strip()


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[: limit - 3]
    # Cut at a word boundary when there is one nearby (CJK text has none: cut anywhere).
    space = cut.rfind(" ")
    if space >= limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:-") + "..."


def _summary(tools: Sequence[Tool], limit: int) -> str:
    """First sentences of the server's tool descriptions, de-duplicated, clipped to ``limit``."""
    if limit <= 0:
        return ""
    seen: list[str] = []
    length = 0
    for tool in tools:
        desc = _one_line(tool.description)
        if not desc:
            continue
        sentence = _SENTENCE_END.split(desc, maxsplit=1)[0]
        if sentence not in seen:
            seen.append(sentence)
            length += len(sentence) + 1
        if length > limit:
            break
    return _clip(" ".join(seen), limit)


def _names(tools: Sequence[Tool], level: _Level) -> str:
    names = [_one_line(t.name) for t in tools]
    if len(names) <= level.list_all_upto:
        return ", ".join(names)
    if level.shown_names == 0:
        return ""
    return ", ".join(names[: level.shown_names]) + f", ... and {len(names) - level.shown_names} more"


# A per_user server's line: what its tools are depends on who asks (and never its stack list).
_PER_USER_LINE = (
    "- {server} (its tools are listed to each user under their own sign-in: search_tools finds yours)"
)


def _server_line(server: str, tools: Sequence[Tool], level: _Level | None, per_user: frozenset[str]) -> str:
    if server in per_user:
        return _PER_USER_LINE.format(server=server)
    word = "tool" if len(tools) == 1 else "tools"
    head = f"- {server} ({len(tools)} {word})"
    if level is None:
        return head
    names = _names(tools, level)
    line = f"{head}: {names}" if names else head
    summary = _summary(tools, level.summary_chars)
    return f"{line}\n  {summary}" if summary else line


def _try_level(
    groups: Sequence[tuple[str, Sequence[Tool]]],
    level: _Level,
    count: Counter,
    budget: int,
    per_user: frozenset[str],
) -> str | None:
    sep = "\n\n" if level.blank_lines else "\n"
    blocks = [MANIFEST_HEADER]
    running = count(MANIFEST_HEADER + sep)
    for server, tools in groups:
        block = _server_line(server, tools, level, per_user)
        running += count(block + sep)
        # Stop early: at 50k tools a rich manifest would be megabytes to build and count.
        if running > budget:
            return None
        blocks.append(block)
    text = sep.join(blocks)
    return text if count(text) <= budget else None


def _cut_servers(
    groups: Sequence[tuple[str, Sequence[Tool]]], count: Counter, budget: int, per_user: frozenset[str]
) -> str:
    total_servers = len(groups)

    def tail(shown: int) -> str:
        rest = groups[shown:]
        tools = sum(len(t) for _, t in rest)
        return f"... and {len(rest)} more servers ({tools} tools): search with a query to find them"

    lines = [MANIFEST_HEADER]
    running = count(MANIFEST_HEADER + "\n") + count(tail(0))
    for server, tools in groups:
        line = _server_line(server, tools, None, per_user)
        running += count(line + "\n")
        if running > budget:
            break
        lines.append(line)
    shown = len(lines) - 1
    while True:
        text = "\n".join([*lines[: shown + 1], tail(shown)]) if shown < total_servers else "\n".join(lines)
        if count(text) <= budget:
            return text
        if shown == 0:
            # Only a budget below the header's own size gets here (config allows >= 50 tokens).
            return tail(0)
        shown -= 1


def build_manifest(
    deferred: Sequence[Tool], count: Counter, budget: int, per_user: frozenset[str] = frozenset()
) -> BuiltManifest:
    """The manifest of ``deferred`` (catalog order), never over ``budget`` tokens of ``count``.

    A ``per_user`` server (its tools are listed to each user under their own sign-in) is named
    without its tools: the stack's list of them is nobody's to read, and one text serves every user.
    """
    groups_map: dict[str, list[Tool]] = {}
    for tool in deferred:
        groups_map.setdefault(tool.server, []).append(tool)
    groups = [(s, groups_map[s]) for s in sorted(groups_map)]
    if not groups:
        return BuiltManifest(text="", tokens=0, deferred_servers=0, deferred_tools=0, level=0)
    for number, level in enumerate(_LEVELS):
        text = _try_level(groups, level, count, budget, per_user)
        if text is not None:
            return BuiltManifest(text, count(text), len(groups), len(deferred), number)
    text = _cut_servers(groups, count, budget, per_user)
    return BuiltManifest(text, count(text), len(groups), len(deferred), len(_LEVELS))


def search_tool_description(manifest: BuiltManifest, *, embed: bool, stable: bool = False) -> str:
    """The search_tools description, with the manifest inside it when ``embed`` (PRD placement).

    ``stable``: the variant of the cache-stable surface, where found tools are called through
    call_tool instead of joining the tool list.
    """
    intro = _STABLE_SEARCH_TOOL_INTRO if stable else _SEARCH_TOOL_INTRO
    if embed and manifest.text:
        return f"{intro}\n\n<manifest>\n{manifest.text}\n</manifest>"
    return intro


def _utf8_bytes(text: str) -> int:
    return len(text.encode())


def stable_search_tool_description(
    deferred: Sequence[Tool], max_bytes: int, per_user: frozenset[str] = frozenset()
) -> str:
    """The stable surface's search_tools description: the intro and a short manifest (servers,
    what they hold) within ``max_bytes`` of UTF-8, the same degrading levels as the full one."""
    intro = f"{_STABLE_SEARCH_TOOL_INTRO} {_BROWSE_HINT}"
    wrapper = f"{intro}\n\n<manifest>\n\n</manifest>"
    short = build_manifest(deferred, _utf8_bytes, max_bytes - _utf8_bytes(wrapper), per_user)
    if not short.text or _utf8_bytes(wrapper) + _utf8_bytes(short.text) > max_bytes:
        return intro
    return f"{intro}\n\n<manifest>\n{short.text}\n</manifest>"


def manifest_answer(manifest: BuiltManifest) -> str:
    """What a search_tools call without arguments answers: the full manifest and how to go on."""
    if not manifest.text:
        return "No tools are deferred: every tool of this toolset is in your tool list."
    return (
        f"{manifest.text}\n\nSearch with a query (e.g. 'send an email'), list a server's tools "
        "with server_name, or load tools by exact name with tool_names."
    )


def system_message(manifest: BuiltManifest) -> str:
    """The system message carrying the manifest (casual-mcp 1.0's placement)."""
    if not manifest.text:
        return ""
    return (
        "You can discover and load more tools with the search_tools function.\n\n"
        f"{manifest.text}\n\n"
        "To use any of these tools, first call search_tools to load them, then call them normally."
    )
