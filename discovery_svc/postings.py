"""BM25 postings of one catalog in flat arrays, and a query's exact top results over them (MaxScore).

:class:`Postings` holds every term's precomputed contribution to each document holding it
(:class:`~discovery_svc.index.SearchIndex` computes them) in three flat numpy arrays, one slice
per term with doc ids ascending: 12 bytes a posting, against about 100 for a dict of Python ints
and floats, and nothing for the garbage collector to scan. Terms in many documents also keep
their postings' rank order (contribution descending), so a query reads the head of a common term
instead of all of it.

:func:`top_candidates` returns the exact score of every document that can make a query's top
``limit`` within a scope, without scoring every posting (MaxScore, Turtle and Flood 1995):

1. Terms in one fixed order (:meth:`TermPostings.order`: largest contribution first). A document
   holding none of the first j terms scores at most what the rest can add (``tail[j]``, the sum
   of their largest contributions); once that is below a lower bound of the ``limit``-th score
   (the *threshold*), such documents are never read: only the postings of that prefix, the
   *essential* terms (the rare, high-IDF words of a sentence), are summed.
2. The threshold starts at the ``limit``-th best in-scope contribution of a common term (read
   from its rank order) and rises with the partial sums of the prefix summed so far (lower
   bounds of final scores); the prefix is summed in rounds of doubling size (one numpy
   ``bincount``), so a long query's common words at the end are skipped.
3. The other terms are then added only for the documents whose partial sum plus what the
   remaining terms could add still reaches the threshold (looked up by binary search, or
   scatter-added when that is cheaper), dropping the rest after each term; the threshold keeps
   rising with the partial sums (a cheap lower bound of their ``limit``-th best:
   :func:`_kth_bound`).

Every document's score is added up term by term in the same order whichever way it is reached,
so the top results and their scores equal scoring every posting (:func:`exhaustive_scores`); a
unit property test checks it on random catalogs, queries, masks and scopes. A small explicit
scope (an ``only`` list) is scored document by document; a one-term query reads the head of the
term's rank order.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Sequence
from itertools import compress
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

__all__ = [
    "CandidateMask",
    "Postings",
    "Scope",
    "TermPostings",
    "exhaustive_scores",
    "rank_top",
    "top_candidates",
]

_RANKED_MIN_DOCS = 256  # terms in more documents keep their rank order
# Pruning compares float sums taken in different orders: a relative slack far above rounding error.
_SLACK = 1e-9
# Terms whose postings a search keeps at hand (about 0.5 KB each).
_CACHED_TERMS = 4096
# Chunks of the cheap lower bound of a k-th best partial score (_kth_bound).
_CHUNKS = 256

_Ids = npt.NDArray[np.int32]
_Scores = npt.NDArray[np.float64]


class CandidateMask:
    """A subset of one index's tools (a toolset, a caller's inline filter): one byte per tool.

    Built by :meth:`SearchIndex.mask` and valid only for that index (doc ids are its own). Cheap to
    keep per toolset: 50,000 tools cost 50 KB. Membership tests run in C (``compress`` over the
    bytes); :meth:`array` is a zero-copy boolean view for vectorised scoring.
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


class TermPostings(NamedTuple):
    """One term's postings (views into :class:`Postings`' arrays)."""

    ids: npt.NDArray[np.int32]  # doc ids, ascending
    weights: npt.NDArray[np.float64]  # the term's contribution to each
    upper: float  # the largest contribution (within the scope's range, once clipped)
    rank: npt.NDArray[np.int32] | None  # positions in rank order (common terms only)
    best: float  # the largest contribution in the catalog: fixes the order terms are added in

    @staticmethod
    def order(terms: Iterable[TermPostings]) -> list[TermPostings]:
        """The order every search adds a document's contributions in: the term with the largest
        contribution in the catalog first, then in query order (a stable sort)."""
        return sorted(terms, key=lambda t: -t.best)


class Postings:
    """Every term's postings of one catalog, in flat arrays (one slice per term)."""

    __slots__ = ("_cache", "_rank", "_rank_at", "_start", "_term", "_upper", "_weights", "ids")

    def __init__(
        self, terms: Sequence[str], term_of: npt.ArrayLike, doc_of: npt.ArrayLike, weight: npt.ArrayLike
    ) -> None:
        """``terms``: the vocabulary; the three columns give one posting each (term number, doc
        id, contribution), doc ids non-decreasing (the order documents are read in)."""
        self._term = {term: i for i, term in enumerate(terms)}
        # The postings of recently searched terms (their views cost more to make than to keep).
        self._cache: dict[str, TermPostings] = {}
        term_arr = np.asarray(term_of, dtype=np.int32)
        order = np.argsort(term_arr, kind="stable")  # by term, doc ids ascending within each
        self.ids = np.asarray(doc_of, dtype=np.int32)[order]
        self._weights = np.asarray(weight, dtype=np.float64)[order]
        counts = np.bincount(term_arr, minlength=len(terms))
        self._start = np.zeros(len(terms) + 1, dtype=np.int64)
        np.cumsum(counts, out=self._start[1:])
        self._upper = (
            np.maximum.reduceat(self._weights, self._start[:-1]) if len(self._weights) else np.zeros(0)
        )
        if len(terms) and (counts == 0).any():
            raise ValueError("every term needs a posting")
        # Rank order of common terms: positions within the term's slice, best contribution first
        # (ties by doc id), concatenated; _rank_at[t] is where term t's run starts (-1: none).
        self._rank_at = np.full(len(terms), -1, dtype=np.int64)
        runs: list[npt.NDArray[np.int32]] = []
        offset = 0
        for t in np.flatnonzero(counts > _RANKED_MIN_DOCS).tolist():
            lo, hi = int(self._start[t]), int(self._start[t + 1])
            runs.append(np.argsort(-self._weights[lo:hi], kind="stable").astype(np.int32))
            self._rank_at[t] = offset
            offset += hi - lo
        self._rank = np.concatenate(runs) if runs else np.zeros(0, dtype=np.int32)

    def __len__(self) -> int:
        return len(self._term)

    def nbytes(self) -> int:
        arrays = (self.ids, self._weights, self._start, self._upper, self._rank_at, self._rank)
        return sum(a.nbytes for a in arrays)

    def document_frequency(self, term: str) -> int:
        t = self._term.get(term)
        return 0 if t is None else int(self._start[t + 1] - self._start[t])

    def get(self, term: str) -> TermPostings | None:
        found = self._cache.get(term)
        if found is not None:
            return found
        t = self._term.get(term)
        if t is None:
            return None
        lo, hi = int(self._start[t]), int(self._start[t + 1])
        at = int(self._rank_at[t])
        rank = self._rank[at : at + hi - lo] if at >= 0 else None
        upper = float(self._upper[t])
        found = TermPostings(self.ids[lo:hi], self._weights[lo:hi], upper, rank, upper)
        if len(self._cache) >= _CACHED_TERMS:
            self._cache.clear()
        self._cache[term] = found
        return found


class Scope:
    """Which doc ids a search may return: a mask, a contiguous range (one server), an explicit
    set (``only``), or all; minus ``banned`` (skipped tools). Membership is one boolean array
    (or a range test): numpy's set operations sort, which costs more than a whole search."""

    __slots__ = ("allowed", "hi", "lo", "members", "size")

    def __init__(self, scope: Collection[int] | None, banned: Collection[int], size: int) -> None:
        self.size = size
        self.lo, self.hi = 0, size
        self.members: _Ids | None = None
        allowed: npt.NDArray[np.bool_] | None = None
        if isinstance(scope, CandidateMask):
            allowed = scope.array()
        elif isinstance(scope, range):
            self.lo, self.hi = scope.start, scope.stop
        elif scope is not None:
            self.members = np.sort(np.fromiter(scope, dtype=np.int32, count=len(scope)))
            allowed = np.zeros(size, dtype=np.bool_)
            allowed[self.members] = True
        if banned:
            allowed = np.ones(size, dtype=np.bool_) if allowed is None else allowed.copy()
            allowed[np.fromiter(banned, dtype=np.int32, count=len(banned))] = False
        self.allowed = allowed

    @property
    def whole(self) -> bool:
        return self.lo == 0 and self.hi == self.size

    def keep(self, ids: npt.NDArray[np.integer[Any]]) -> npt.NDArray[np.bool_] | None:
        """Which of ``ids`` are in scope (None: all of them)."""
        ok = self.allowed[ids] if self.allowed is not None else None
        if not self.whole:
            inside = (ids >= self.lo) & (ids < self.hi)
            ok = inside if ok is None else ok & inside
        return ok

    def filter(self, ids: _Ids) -> _Ids:
        ok = self.keep(ids)
        return ids if ok is None else ids[ok]

    def clip(self, term: TermPostings) -> TermPostings:
        """The term's postings inside the scope's doc-id range."""
        if self.whole:
            return term
        lo, hi = np.searchsorted(term.ids, (self.lo, self.hi)).tolist()
        weights = term.weights[lo:hi]
        upper = float(weights.max()) if len(weights) else 0.0
        rank = term.rank if hi - lo == len(term.ids) else None
        return TermPostings(term.ids[lo:hi], weights, upper, rank, term.best)


def exhaustive_scores(terms: Sequence[TermPostings], ids: _Ids) -> _Scores:
    """Exact BM25 scores of ``ids`` (sorted or not): the terms' contributions added in the order
    given (:meth:`TermPostings.order`, for a search's scores), one float addition per term, so
    every way of scoring a document gives the same float."""
    total = np.zeros(len(ids), dtype=np.float64)
    for term in terms:
        if not len(term.ids) or not len(ids):
            continue
        pos = np.minimum(np.searchsorted(term.ids, ids), len(term.ids) - 1)
        total += np.where(term.ids[pos] == ids, term.weights[pos], 0.0)
    return total


def _ranked_head(term: TermPostings, scope: Scope, limit: int) -> npt.NDArray[np.int32]:
    """Positions (in rank order) of the term's best in-scope documents: at least ``limit`` of
    them, or all when fewer are in scope. Reads a growing head of the term's rank order."""
    assert term.rank is not None
    window = 4 * limit + 16
    while True:
        positions = term.rank[:window]
        ok = scope.keep(term.ids[positions])
        chosen = positions if ok is None else positions[ok]
        if len(chosen) >= limit or window >= len(term.rank):
            return chosen
        window *= 4


def _head_bound(term: TermPostings, scope: Scope, limit: int) -> float:
    """The ``limit``-th best in-scope contribution of a common term (0.0: fewer in scope): every
    document holding the term scores at least its contribution, so this bounds the query's
    ``limit``-th score from below."""
    chosen = _ranked_head(term, scope, limit)
    return float(term.weights[chosen[limit - 1]]) if len(chosen) >= limit else 0.0


def _single(term: TermPostings, scope: Scope, limit: int) -> tuple[_Ids, _Scores]:
    """A one-term query over a common term: its best in-scope documents, read from the rank
    order."""
    # Rank order breaks ties by doc id, as the ranking does.
    chosen = _ranked_head(term, scope, limit)[:limit]
    return term.ids[chosen], term.weights[chosen]


def _kth(scores: _Scores, k: int) -> float:
    """The ``k``-th largest score (0.0 when there are fewer)."""
    if len(scores) < k:
        return 0.0
    return float(np.partition(scores, len(scores) - k)[len(scores) - k])


def _kth_bound(scores: _Scores, k: int) -> float:
    """A lower bound of the ``k``-th largest score (0.0 when there are fewer), cheaper than
    :func:`_kth` on long arrays: the ``k``-th largest of the maxima of ``_CHUNKS`` disjoint chunks
    (``k`` different scores reach it). Equal to it unless two of the best share a chunk."""
    n = len(scores)
    if n <= 4 * _CHUNKS:
        return _kth(scores, k)
    maxima = np.maximum.reduceat(scores, np.arange(0, n, -(-n // _CHUNKS)))
    return _kth(maxima, k)


def top_candidates(
    found: Sequence[TermPostings], limit: int, scope: Scope, must: Sequence[int]
) -> tuple[_Ids, _Scores]:
    """Doc ids and exact scores of every in-scope document that can make the query's top
    ``limit``, and of the ``must`` documents (exact-name matches) holding a query term.

    ``found``: the postings of the query's distinct terms, in query order. Documents sharing no
    term with the query are not returned. Every score is the sum of the document's contributions
    in one order (best contribution first, then query order), as :func:`exhaustive_scores` adds.
    """
    must_ids = np.asarray(must, dtype=np.int32)
    members = scope.members
    if members is None and not scope.whole:
        members = np.arange(scope.lo, scope.hi, dtype=np.int32)
    if members is not None and len(members) * len(found) <= sum(len(t.ids) for t in found):
        # A small scope (an ``only`` list, a server): score each of its documents.
        ids = scope.filter(members)
        return _positive(ids, exhaustive_scores(TermPostings.order(found), ids))
    terms = TermPostings.order(t for t in (scope.clip(t) for t in found) if len(t.ids))
    if not terms or limit <= 0:
        return _positive(must_ids, exhaustive_scores(terms, must_ids))
    if len(terms) == 1 and terms[0].rank is not None:
        ids, scores = _single(terms[0], scope, limit)
        extra = _without(must_ids, ids)
        if len(extra):
            ids = np.concatenate([ids, extra])
            scores = np.concatenate([scores, exhaustive_scores(terms, extra)])
        return _positive(ids, scores)

    docs, scores = _max_score(terms, limit, scope)
    extra = _without(must_ids, docs)
    if len(extra):
        docs = np.concatenate([docs, extra])
        scores = np.concatenate([scores, exhaustive_scores(terms, extra)])
    return _positive(docs, scores)


class _Essential(NamedTuple):
    """The sums of a MaxScore search's essential terms."""

    sums: _Scores  # per doc id: the sum of the first ``done`` terms' contributions
    docs: _Ids  # the in-scope documents holding one of them
    done: int
    threshold: float  # a lower bound of the limit-th score


def _max_score(terms: list[TermPostings], limit: int, scope: Scope) -> tuple[_Ids, _Scores]:
    """Exact scores of the documents that can make the top ``limit`` (and maybe a few more)."""
    # ``tail[j]``: the most terms j.. can add to any document.
    tail = [0.0] * (len(terms) + 1)
    for j in range(len(terms) - 1, -1, -1):
        tail[j] = tail[j + 1] + terms[j].upper
    sums, docs, done, threshold = _essential(terms, tail, limit, scope)
    # Only documents holding an essential term can reach the threshold. The other terms are added
    # for those that still can with what the remaining terms could add, dropping the rest after
    # each term: looked up by binary search, or scatter-added while that is cheaper.
    cut = threshold * (1.0 - _SLACK)
    partial = sums[docs]
    for j in range(done, len(terms)):
        if cut > 0.0:
            reach = partial + tail[j] >= cut
            # Compacted only when that drops a good share: a kept document that cannot reach the
            # threshold costs an addition per term and is dropped at the end.
            if 4 * np.count_nonzero(reach) < 3 * len(docs):
                docs, partial = docs[reach], partial[reach]
        term = terms[j]
        if len(docs) * 4 > len(term.ids):
            sums[term.ids] += term.weights  # doc ids are unique within a term: a plain scatter-add
            partial = sums[docs]
        else:
            pos = np.minimum(np.searchsorted(term.ids, docs), len(term.ids) - 1)
            partial = partial + np.where(term.ids[pos] == docs, term.weights[pos], 0.0)
            sums[docs] = partial
        if j + 1 < len(terms) and len(docs) > limit:
            # The partial sums grew: a higher lower bound of the limit-th score drops more
            # documents before the next term (a long query's last terms then read few).
            threshold = max(threshold, _kth_bound(partial, limit))
            cut = threshold * (1.0 - _SLACK)
    if cut > 0.0:
        reach = partial >= cut
        docs, partial = docs[reach], partial[reach]
    return docs, partial


def _essential(terms: list[TermPostings], tail: list[float], limit: int, scope: Scope) -> _Essential:
    """Sums the essential terms, raising the threshold as it goes (see the module text)."""
    # A first lower bound of the limit-th score from the heads of the strongest common terms.
    threshold = max((_head_bound(t, scope, limit) for t in terms[:3] if t.rank is not None), default=0.0)
    # The essential terms: the prefix of the order a document must hold one of to reach it.
    essential = _prefix_below(tail, threshold * (1.0 - _SLACK))
    # Sum the first terms (one numpy addition per posting, in term order), as many as fit a budget;
    # their partial sums (lower bounds of the final scores) raise the threshold, which shortens
    # the essential prefix. While it still reaches past what was summed, sum again with twice
    # the budget (summing afresh keeps the one order of addition; the rounds cost at most twice
    # the last). The first budget is twice the catalog's size: a bincount costs little per posting
    # next to a round's fixed work over the whole doc-id range, and a long query (a paragraph of
    # 50+ words) then needs one or two rounds instead of four (its p99 at 50,000 tools: -45 %).
    done, budget = 0, max(2 * scope.size, 1024)
    while True:
        done += 1
        counted = sum(len(t.ids) for t in terms[:done])
        while done < essential and counted + len(terms[done].ids) <= budget:
            counted += len(terms[done].ids)
            done += 1
        ids = np.concatenate([t.ids for t in terms[:done]])
        weights = np.concatenate([t.weights for t in terms[:done]])
        sums: _Scores = np.bincount(ids, weights=weights, minlength=scope.hi).astype(np.float64, copy=False)
        docs: _Ids | None = None
        if scope.allowed is None:
            # Out-of-range documents sum to 0.0 (the terms are clipped to the range): a bound
            # over the whole array, without listing the documents until the last round.
            threshold = max(threshold, _kth_bound(sums, limit))
        else:
            docs = scope.filter(np.flatnonzero(sums > 0.0).astype(np.int32))  # bool nonzero: the fast one
            partial = sums[docs]
            threshold = max(threshold, _kth(partial[partial >= threshold] if threshold else partial, limit))
        essential = _prefix_below(tail, threshold * (1.0 - _SLACK))
        if done >= essential:
            if docs is None:
                docs = scope.filter(np.flatnonzero(sums > 0.0).astype(np.int32))
            return _Essential(sums, docs, done, threshold)
        budget = 2 * counted


def _prefix_below(tail: list[float], threshold: float) -> int:
    """The shortest prefix of the terms whose remaining terms add less than ``threshold``."""
    j = len(tail) - 1
    while j > 1 and tail[j - 1] < threshold:
        j -= 1
    return j


def _without(ids: _Ids, drop: _Ids) -> _Ids:
    """``ids`` minus ``drop``, for a short ``ids`` or ``drop`` (exact-name matches)."""
    if not len(ids) or not len(drop):
        return ids
    small, big = (ids, drop) if len(ids) <= len(drop) else (drop, ids)
    hit = {d for d in small.tolist() if (big == d).any()}
    return ids[[i not in hit for i in ids.tolist()]] if hit else ids


def _positive(ids: _Ids, scores: _Scores) -> tuple[_Ids, _Scores]:
    held = scores > 0.0
    return ids[held], scores[held]


def rank_top(ids: _Ids, scores: _Scores, n: int) -> list[tuple[int, float]]:
    """The ``n`` best (doc id, score) pairs, score descending then doc id ascending."""
    if n <= 0 or not len(ids):
        return []
    if len(ids) > 4 * n:
        # Everything at or above the n-th best score (ties at the cut included), then sort those.
        cut = np.partition(scores, len(scores) - n)[len(scores) - n]
        keep = scores >= cut
        ids, scores = ids[keep], scores[keep]
    order = np.lexsort((ids, -scores))[:n]
    return list(zip(ids[order].tolist(), scores[order].tolist(), strict=True))
