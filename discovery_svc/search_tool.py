"""The ``search_tools`` tool: executing a call over one toolset.

Arguments and mode precedence: :mod:`discovery_svc.search_args`; the text the LLM reads:
:mod:`discovery_svc.result_text`.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Collection, Sequence

from toolscout.client import NameSuggestion, SearchResult, Tool, ToolMatch, ToolSurface

from discovery_svc.errors import SearchArgumentError, UnknownServerError
from discovery_svc.index import SearchHit
from discovery_svc.result_text import Answer, guidance_text, result_text, unsigned_server_text
from discovery_svc.scope import ToolScope
from discovery_svc.search_args import SearchArgs, SearchMode
from discovery_svc.surface import structured_result

__all__ = ["execute_search"]

_LISTED_SERVERS = 50


def _match(tool: Tool, already_loaded: bool, hit: SearchHit | None = None) -> ToolMatch:
    """A found tool; a query match carries its ranking's parts (browse and name matches score 0)."""
    if hit is None:
        return ToolMatch(tool, already_loaded)
    return ToolMatch(tool, already_loaded, hit.score, hit.bm25, hit.similarity, hit.exact)


# --- execution -----------------------------------------------------------------------------


def _unknown_server(scope: ToolScope, server: str) -> UnknownServerError:
    servers = list(scope.servers)
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
    scope: ToolScope, query: str, server: str | None, loaded: frozenset[str], limit: int
) -> list[ToolMatch]:
    # One ranking of every candidate, so all scores are on one scale (hybrid scores are relative to
    # the query's best BM25 hit: two searches, one of new and one of loaded tools, each had a
    # "best" of its own and showed unrelated tools at the same score). Already-loaded tools never
    # take a slot from a new tool; they are reported (``limit`` at most) when they rank among the
    # new ones.
    hits = scope.index.search(query, limit + len(loaded), server=server)
    matches: list[ToolMatch] = []
    counts = {False: 0, True: 0}  # new, already loaded
    for hit in hits:
        if counts[False] == limit:
            break
        already = hit.key in loaded
        if counts[already] < limit:
            counts[already] += 1
            matches.append(_match(scope.tool(hit.key), already, hit))
    return matches


def _by_names(
    scope: ToolScope, names: Sequence[str], server: str | None, loaded: frozenset[str]
) -> tuple[list[ToolMatch], list[NameSuggestion]]:
    matches: dict[str, ToolMatch] = {}
    missing: list[NameSuggestion] = []
    for name in names:
        tools = [t for t in scope.resolve(name) if server is None or t.server == server]
        if not tools:
            missing.append(NameSuggestion(name, tuple(scope.closest(name, server))))
        for tool in tools:
            matches.setdefault(tool.llm_name, _match(tool, tool.llm_name in loaded))
    return list(matches.values()), missing


def _manifest_result(manifest: str) -> SearchResult:
    """A call without arguments on the stable surface: the manifest, as text and as data."""
    data = structured_result((), (), (), 0, manifest)
    return SearchResult(
        mode=SearchMode.MANIFEST,
        matches=(),
        newly_loaded=(),
        result_text=manifest,
        structured_content_json=json.dumps(data, ensure_ascii=False, separators=(",", ":")),
    )


def _unsigned_result(args: SearchArgs, server: str, surface: ToolSurface) -> SearchResult:
    """A browse of a ``per_user`` server the caller has not signed in to: nothing found, and why."""
    text = unsigned_server_text(server)
    structured = ""
    if surface is ToolSurface.STABLE:
        structured = json.dumps(
            structured_result((), (), (), 0, text), ensure_ascii=False, separators=(",", ":")
        )
    return SearchResult(
        mode=args.mode, matches=(), newly_loaded=(), result_text=text, structured_content_json=structured
    )


def _browse(
    scope: ToolScope, server: str, offset: int, limit: int, loaded: frozenset[str]
) -> tuple[list[ToolMatch], tuple[int, int, int]]:
    """One page of a server's tools from ``offset``, and (first, end, total) of that page.

    Raises:
        SearchArgumentError: ``offset`` is past the server's last tool.
    """
    tools = scope.server_tools(server)
    if offset >= len(tools):
        raise SearchArgumentError(
            f"offset {offset} is past the end: server '{server}' has {len(tools)} tools "
            f"(offsets 0-{len(tools) - 1})."
        )
    chunk = tools[offset : offset + limit]
    return [_match(t, t.llm_name in loaded) for t in chunk], (offset, offset + len(chunk), len(tools))


def execute_search(
    scope: ToolScope,
    args: SearchArgs,
    *,
    loaded: Collection[str],
    max_results: int,
    browse_limit: int,
    parameters: bool = True,
    surface: ToolSurface = ToolSurface.APPEND,
    manifest: str = "",
    unsigned: Collection[str] = (),
) -> SearchResult:
    """Runs one search_tools call (``parameters``: list each found tool's parameters in the text).

    On the stable ``surface`` the text gives each found tool's whole input schema and the
    answer also comes as data (``structured_content_json``). ``mode`` is a :class:`SearchMode`.

    ``manifest`` is what a call without arguments (stable surface) answers; ``unsigned``: the
    ``per_user`` servers the caller has not signed in to (a ``server_name`` of one is answered
    with no tools and why, not as an unknown server).

    ``loaded`` are LLM names already loaded in the conversation (eager tools count as loaded too).

    Raises:
        UnknownServerError: server_name is not a server of the toolset.
        SearchArgumentError: a browse offset past the server's last tool.
    """
    if args.mode is SearchMode.MANIFEST:
        return _manifest_result(manifest)
    if args.server_name is not None and not scope.has_server(args.server_name):
        if args.server_name in unsigned:
            return _unsigned_result(args, args.server_name, surface)
        raise _unknown_server(scope, args.server_name)
    loaded_set = scope.eager | frozenset(n for n in loaded if scope.has(n))
    server = args.server_name
    missing: list[NameSuggestion] = []
    matches: list[ToolMatch] = []
    page: tuple[int, int, int] | None = None

    mode: SearchMode = args.mode
    if mode is SearchMode.TOOL_NAMES:
        assert args.tool_names is not None
        matches, missing = _by_names(scope, args.tool_names, server, loaded_set)
        if not matches and args.query is not None:
            # The query given alongside the names is the fallback.
            mode = args.without_names().mode
    if mode is SearchMode.SERVER:
        assert server is not None
        matches, page = _browse(scope, server, args.offset, browse_limit, loaded_set)
    elif mode is not SearchMode.TOOL_NAMES:
        assert args.query is not None  # validate_arguments guarantees one of the three
        matches = _query_matches(scope, args.query, server, loaded_set, max_results)
    total = page[2] if page is not None else len(matches)

    newly = tuple(m.tool for m in matches if not m.already_loaded)
    old = [m.tool for m in matches if m.already_loaded]
    missed = [(s.name, s.closest) for s in missing]
    stable = surface is ToolSurface.STABLE
    answer = Answer(args, mode, newly, old, missed, page)
    text = result_text(answer, parameters=parameters, stable_eager=scope.eager if stable else None)
    structured = ""
    if stable:
        guidance = guidance_text(answer, stable_eager=scope.eager)
        data = structured_result(newly, old, missed, total, guidance)
        structured = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return SearchResult(
        mode=mode,
        matches=tuple(matches),
        newly_loaded=newly,
        result_text=text,
        not_found=tuple(missing),
        total_matches=total,
        structured_content_json=structured,
    )
