"""What searches of one toolset run against: a view of the catalog's index through a mask.

A :class:`SearchScope` holds nothing that grows with the catalog beyond the toolset's candidate
mask (one byte per tool): lookups go to the shared :class:`~discovery_svc.catalog_index.CatalogIndex`
and are filtered by the mask.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Sequence
from typing import Protocol, Unpack

from toolscout.client import Tool

from discovery_svc.catalog_index import CatalogIndex
from discovery_svc.index import CandidateMask, RestrictedIndex, ScopeFields, Searcher, SearchHit

__all__ = ["SearchScope", "ToolScope"]

_DIFFLIB_POOL = 1000


class RankedSearch(Protocol):
    def search(self, query: str, limit: int, **scope: Unpack[ScopeFields]) -> list[SearchHit]: ...


class ToolScope(Protocol):
    """What a ``search_tools`` call runs against (:func:`~discovery_svc.search_tool.execute_search`):
    a :class:`SearchScope`, or a principal's :class:`~discovery_svc.user_index.MergedScope`."""

    eager: frozenset[str]
    servers: tuple[str, ...]

    @property
    def index(self) -> RankedSearch: ...

    def has(self, llm_name: str) -> bool: ...

    def tool(self, llm_name: str) -> Tool: ...

    def has_server(self, server: str) -> bool: ...

    def server_tools(self, server: str) -> tuple[Tool, ...]: ...

    def resolve(self, name: str) -> tuple[Tool, ...]: ...

    def closest(self, name: str, server: str | None, n: int = 3) -> tuple[str, ...]: ...


class SearchScope:
    """One toolset of one catalog version: its tools (catalog order), mask and eager tools."""

    __slots__ = ("_searcher", "base", "candidates", "eager", "servers", "tools")

    def __init__(
        self,
        base: CatalogIndex,
        tools: Sequence[Tool] | None = None,
        eager: Collection[str] = (),
        *,
        candidates: CandidateMask | None = None,
        searcher: Searcher | None = None,
    ) -> None:
        """``tools`` None means every tool of the catalog; ``candidates`` is their mask when the
        caller already built it."""
        self.base = base
        self.tools: tuple[Tool, ...] = base.catalog.tools if tools is None else tuple(tools)
        self.candidates = base.mask(self.tools) if tools is not None and candidates is None else candidates
        self.eager = frozenset(eager)
        self.servers: tuple[str, ...] = tuple(sorted({t.server for t in self.tools}))
        self._searcher = searcher

    def using(self, searcher: Searcher) -> SearchScope:
        """The same scope answering queries with ``searcher`` (e.g. BM25 alone when hybrid cannot)."""
        clone = object.__new__(SearchScope)
        for slot in SearchScope.__slots__:
            setattr(clone, slot, getattr(self, slot))
        clone._searcher = searcher
        return clone

    @property
    def index(self) -> RestrictedIndex:
        """Ranked search within the toolset (hybrid once the catalog's dense side is ready)."""
        return RestrictedIndex(self._searcher or self.base.searcher, self.candidates)

    @property
    def lexical(self) -> RestrictedIndex:
        """BM25 alone within the toolset."""
        return RestrictedIndex(self.base.bm25, self.candidates)

    def __len__(self) -> int:
        return len(self.tools)

    def has(self, llm_name: str) -> bool:
        return self.base.contains(self.candidates, llm_name)

    def tool(self, llm_name: str) -> Tool:
        """The toolset's tool called ``llm_name``. Raises KeyError when it is not in the toolset."""
        tool = self.base.catalog.by_llm_name(llm_name)
        if tool is None or not self.has(llm_name):
            raise KeyError(llm_name)
        return tool

    def has_server(self, server: str) -> bool:
        return server in self.servers

    def server_tools(self, server: str) -> tuple[Tool, ...]:
        """The toolset's tools of ``server``, in catalog order."""
        tools = self.base.catalog.server_tools(server)
        if self.candidates is None:
            return tools
        return tuple(t for t in tools if self.has(t.llm_name))

    def resolve(self, name: str) -> tuple[Tool, ...]:
        """Tools called ``name`` in the toolset: by LLM name, else by server tool name, else
        case-insensitively."""
        found = self.base.resolve(name)
        if self.candidates is None:
            return found
        return tuple(t for t in found if self.has(t.llm_name))

    def closest(self, name: str, server: str | None, n: int = 3) -> tuple[str, ...]:
        """The existing LLM names closest to ``name`` (spelling first, then shared words)."""
        hits = self.lexical.search(name, 50, server=server)
        candidates = {h.key for h in hits}
        pool: Sequence[Tool] = self.tools if server is None else self.server_tools(server)
        # difflib over every name costs ~20 µs a name: fine for small catalogs; beyond that only
        # the tools sharing a word with the name are compared (misspelt words still share others).
        if len(pool) <= _DIFFLIB_POOL:
            candidates.update(t.llm_name for t in pool)
            candidates.update(t.name for t in pool)
        close = difflib.get_close_matches(name, sorted(candidates), n=n, cutoff=0.5)
        keys = [tools[0].llm_name for c in close if (tools := self.resolve(c))]
        keys += [h.key for h in hits]
        return tuple(dict.fromkeys(keys))[:n]
