"""BM25 search over a tool catalog: built once, immutable, fast candidate-only scoring.

Each tool becomes one bag of words: its name (repeated, so a name hit outweighs a passing mention),
its server, its description, and from its input schema the parameter names, parameter descriptions,
enum values and nested properties. :mod:`discovery_svc.text` tokenizes both sides.

BM25 statistics come from rank-bm25 (:class:`rank_bm25.BM25` does the corpus pass). Two things
differ from its ``BM25Okapi``:

* IDF is Lucene's ``log(1 + (N - n + 0.5) / (n + 0.5))``, always positive. Okapi's
  ``log((N - n + 0.5) / (n + 0.5))`` is 0 for a term in half the documents and negative beyond
  (every term of a 2-document corpus, 1-document corpora), which hid real matches in casual-mcp.
* Scores are not computed by scanning every document: a term's contribution to a document depends
  only on the term, the document's tf and length, so it is precomputed into postings
  (term -> {doc id: contribution}) and a query adds up the postings of its terms, skipping with
  MaxScore the work that cannot change the top results. Documents sharing no term with the query
  are never touched; the hits equal a full scan's (a unit test checks it against one).
* A query whose terms are common in a big catalog ("specific information", "get data list" at
  50,000 tools: tens of thousands of postings) is summed in numpy instead: every term holding
  more than ``_RANKED_MIN_DOCS`` documents also keeps its postings as arrays in rank order, one
  ``bincount`` adds them up, and only documents reaching a lower bound of the ``limit``-th score
  (the ``limit``-th best in-scope contribution of a single term) are looked at. The same arrays
  answer a one-term query inside a toolset mask without a pass over the term's postings.

An exact tool-name match (the raw name or the LLM-facing key, case-insensitive, spaces/underscores/
hyphens treated alike) always ranks first.

One index serves every toolset of a catalog version: a toolset is a :class:`CandidateMask` (one byte
per tool, built once by :meth:`SearchIndex.mask`) applied at query time, and
:meth:`SearchIndex.restricted` wraps index and mask in a view with the same ``search`` API. BM25
statistics (IDF, average length) stay those of the whole catalog.
"""

from __future__ import annotations

import heapq
import math
import re
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress
from operator import add, itemgetter
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
from rank_bm25 import BM25

from discovery_svc.text import tokenize

__all__ = [
    "CandidateMask",
    "RestrictedIndex",
    "SearchDoc",
    "SearchHit",
    "SearchIndex",
    "Searcher",
    "document_tokens",
    "normalize_name",
]

# One configuration for every catalog, chosen on all evaluation sets together (bench/retrieval.py).
K1 = 1.5  # rank-bm25 and Lucene-classic default; 1.2-1.6 measured within 0.01 R@5
B = 0.75
NAME_WEIGHT = 3  # name tokens are counted this many times
_MAX_SCHEMA_DEPTH = 4  # nested object properties indexed down to this depth
_MAX_ENUM_VALUES = 50
_TOP_WEIGHTS = 20  # per-term best weights kept for cheap MaxScore thresholds
_RANKED_MIN_DOCS = 256  # terms in more documents also keep their postings as arrays in rank order
# A query adding up at least this many postings (and 1/32 of the catalog) is summed in numpy.
_DENSE_MIN_POSTINGS = 2000
# A scope this small (a server, an ``only`` list, a small toolset) is scored document by document.
_SMALL_SCOPE = 2048

_NAME_NORM_RE = re.compile(r"[\s_\-]+")

# Doc ids -> which of them a search may return (its scope, minus skipped tools), vectorised.
_Ids = npt.NDArray[np.integer[Any]]
_Keep = Callable[[_Ids], npt.NDArray[np.bool_]]


@dataclass(frozen=True, slots=True)
class SearchDoc:
    """One searchable tool."""

    key: str  # the LLM-facing name (unique)
    server: str
    name: str  # tool name on its server
    description: str
    input_schema: Mapping[str, Any]  # JSON Schema dict


@dataclass(frozen=True, slots=True)
class SearchHit:
    key: str
    score: float  # what the ranking used: the BM25 score, or the fused score of hybrid search
    exact: bool = False  # an exact tool-name match (ranked ahead of every other hit)
    # The parts, for explaining a ranking: the tool's BM25 score (None: no word in common with
    # the query) and, in hybrid search, its cosine with the query.
    bm25: float | None = None
    similarity: float | None = None


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


def normalize_name(name: str) -> str:
    """Case-insensitive form of a tool name with runs of spaces, ``_`` and ``-`` made one ``_``."""
    return _NAME_NORM_RE.sub("_", name.strip().casefold()).strip("_")


def _schema_text(schema: Any, depth: int = 0) -> Iterator[str]:
    """Parameter names, descriptions, titles, enum values of a JSON Schema, nested objects included."""
    if not isinstance(schema, Mapping) or depth > _MAX_SCHEMA_DEPTH:
        return
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        for param, sub in properties.items():
            yield str(param)
            yield from _field_text(sub, depth)
    items = schema.get("items")
    if isinstance(items, Mapping):
        yield from _schema_text(items, depth + 1)
    for combinator in ("anyOf", "oneOf", "allOf"):
        variants = schema.get(combinator)
        if isinstance(variants, list):
            for variant in variants:
                yield from _schema_text(variant, depth + 1)


def _field_text(field: Any, depth: int) -> Iterator[str]:
    if not isinstance(field, Mapping):
        return
    for attr in ("description", "title"):
        value = field.get(attr)
        if isinstance(value, str):
            yield value
    enum = field.get("enum")
    if isinstance(enum, list):
        yield from (str(v) for v in enum[:_MAX_ENUM_VALUES] if isinstance(v, str | int | float))
    yield from _schema_text(field, depth + 1)


def document_tokens(doc: SearchDoc, *, name_weight: int = NAME_WEIGHT) -> list[str]:
    """The bag of words indexed for one tool."""
    tokens = tokenize(doc.name) * name_weight
    tokens += tokenize(doc.server)
    tokens += tokenize(doc.description)
    for text in _schema_text(doc.input_schema):
        tokens += tokenize(text)
    return tokens


class Searcher(Protocol):
    """:class:`SearchIndex` and :class:`~discovery_svc.hybrid.HybridIndex` alike."""

    def __len__(self) -> int: ...

    def search(
        self,
        query: str,
        limit: int,
        *,
        server: str | None = None,
        skip: Collection[str] = (),
        only: Collection[str] | None = None,
        candidates: CandidateMask | None = None,
    ) -> list[SearchHit]: ...


class RestrictedIndex:
    """A searcher seen through a candidate mask (a toolset): the same ``search`` API without the
    ``candidates`` argument, fewer tools. ``candidates`` None: every tool.

    What a toolset's prepared state holds instead of an index of its own.
    """

    __slots__ = ("candidates", "index")

    def __init__(self, index: Searcher, candidates: CandidateMask | None) -> None:
        self.index = index
        self.candidates = candidates

    def __len__(self) -> int:
        return len(self.index) if self.candidates is None else self.candidates.count

    def search(
        self,
        query: str,
        limit: int,
        *,
        server: str | None = None,
        skip: Collection[str] = (),
        only: Collection[str] | None = None,
    ) -> list[SearchHit]:
        return self.index.search(
            query, limit, server=server, skip=skip, only=only, candidates=self.candidates
        )


class _LuceneBM25(BM25):
    """rank-bm25's corpus statistics with a strictly positive (Lucene/BM25+) IDF."""

    idf: dict[str, float]
    doc_freqs: list[dict[str, int]]
    doc_len: list[int]
    avgdl: float

    def _calc_idf(self, nd: dict[str, int]) -> None:
        n = self.corpus_size
        for word, freq in nd.items():
            self.idf[word] = math.log(1.0 + (n - freq + 0.5) / (freq + 0.5))


class SearchIndex:
    """Immutable BM25 index over tools; safe to search from many threads."""

    def __init__(
        self,
        docs: Sequence[SearchDoc],
        *,
        k1: float = K1,
        b: float = B,
        name_weight: int = NAME_WEIGHT,
    ) -> None:
        # Doc ids follow (server, key) order: ties break deterministically whatever the input
        # order, and each server's tools form one contiguous id range (cheap server scoping).
        ordered = sorted(docs, key=lambda d: (d.server, d.key))
        self._keys: list[str] = [d.key for d in ordered]
        if len(set(self._keys)) != len(self._keys):
            raise ValueError("SearchDoc keys must be unique")
        self._id_of: dict[str, int] = {key: i for i, key in enumerate(self._keys)}
        self._server_range: dict[str, tuple[int, int]] = {}
        for i, d in enumerate(ordered):
            lo, _ = self._server_range.get(d.server, (i, i))
            self._server_range[d.server] = (lo, i + 1)

        self._exact: dict[str, list[int]] = {}
        for i, d in enumerate(ordered):
            for form in {normalize_name(d.name), normalize_name(d.key)}:
                if form:
                    self._exact.setdefault(form, []).append(i)

        self._postings: dict[str, _Posting] = {}
        if not ordered:
            return
        # rank-bm25 divides by the average length; an all-empty corpus gets one dummy token each.
        corpus = [document_tokens(d, name_weight=name_weight) or ["\x00"] for d in ordered]
        bm25 = _LuceneBM25(corpus)
        doc_ints = list(range(len(ordered)))  # one int object per doc, shared by every posting
        postings: defaultdict[str, dict[int, float]] = defaultdict(dict)
        idf, k1_plus_1 = bm25.idf, k1 + 1.0
        for doc_id, freqs, length in zip(doc_ints, bm25.doc_freqs, bm25.doc_len, strict=True):
            norm = k1 * (1.0 - b + b * length / bm25.avgdl)
            for term, tf in freqs.items():
                postings[term][doc_id] = idf[term] * tf * k1_plus_1 / (tf + norm)
        self._postings = {term: _Posting.of(w) for term, w in postings.items()}

    def __len__(self) -> int:
        return len(self._keys)

    @property
    def keys(self) -> Sequence[str]:
        """Tool keys in doc-id order ((server, key) order); row i of a dense matrix is keys[i]."""
        return self._keys

    def doc_id(self, key: str) -> int | None:
        return self._id_of.get(key)

    def mask(self, keys: Iterable[str]) -> CandidateMask:
        """The candidate set of these keys (unknown keys are ignored), for ``candidates=``."""
        bits = bytearray(len(self._keys))
        for key in keys:
            i = self._id_of.get(key)
            if i is not None:
                bits[i] = 1
        return CandidateMask(bits, self)

    def mask_ids(self, doc_ids: Iterable[int]) -> CandidateMask:
        bits = bytearray(len(self._keys))
        for i in doc_ids:
            bits[i] = 1
        return CandidateMask(bits, self)

    def restricted(self, candidates: CandidateMask) -> RestrictedIndex:
        """A view searching only ``candidates``, with this index's ``search`` signature."""
        candidates.check_owner(self)
        return RestrictedIndex(self, candidates)

    def scope_ids(
        self,
        *,
        server: str | None = None,
        only: Collection[str] | None = None,
        candidates: CandidateMask | None = None,
    ) -> Collection[int] | None:
        """The doc ids a search may return (None: all), or an empty tuple when nothing can match."""
        if candidates is not None:
            candidates.check_owner(self)
        scope: Collection[int] | None = candidates
        if server is not None:
            if server not in self._server_range:
                return ()
            ids = range(*self._server_range[server])
            scope = set(candidates.keep(ids)) if candidates is not None else ids
        if only is not None:
            scope = {
                i for k in only if (i := self._id_of.get(k)) is not None and (scope is None or i in scope)
            }
        return scope

    def search(
        self,
        query: str,
        limit: int,
        *,
        server: str | None = None,
        skip: Collection[str] = (),
        only: Collection[str] | None = None,
        candidates: CandidateMask | None = None,
    ) -> list[SearchHit]:
        """Best matches first: exact name matches, then BM25 score (ties in (server, key) order).

        Only documents with a real match are returned (a shared term or an exact name). ``server``
        scopes to one server, ``only`` restricts to those keys, ``candidates`` to a mask built by
        :meth:`mask` (a toolset), ``skip`` excludes keys. An empty or all-stopword query matches
        nothing (unless it is a tool's exact name).
        """
        if limit <= 0 or not self._keys:
            return []
        scope = self.scope_ids(server=server, only=only, candidates=candidates)
        if scope is not None and not scope:
            return []
        banned = {i for k in skip if (i := self._id_of.get(k)) is not None}

        exact = [
            i
            for i in self._exact.get(normalize_name(query), ())
            if i not in banned and (scope is None or i in scope)
        ]
        postings = [p for t in dict.fromkeys(tokenize(query)) if (p := self._postings.get(t)) is not None]
        entries = sum(len(p.weights) for p in postings)
        if not postings:
            scores: dict[int, float] = {}  # no term of the query is in the catalog
        elif scope is not None and len(scope) <= _SMALL_SCOPE and len(scope) * len(postings) <= entries:
            ids = scope.ids() if isinstance(scope, CandidateMask) else scope
            scores = _score_each(postings, [i for i in ids if i not in banned])
        elif entries >= _DENSE_MIN_POSTINGS and entries * 32 >= len(self._keys):
            scores = _dense_scores(postings, limit, banned, scope, len(self._keys), must=exact)
        else:
            # Enough BM25 hits to fill the page after the exact ones, which are ranked ahead anyway.
            scores = _top_scores(postings, limit, banned, scope, must=exact)
        top = max(scores.values(), default=0.0)
        hits: list[SearchHit] = []
        # Exact names outrank every BM25 score; among themselves, by their own BM25 score.
        for doc_id in sorted(exact, key=lambda i: (-scores.get(i, 0.0), i))[:limit]:
            words = scores.pop(doc_id, 0.0)
            hits.append(SearchHit(self._keys[doc_id], top + 1.0 + words, exact=True, bm25=words or None))
        best = _best(scores, limit - len(hits))
        hits.extend(SearchHit(self._keys[doc_id], score, bm25=score) for doc_id, score in best)
        return hits


@dataclass(frozen=True, slots=True)
class _Posting:
    """The BM25 contribution of one term to each document holding it."""

    weights: dict[int, float]  # doc id -> contribution; ints/floats only, so the GC never scans it
    top: tuple[float, ...]  # the largest contributions, descending (top[0] bounds any document's)
    # For common terms, every posting in rank order (contribution descending, doc id ascending) as
    # arrays: a one-term query ("get", "search") over a big catalog reads the head only, and a
    # query of common terms is summed in numpy (``_dense_scores``).
    ranked_ids: npt.NDArray[np.int32] | None = None
    ranked_weights: npt.NDArray[np.float64] | None = None

    @classmethod
    def of(cls, weights: dict[int, float]) -> _Posting:
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


def _best(scores: dict[int, float], n: int) -> list[tuple[int, float]]:
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


def _score_each(postings: list[_Posting], candidates: Iterable[int]) -> dict[int, float]:
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


def _top_scores(
    postings: list[_Posting],
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


def _dense_scores(
    postings: list[_Posting],
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
    scores: dict[int, float], rest: list[_Posting], bound: float, limit: int, must: Collection[int]
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
