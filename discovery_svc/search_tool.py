"""The ``search_tools`` tool: execution and the result text (arguments: :mod:`search_args`).

Modes and precedence (the PRD's): ``tool_names`` (exact; unknown names get the closest existing
names, and a ``query`` given alongside is the fallback) > ``server_name`` + ``query`` (scoped
search) > ``server_name`` alone (browse, paged) > ``query`` alone (BM25 top-k). The result text is
the product: the orchestrator hands it to the LLM verbatim, and so are the error messages.
"""

from __future__ import annotations

import difflib
import enum
import functools
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from discovery_svc.catalog import Tool
from discovery_svc.index import SearchHit, SearchIndex, normalize_name
from discovery_svc.search_args import (
    MAX_QUERY_CHARS,
    SEARCH_TOOL_NAME,
    SEARCH_TOOL_PARAMETERS,
    SearchArgs,
    SearchArgumentError,
    parse_arguments_json,
    validate_arguments,
)
from toolscout_kit.errors import NotFoundError

__all__ = [
    "MAX_QUERY_CHARS",
    "SEARCH_TOOL_NAME",
    "SEARCH_TOOL_PARAMETERS",
    "Match",
    "NameSuggestion",
    "SearchArgs",
    "SearchArgumentError",
    "SearchMode",
    "SearchResult",
    "SearchScope",
    "UnknownServerError",
    "execute_search",
    "parse_arguments_json",
    "validate_arguments",
]

_DESCRIPTION_CHARS = 400
_PARAM_DESCRIPTION_CHARS = 160
_LISTED_SERVERS = 50
_WS = re.compile(r"\s+")


class UnknownServerError(NotFoundError):
    """server_name is not a server of the toolset; the message lists the valid ones."""


class SearchMode(enum.Enum):
    TOOL_NAMES = "tool_names"
    SERVER = "server"
    SERVER_QUERY = "server_query"
    QUERY = "query"


@dataclass(frozen=True, slots=True)
class Match:
    tool: Tool
    already_loaded: bool
    score: float = 0.0


@dataclass(frozen=True, slots=True)
class NameSuggestion:
    name: str
    closest: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SearchResult:
    mode: SearchMode
    matches: tuple[Match, ...]
    newly_loaded: tuple[Tool, ...]
    text: str
    not_found: tuple[NameSuggestion, ...]
    total_matches: int
    catalog_version: str = ""


# --- execution -----------------------------------------------------------------------------


class SearchScope:
    """What searches run against: one toolset of one catalog version, built once."""

    def __init__(self, tools: Sequence[Tool], index: SearchIndex, eager: Collection[str]) -> None:
        self.tools = tuple(tools)
        self.index = index
        self.eager = frozenset(eager)
        self.by_llm_name: dict[str, Tool] = {t.llm_name: t for t in self.tools}
        self.by_server: dict[str, tuple[Tool, ...]] = {}
        by_name: dict[str, list[Tool]] = {}
        by_norm: dict[str, list[Tool]] = {}
        for tool in self.tools:
            by_name.setdefault(tool.name, []).append(tool)
            by_norm.setdefault(normalize_name(tool.name), []).append(tool)
            if tool.llm_name != tool.name:
                by_norm.setdefault(normalize_name(tool.llm_name), []).append(tool)
        grouped: dict[str, list[Tool]] = {}
        for tool in self.tools:
            grouped.setdefault(tool.server, []).append(tool)
        self.by_server = {s: tuple(ts) for s, ts in sorted(grouped.items())}
        self._by_name = {k: tuple(v) for k, v in by_name.items()}
        self._by_norm = {k: tuple(v) for k, v in by_norm.items()}

    def resolve(self, name: str) -> tuple[Tool, ...]:
        """Tools called ``name``: by LLM name, else by server tool name, else case-insensitively."""
        tool = self.by_llm_name.get(name)
        if tool is not None:
            return (tool,)
        return self._by_name.get(name) or self._by_norm.get(normalize_name(name), ())

    def closest(self, name: str, server: str | None, n: int = 3) -> tuple[str, ...]:
        """The existing LLM names closest to ``name`` (spelling first, then shared words)."""
        hits = self.index.search(name, 50, server=server)
        candidates = {h.key for h in hits}
        pool = self.tools if server is None else self.by_server.get(server, ())
        # difflib over every name costs ~20 µs a name: fine for small catalogs; beyond that only
        # the tools sharing a word with the name are compared (misspelt words still share others).
        if len(pool) <= 1000:
            candidates.update(t.llm_name for t in pool)
            candidates.update(t.name for t in pool)
        close = difflib.get_close_matches(name, sorted(candidates), n=n, cutoff=0.5)
        keys = [tools[0].llm_name for c in close if (tools := self.resolve(c))]
        keys += [h.key for h in hits]
        return tuple(dict.fromkeys(keys))[:n]


def _unknown_server(scope: SearchScope, server: str) -> UnknownServerError:
    servers = list(scope.by_server)
    if not servers:
        return UnknownServerError(f"Unknown server '{server}': no tools are available in this toolset.")
    if len(servers) <= _LISTED_SERVERS:
        return UnknownServerError(f"Unknown server '{server}'. Valid servers: {', '.join(servers)}.")
    close = difflib.get_close_matches(server, servers, n=5, cutoff=0.5)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    shown = ", ".join(servers[:_LISTED_SERVERS])
    return UnknownServerError(
        f"Unknown server '{server}'.{hint} Valid servers (first {_LISTED_SERVERS} of {len(servers)}): "
        f"{shown}, ..."
    )


def _query_matches(
    scope: SearchScope, query: str, server: str | None, loaded: frozenset[str], limit: int
) -> list[Match]:
    new = scope.index.search(query, limit, server=server, skip=loaded)
    # Already-loaded tools are searched separately so they never take a slot from a new tool;
    # they are reported only when they rank with the new ones.
    old: list[SearchHit] = scope.index.search(query, limit, server=server, only=loaded) if loaded else []
    if len(new) >= limit:
        floor = new[-1].score
        old = [h for h in old if h.score >= floor]
    hits = [(h, False) for h in new] + [(h, True) for h in old]
    hits.sort(key=lambda pair: -pair[0].score)
    return [Match(scope.by_llm_name[h.key], flag, h.score) for h, flag in hits]


def _by_names(
    scope: SearchScope, names: Sequence[str], server: str | None, loaded: frozenset[str]
) -> tuple[list[Match], list[NameSuggestion]]:
    matches: dict[str, Match] = {}
    missing: list[NameSuggestion] = []
    for name in names:
        tools = [t for t in scope.resolve(name) if server is None or t.server == server]
        if not tools:
            missing.append(NameSuggestion(name, scope.closest(name, server)))
        for tool in tools:
            matches.setdefault(tool.llm_name, Match(tool, tool.llm_name in loaded))
    return list(matches.values()), missing


def execute_search(
    scope: SearchScope,
    args: SearchArgs,
    *,
    loaded: Collection[str],
    max_results: int,
    browse_limit: int,
) -> SearchResult:
    """Runs one search_tools call.

    ``loaded`` are LLM names already loaded in the conversation (eager tools count as loaded too).

    Raises:
        UnknownServerError: server_name is not a server of the toolset.
        SearchArgumentError: a browse offset past the server's last tool.
    """
    if args.server_name is not None and args.server_name not in scope.by_server:
        raise _unknown_server(scope, args.server_name)
    loaded_set = scope.eager | frozenset(n for n in loaded if n in scope.by_llm_name)
    server = args.server_name
    missing: list[NameSuggestion] = []
    page: tuple[int, int, int] | None = None

    if args.tool_names is not None:
        matches, missing = _by_names(scope, args.tool_names, server, loaded_set)
        mode = SearchMode.TOOL_NAMES
        if not matches and args.query is not None:
            mode = SearchMode.SERVER_QUERY if server else SearchMode.QUERY
            matches = _query_matches(scope, args.query, server, loaded_set, max_results)
        total = len(matches)
    elif server is not None and args.query is not None:
        mode = SearchMode.SERVER_QUERY
        matches = _query_matches(scope, args.query, server, loaded_set, max_results)
        total = len(matches)
    elif server is not None:
        mode = SearchMode.SERVER
        tools = scope.by_server[server]
        total = len(tools)
        if args.offset >= total:
            raise SearchArgumentError(
                f"offset {args.offset} is past the end: server '{server}' has {total} tools "
                f"(offsets 0-{total - 1})."
            )
        chunk = tools[args.offset : args.offset + browse_limit]
        matches = [Match(t, t.llm_name in loaded_set) for t in chunk]
        page = (args.offset, args.offset + len(chunk), total)
    else:
        assert args.query is not None  # validate_arguments guarantees one of the three
        mode = SearchMode.QUERY
        matches = _query_matches(scope, args.query, None, loaded_set, max_results)
        total = len(matches)

    newly = tuple(m.tool for m in matches if not m.already_loaded)
    text = _result_text(args, mode, matches, missing, page)
    return SearchResult(mode, tuple(matches), newly, text, tuple(missing), total)


# --- result text ---------------------------------------------------------------------------


def _one_line(text: str, limit: int) -> str:
    text = _WS.sub(" ", text).strip()
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def _type_of(schema: Any) -> str:
    if not isinstance(schema, Mapping):
        return "any"
    kind = schema.get("type")
    if isinstance(kind, list):
        result = "|".join(str(k) for k in kind)
    elif kind == "array":
        items = schema.get("items")
        inner = _type_of(items) if isinstance(items, Mapping) else "any"
        result = f"array of {inner}" if inner != "any" else "array"
    elif isinstance(kind, str):
        result = kind
    else:
        variants = schema.get("anyOf") or schema.get("oneOf")
        if isinstance(variants, list) and variants:
            result = "|".join(dict.fromkeys(_type_of(v) for v in variants))
        elif "enum" in schema:
            result = "enum"
        else:
            result = "object" if "$ref" in schema or "properties" in schema else "any"
    return result


def _parameters(schema: Mapping[str, Any]) -> list[str]:
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return []
    required = schema.get("required")
    required_set = set(required) if isinstance(required, list) else set()
    lines = []
    for name, prop in props.items():
        flag = ", required" if name in required_set else ""
        desc = prop.get("description") if isinstance(prop, Mapping) else None
        text = (
            f": {_one_line(desc, _PARAM_DESCRIPTION_CHARS)}" if isinstance(desc, str) and desc.strip() else ""
        )
        lines.append(f"    - {name} ({_type_of(prop)}{flag}){text}")
    return lines


# A tool's text only changes with the tool itself, and the same tools are found again and again:
# formatting dominated a search's cost before this cache (bench/discovery_bench.py).
@functools.lru_cache(maxsize=8192)
def format_tool(tool: Tool) -> str:
    """One tool as the LLM reads it: name to call, server, description, parameters."""
    lines = [f"- {tool.llm_name} (server: {tool.server}, tool: {tool.name})"]
    lines.append(f"  {_one_line(tool.description, _DESCRIPTION_CHARS) or '(no description)'}")
    params = _parameters(tool.input_schema)
    if params:
        lines.append("  Parameters:")
        lines.extend(params)
    else:
        lines.append("  Parameters: none")
    return "\n".join(lines)


def _not_found_line(missing: Sequence[NameSuggestion]) -> str:
    parts = []
    for s in missing:
        closest = f"closest: {', '.join(s.closest)}" if s.closest else "no similar names"
        parts.append(f"'{s.name}' ({closest})")
    return "Not found: " + "; ".join(parts) + "."


def _empty_text(args: SearchArgs, mode: SearchMode, missing: Sequence[NameSuggestion]) -> str:
    server = args.server_name
    if mode is SearchMode.TOOL_NAMES:
        where = f" in server '{server}'" if server else ""
        return (
            f"No tools found with those names{where}. {_not_found_line(missing)} "
            "Use exact names from the manifest, or search with a query."
        )
    parts = [f"No tools found matching '{args.query}'"]
    if server:
        parts.append(
            f" in server '{server}'. Try other keywords, or call search_tools with only "
            f'server_name="{server}" to list its tools.'
        )
    else:
        parts.append(
            ". Try fewer or different keywords (an action and an object, e.g. 'send email'), "
            "or list a server's tools with server_name."
        )
    text = "".join(parts)
    return f"{text} {_not_found_line(missing)}" if missing else text


def _result_text(
    args: SearchArgs,
    mode: SearchMode,
    matches: Sequence[Match],
    missing: Sequence[NameSuggestion],
    page: tuple[int, int, int] | None,
) -> str:
    if not matches:
        return _empty_text(args, mode, missing)
    new = [m for m in matches if not m.already_loaded]
    old = [m for m in matches if m.already_loaded]
    sections: list[str] = []
    if page is not None:
        start, end, total = page
        sections.append(f"Server '{args.server_name}' has {total} tools; showing {start + 1}-{end}:")
    else:
        word = "tool" if len(matches) == 1 else "tools"
        sections.append(f"Found {len(matches)} {word}:")
    if new:
        sections.append("\n\n".join(format_tool(m.tool) for m in new))
    if old:
        sections.append("Already loaded (call directly): " + ", ".join(m.tool.llm_name for m in old))
    if missing:
        sections.append(_not_found_line(missing))
    if new:
        sections.append("These tools are now loaded and available to call.")
    else:
        sections.append("No new tools were loaded: every match is already available to call.")
    if page is not None and page[1] < page[2]:
        start, end, total = page
        sections.append(
            f"Showing {start + 1}-{end} of {total}. Call search_tools again with "
            f'server_name="{args.server_name}" and offset={end} for more.'
        )
    return "\n\n".join(sections)
