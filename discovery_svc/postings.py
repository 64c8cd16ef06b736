"""BM25 postings of one catalog and how a query adds them up, within a scope.

A term's :class:`Posting` holds its precomputed contribution to each document holding it
(:class:`~discovery_svc.index.SearchIndex` builds them). A query's scores are the sum of its terms'
postings, computed three ways, each returning the exact scores of every document that can make the
top ``limit`` (hits equal a full scan's; unit tests check it):

* :func:`score_each` — document by document, for a small scope (a server, an ``only`` list);
* :func:`top_scores` — merging postings with MaxScore, skipping the work that cannot change the top;
  a one-term query reads the head of the term's ranking;
* :func:`dense_scores` — a query of common terms in a big catalog ("specific information" at 50,000
  tools: tens of thousands of postings) summed with one numpy ``bincount``, keeping the documents
  that reach a lower bound of the ``limit``-th score.

A scope is a :class:`CandidateMask` (a toolset: one byte per tool), a ``range`` (one server's
tools) or a set of doc ids.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from itertools import compress
from operator import add, itemgetter
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "DENSE_MIN_POSTINGS",
    "CandidateMask",
    "Posting",
    "best_scores",
    "dense_scores",
    "score_each",
    "top_scores",
]

_TOP_WEIGHTS = 20  # per-term best weights kept for cheap MaxScore thresholds
_RANKED_MIN_DOCS = 256  # terms in more documents also keep their postings as arrays in rank order
# A query adding up at least this many postings (and 1/32 of the catalog) is summed in numpy.
DENSE_MIN_POSTINGS = 2000

# Doc ids -> which of them a search may return (its scope, minus skipped tools), vectorised.
_Ids = npt.NDArray[np.integer[Any]]
_Keep = Callable[[_Ids], npt.NDArray[np.bool_]]


class CandidateMask:
    """A subset of one index's tools (a toolset, a caller's inline filter): one byte per tool.

    Built by :meth:`SearchIndex.mask` and valid only for that index (doc ids are its own). Cheap to
    keep per toolset: 50,000 tools cost 50 KB. Membership tests run in C (``compress`` over the
    bytes); :meth:`array` is a zero-copy boolean view for vectorised (dense) scoring.
    """

    __slots__ = ("_bits", "_owner", "count")

    def __init__(self, bits: bytearray, owner: object) -> None:
        self._bits = bits
        self._owner = owner
        self.count = bits.count(1)

    def __contains__(self, doc_id: object) -> bool:
        return isinstance(doc_id, int) and 0 <= doc_id < len(self._bits) and self._bits[doc_id] == 1

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[int]:
        return iter(self.ids())

    def array(self) -> npt.NDArray[np.bool_]:
        return np.frombuffer(self._bits, dtype=np.bool_)

    def ids(self) -> list[int]:
        ids: list[int] = np.flatnonzero(self.array()).tolist()
        return ids

    def keep(self, doc_ids: Iterable[int]) -> list[int]:
        """The given doc ids that are in the mask, in order."""
        ids = list(doc_ids)
        return list(compress(ids, map(self._bits.__getitem__, ids)))

    def check_owner(self, owner: object) -> None:
        if owner is not self._owner:
            raise ValueError("CandidateMask used with an index it was not built for")


@dataclass(frozen=True, slots=True)
class Posting:
    """The BM25 contribution of one term to each document holding it."""

    weights: dict[int, float]  # doc id -> contribution; ints/floats only, so the GC never scans it
    top: tuple[float, ...]  # the largest contributions, descending (top[0] bounds any document's)
    # For common terms, every posting in rank order (contribution descending, doc id ascending) as
    # arrays: a one-term query ("get", "search") over a big catalog reads the head only, and a
    # query of common terms is summed in numpy (``_dense_scores``).
    ranked_ids: npt.NDArray[np.int32] | None = None
    ranked_weights: npt.NDArray[np.float64] | None = None

    @classmethod
    def of(cls, weights: dict[int, float]) -> Posting:
        if len(weights) <= _TOP_WEIGHTS:
            return cls(weights, tuple(sorted(weights.values(), reverse=True)))
        if len(weights) <= _RANKED_MIN_DOCS:
            return cls(weights, tuple(heapq.nlargest(_TOP_WEIGHTS, weights.values())))
        ranked = sorted(weights.items(), key=_rank_key)
        ids = np.fromiter((d for d, _ in ranked), dtype=np.int32, count=len(ranked))
        values = np.fromiter((w for _, w in ranked), dtype=np.float64, count=len(ranked))
        return cls(weights, tuple(w for _, w in ranked[:_TOP_WEIGHTS]), ids, values)

    def floor(self, limit: int) -> float:
        """A lower bound of the ``limit``-th best score of any query containing this term."""
        return self.top[limit - 1] if limit <= len(self.top) else 0.0

    def arrays(self) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.float64]]:
        """Doc ids and contributions as arrays (rank order when kept, else built now: small)."""
        if self.ranked_ids is not None and self.ranked_weights is not None:
            return self.ranked_ids, self.ranked_weights
        n = len(self.weights)
        return (
            np.fromiter(self.weights.keys(), dtype=np.int32, count=n),
            np.fromiter(self.weights.values(), dtype=np.float64, count=n),
        )

    def best_in(self, keep: _Keep, limit: int) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.float64]]:
        """The term's ``limit`` best documents that ``keep`` (ids -> bool array) accepts, in rank
        order (fewer when fewer qualify). Reads a growing head of the ranking, not all of it."""
        assert self.ranked_ids is not None
        assert self.ranked_weights is not None
        window = 4 * limit + 16
        while True:
            ids = self.ranked_ids[:window]
            chosen = np.flatnonzero(keep(ids))[:limit]
            if len(chosen) == limit or window >= len(self.ranked_ids):
                return ids[chosen], self.ranked_weights[chosen]
            window *= 4


def _rank_key(item: tuple[int, float]) -> tuple[float, int]:
    return (-item[1], item[0])


def best_scores(scores: dict[int, float], n: int) -> list[tuple[int, float]]:
    """The ``n`` best (doc id, score) pairs, score descending then doc id ascending."""
    if n <= 0 or not scores:
        return []
    top = heapq.nlargest(n, scores.items(), key=itemgetter(1))  # C-level key, no Python frames
    cut = top[-1][1]
    # nlargest breaks ties by dict order; when ties straddle the cut, settle them by doc id.
    if len(scores) > n and list(scores.values()).count(cut) > sum(1 for _, s in top if s == cut):
        above = [item for item in top if item[1] > cut]
        tied = sorted(d for d, s in scores.items() if s == cut)
        top = above + [(d, cut) for d in tied[: n - len(above)]]
    return sorted(top, key=_rank_key)


def score_each(postings: list[Posting], candidates: Iterable[int]) -> dict[int, float]:
    """Scores of a small candidate set (one server, an ``only`` list), looked up term by term."""
    scores: dict[int, float] = {}
    for doc_id in candidates:
        total = 0.0
        for posting in postings:
            total += posting.weights.get(doc_id, 0.0)
        if total > 0.0:
            scores[doc_id] = total
    return scores


def _merge(scores: dict[int, float], weights: dict[int, float]) -> None:
    """``scores += weights`` with the loops in C (set algebra, map/zip), not in Python bytecode."""
    common = list(scores.keys() & weights.keys())
    sums = list(map(add, map(scores.__getitem__, common), map(weights.__getitem__, common)))
    scores.update(weights)  # new documents get the weight; shared ones are fixed on the next line
    scores.update(zip(common, sums, strict=True))


def top_scores(
    postings: list[Posting],
    limit: int,
    banned: set[int],
    scope: Collection[int] | None,
    must: Collection[int],
) -> dict[int, float]:
    """Exact BM25 scores of every document that can still reach the top ``limit`` (MaxScore).

    Terms are merged in decreasing order of their best contribution. Once the terms left could not
    lift a document holding none of the merged terms above the current ``limit``-th partial score,
    no new document can enter the top: the remaining terms are only looked up for the surviving
    candidates. Common terms ("get", "data") in a 50,000-tool catalog thus rarely cost a pass over
    their postings, and the top results equal those of scoring every document.
    """
    if len(postings) == 1 and postings[0].ranked_ids is not None:
        # The term's best documents that pass the filter: a prefix of its filtered ranking, exact.
        weights = postings[0].weights
        ids, values = postings[0].best_in(_acceptor(scope, banned), limit)
        return dict(zip(ids.tolist(), values.tolist(), strict=True)) | {
            d: weights[d] for d in must if d in weights
        }
    postings = sorted(postings, key=lambda p: -p.top[0])
    remaining = [0.0] * (len(postings) + 1)
    for i in range(len(postings) - 1, -1, -1):
        remaining[i] = remaining[i + 1] + postings[i].top[0]
    scores: dict[int, float] = {}
    floor = 0.0  # a cheap lower bound of the current limit-th score: no pass over the scores
    for i, posting in enumerate(postings):
        if remaining[i] < floor:
            return _refine(scores, postings[i:], remaining[i], limit, must)
        if len(scores) >= limit and len(scores) < len(posting.weights):
            # Computing the exact threshold is cheaper than merging this posting: try it.
            threshold = heapq.nlargest(limit, scores.values())[-1]
            if remaining[i] < threshold:
                return _refine(scores, postings[i:], remaining[i], limit, must)
        # Scoped: only this posting's in-scope documents join (earlier ones were filtered already).
        weights = posting.weights if scope is None else _restrict(posting.weights, scope)
        if scores:
            _merge(scores, weights)
        else:
            scores = weights.copy() if scope is None else weights
        for doc_id in banned:
            scores.pop(doc_id, None)
        if scope is None and not banned:
            floor = max(floor, posting.floor(limit))
    return scores


def _acceptor(scope: Collection[int] | None, banned: set[int]) -> _Keep:
    """A vectorised filter: doc id array -> boolean array of the ids in ``scope`` and not banned."""
    ban = np.fromiter(banned, dtype=np.int64, count=len(banned)) if banned else None
    if isinstance(scope, CandidateMask):
        bits = scope.array()

        def in_scope(ids: _Ids) -> npt.NDArray[np.bool_]:
            return bits[ids]

    elif isinstance(scope, range):
        lo, hi = scope.start, scope.stop

        def in_scope(ids: _Ids) -> npt.NDArray[np.bool_]:
            return (ids >= lo) & (ids < hi)

    elif scope is not None:
        members = np.fromiter(scope, dtype=np.int64, count=len(scope))

        def in_scope(ids: _Ids) -> npt.NDArray[np.bool_]:
            return np.isin(ids, members)

    else:

        def in_scope(ids: _Ids) -> npt.NDArray[np.bool_]:
            return np.ones(len(ids), dtype=np.bool_)

    if ban is None:
        return in_scope

    def allowed(ids: _Ids) -> npt.NDArray[np.bool_]:
        return in_scope(ids) & ~np.isin(ids, ban)

    return allowed


def dense_scores(
    postings: list[Posting],
    limit: int,
    banned: set[int],
    scope: Collection[int] | None,
    size: int,
    must: Collection[int],
) -> dict[int, float]:
    """Exact BM25 scores of the documents that can make the top ``limit``, summed in numpy.

    Every document holding a term scores at least that term's contribution, so the ``limit``-th
    best in-scope contribution of any single term bounds the ``limit``-th best score from below:
    only documents at or above it are returned (with the exact-name ones). Postings are added in
    the order the MaxScore path merges them (decreasing best contribution), so each document's
    sum is the same floating-point sum.
    """
    postings = sorted(postings, key=lambda p: -p.top[0])
    keep = _acceptor(scope, banned)
    bound = 0.0
    for posting in postings:
        if posting.ranked_ids is not None:
            _, best = posting.best_in(keep, limit)
            if len(best) == limit:
                bound = max(bound, float(best[-1]))
    arrays = [posting.arrays() for posting in postings]
    sums = np.bincount(
        np.concatenate([ids for ids, _ in arrays]),
        weights=np.concatenate([values for _, values in arrays]),
        minlength=size,
    )
    found = np.flatnonzero(sums >= bound) if bound > 0.0 else np.flatnonzero(sums)
    found = found[keep(found)]
    scores = dict(zip(found.tolist(), sums[found].tolist(), strict=True))
    scores.update((d, float(sums[d])) for d in must if sums[d] > 0.0)
    return scores


def _restrict(scores: dict[int, float], scope: Collection[int]) -> dict[int, float]:
    if isinstance(scope, CandidateMask):
        return {d: scores[d] for d in scope.keep(scores)}
    return {d: scores[d] for d in scores.keys() & scope}


def _refine(
    scores: dict[int, float], rest: list[Posting], bound: float, limit: int, must: Collection[int]
) -> dict[int, float]:
    """Finish scoring the candidates that may still make the top ``limit`` (and exact-name docs)."""
    threshold = heapq.nlargest(limit, scores.values())[-1]
    # A candidate whose partial score plus everything the remaining terms could add stays below
    # the threshold cannot make the page. compress/map keep the pass over all candidates in C.
    keep = compress(scores.keys(), map((threshold - bound).__le__, scores.values()))
    survivors = {d: scores[d] for d in keep}
    survivors.update((d, scores[d]) for d in must if d in scores)
    for posting in rest:
        weights = posting.weights
        for doc_id in survivors.keys() & weights.keys():
            survivors[doc_id] += weights[doc_id]
    return survivors
