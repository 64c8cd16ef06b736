"""Hybrid tool search: BM25 (:mod:`discovery_svc.index`) fused with dense vectors of the same tools.

:class:`DenseIndex` is the embedding matrix of one catalog version, rows in the BM25 index's doc-id
order, so a :class:`~discovery_svc.index.CandidateMask` built for the BM25 index (a toolset) filters
both. :class:`HybridIndex` has the ``search`` signature of :class:`~discovery_svc.index.SearchIndex`:
it embeds the query, takes the best candidates of each side within the same scope (server, only,
skip, candidates) and fuses them (:mod:`discovery_svc.fusion`). If the embedder fails, the search
degrades to BM25 alone: a warning and ``on_degraded`` (for a metric), never an error to the caller.

Building one is the caller's job (discovery does it off the event loop): vectors come from
:func:`discovery_svc.embedding_cache.embed_with_cache` over :func:`~discovery_svc.embeddings.embedding_text`
of the index's documents in ``index.keys`` order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Sequence
from functools import lru_cache
from typing import Unpack

import numpy as np

from discovery_svc.embeddings import Embedder, EmbedderError, Vectors
from discovery_svc.fusion import DEFAULT_FUSION, FusionConfig, fuse
from discovery_svc.index import CandidateMask, IndexScopeFields, RestrictedIndex, SearchHit, SearchIndex
from toolscout_kit.logging import get_logger

__all__ = ["DenseIndex", "HybridIndex"]

_log = get_logger(__name__)
_QUERY_CACHE = 1024  # recent query vectors kept (an LLM often repeats a search within a chat)


class DenseIndex:
    """Unit-length vectors of a catalog's tools; cosine top-k within an optional set of rows."""

    def __init__(self, vectors: Vectors) -> None:
        matrix = np.ascontiguousarray(vectors, dtype=np.float32)
        if matrix.ndim != 2:
            raise ValueError("DenseIndex needs a 2-d matrix")
        self._matrix = matrix

    def __len__(self) -> int:
        return len(self._matrix)

    @property
    def dim(self) -> int:
        return int(self._matrix.shape[1])

    def _rows(self, scope: Collection[int] | None) -> np.ndarray | None:
        """The rows to score one by one, or None to score the whole matrix (then mask it)."""
        if isinstance(scope, CandidateMask):
            # A big subset costs less as one matrix product and a mask than as a gather.
            return np.flatnonzero(scope.array()) if scope.count * 4 < len(self._matrix) else None
        if isinstance(scope, range):
            return np.arange(scope.start, scope.stop, dtype=np.intp)
        if scope is not None:
            return np.fromiter(sorted(scope), dtype=np.intp, count=len(scope))
        return None

    def similarities(self, query: Vectors, rows: Sequence[int]) -> list[float]:
        """The cosine of each of ``rows`` with the query vector."""
        values: list[float] = (self._matrix[np.asarray(rows, dtype=np.intp)] @ query).tolist()
        return values

    def search(
        self,
        query: Vectors,
        limit: int,
        *,
        scope: Collection[int] | None = None,
        banned: Collection[int] = (),
    ) -> list[tuple[int, float]]:
        """Best (row, cosine) pairs, cosine descending then row ascending.

        ``scope`` restricts rows (a :class:`CandidateMask`, a range or a set of rows); ``banned``
        rows never appear.
        """
        if limit <= 0 or not len(self._matrix):
            return []
        rows = self._rows(scope)
        if rows is not None:
            scores = self._matrix[rows] @ query
        else:
            scores = self._matrix @ query
            if isinstance(scope, CandidateMask):
                scores = np.where(scope.array(), scores, -np.inf)
        if banned:
            ban = np.fromiter(banned, dtype=np.intp, count=len(banned))
            if rows is not None:
                scores[np.isin(rows, ban)] = -np.inf
            else:
                scores[ban] = -np.inf
        n = min(limit, len(scores))
        top = np.argpartition(-scores, n - 1)[:n] if n < len(scores) else np.arange(len(scores))
        order = sorted(top.tolist(), key=lambda i: (-float(scores[i]), i))
        out: list[tuple[int, float]] = []
        for i in order:
            score = float(scores[i])
            if score == -np.inf:
                break
            out.append((int(rows[i]) if rows is not None else i, score))
        return out


class HybridIndex:
    """BM25 + dense search over one catalog version, with :class:`SearchIndex`'s ``search`` API."""

    def __init__(
        self,
        bm25: SearchIndex,
        dense: DenseIndex,
        embedder: Embedder,
        *,
        config: FusionConfig = DEFAULT_FUSION,
        on_degraded: Callable[[Exception], None] | None = None,
    ) -> None:
        if len(dense) != len(bm25):
            raise ValueError(f"{len(dense)} vectors for {len(bm25)} tools")
        self.bm25 = bm25
        self.dense = dense
        self._embedder = embedder
        self._config = config
        self._on_degraded = on_degraded
        self._embed_query = lru_cache(maxsize=_QUERY_CACHE)(embedder.embed_query)

    def __len__(self) -> int:
        return len(self.bm25)

    def query_vector(self, query: str) -> Vectors:
        """The query's vector, embedded once per distinct query (recent ones are kept).

        Blocks while the embedder works (a model call, or a request to an endpoint): callers on an
        event loop run it in a thread, and can bound the wait, before searching.

        Raises:
            EmbedderError: the embedder failed.
        """
        vector: Vectors = self._embed_query(query)
        return vector

    def restricted(self, candidates: CandidateMask) -> RestrictedIndex:
        """A view searching only ``candidates``, with this index's ``search`` signature."""
        candidates.check_owner(self.bm25)
        return RestrictedIndex(self, candidates)

    def search(self, query: str, limit: int, **where: Unpack[IndexScopeFields]) -> list[SearchHit]:
        """Fused best matches: exact names first, then BM25 and dense fused; BM25 alone on failure."""
        if limit <= 0 or not len(self.bm25):
            return []
        depth = max(limit, self._config.depth)
        lexical = self.bm25.search(query, depth, **where)
        if not query.strip():
            return lexical[:limit]
        try:
            vector = self.query_vector(query)
        except EmbedderError as err:
            _log.warning("query embedding failed; answering with BM25 alone", error=str(err))
            if self._on_degraded is not None:
                self._on_degraded(err)
            return lexical[:limit]
        scoped = self.bm25.scoped(where)
        if scoped is None:
            return []
        scope, banned = scoped
        keys = self.bm25.keys
        semantic = [(keys[i], s) for i, s in self.dense.search(vector, depth, scope=scope, banned=banned)]
        hits = fuse(lexical, semantic, limit, self._config)
        # A word match beyond the dense candidates still gets its cosine (to explain the ranking).
        rows = {h.key: i for h in hits if h.similarity is None and (i := self.bm25.doc_id(h.key)) is not None}
        if not rows:
            return hits
        cosines = dict(zip(rows, self.dense.similarities(vector, list(rows.values())), strict=True))
        return [dataclasses.replace(h, similarity=cosines[h.key]) if h.key in cosines else h for h in hits]
