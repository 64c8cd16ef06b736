"""What search needs from one catalog version, built once and shared by every toolset.

A :class:`CatalogIndex` holds the BM25 index over every tool of the catalog and the lookups by
name; a toolset (configured, or given inline by a caller) is a
:class:`~discovery_svc.index.CandidateMask` over it, applied at query time, so nothing that grows
with the catalog is built per toolset. BM25 statistics (IDF, average length) are the catalog's.

In hybrid mode the dense side (an embedding per tool) is built later, off the event loop, and
:meth:`CatalogIndex.activate` swaps the searcher from the BM25 index to the
:class:`~discovery_svc.hybrid.HybridIndex` once it is ready; until then every search is BM25.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from toolscout.client import Tool

from discovery_svc.catalog import Catalog
from discovery_svc.index import CandidateMask, SearchDoc, Searcher, SearchIndex, normalize_name

__all__ = ["CatalogIndex", "IndexFactory", "search_doc"]


class IndexFactory(Protocol):
    def __call__(self, docs: Sequence[SearchDoc]) -> SearchIndex: ...


def search_doc(tool: Tool) -> SearchDoc:
    return SearchDoc(tool.llm_name, tool.server, tool.name, tool.description, tool.input_schema)


class CatalogIndex:
    """The BM25 index and name lookups of one catalog version (immutable but for the searcher)."""

    def __init__(self, catalog: Catalog, index_factory: IndexFactory = SearchIndex) -> None:
        self.catalog = catalog
        self.version = catalog.version
        self.bm25 = index_factory([search_doc(t) for t in catalog.tools])
        self._searcher: Searcher = self.bm25
        by_name: dict[str, list[Tool]] = {}
        by_norm: dict[str, list[Tool]] = {}
        for tool in catalog.tools:
            by_name.setdefault(tool.name, []).append(tool)
            by_norm.setdefault(normalize_name(tool.name), []).append(tool)
            if tool.llm_name != tool.name:
                by_norm.setdefault(normalize_name(tool.llm_name), []).append(tool)
        self._by_name = {k: tuple(v) for k, v in by_name.items()}
        self._by_norm = {k: tuple(v) for k, v in by_norm.items()}

    def __len__(self) -> int:
        return len(self.catalog)

    @property
    def searcher(self) -> Searcher:
        """What answers queries now: the BM25 index, or the hybrid index once it is ready."""
        return self._searcher

    @property
    def hybrid(self) -> bool:
        return self._searcher is not self.bm25

    def activate(self, searcher: Searcher) -> None:
        """Answers queries with ``searcher`` from now on (one reference swap: searches in flight
        finish on the one they started with)."""
        self._searcher = searcher

    def docs(self) -> list[SearchDoc]:
        """Every tool's document in the index's doc-id order (row i of a dense matrix is doc i)."""
        catalog = self.catalog
        docs = []
        for key in self.bm25.keys:
            tool = catalog.by_llm_name(key)
            assert tool is not None  # the index was built from this catalog
            docs.append(search_doc(tool))
        return docs

    def mask(self, tools: Iterable[Tool]) -> CandidateMask | None:
        """The candidate mask of ``tools``, or None when they are the whole catalog (no filter)."""
        mask = self.bm25.mask(t.llm_name for t in tools)
        return None if mask.count == len(self.bm25) else mask

    def contains(self, mask: CandidateMask | None, llm_name: str) -> bool:
        """Whether ``llm_name`` is a tool of the catalog within ``mask`` (None: the whole catalog)."""
        doc_id = self.bm25.doc_id(llm_name)
        return doc_id is not None and (mask is None or doc_id in mask)

    def resolve(self, name: str) -> tuple[Tool, ...]:
        """Tools called ``name``: by LLM name, else by server tool name, else case-insensitively."""
        tool = self.catalog.by_llm_name(name)
        if tool is not None:
            return (tool,)
        return self._by_name.get(name) or self._by_norm.get(normalize_name(name), ())
