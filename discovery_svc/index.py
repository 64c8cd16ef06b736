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
  only on the term, the document's tf and length, so it is precomputed into postings (flat arrays,
  :class:`~discovery_svc.postings.Postings`) and a query's top results are found with MaxScore
  (:func:`~discovery_svc.postings.top_candidates`): only the postings of the query's rare words are
  read, the common words are looked up for the few documents that can still make the page.
  Documents sharing no term with the query are never touched; the hits and scores equal a full
  scan's (property tests check it against one).

An exact tool-name match (the raw name or the LLM-facing key, case-insensitive, spaces/underscores/
hyphens treated alike) always ranks first.

One index serves every toolset of a catalog version: a toolset is a :class:`CandidateMask` (one byte
per tool, built once by :meth:`SearchIndex.mask`) applied at query time, and
:meth:`SearchIndex.restricted` wraps index and mask in a view with the same ``search`` API. BM25
statistics (IDF, average length) stay those of the whole catalog.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any, Protocol, TypedDict, Unpack

import numpy as np
from rank_bm25 import BM25

from discovery_svc.postings import CandidateMask, Postings, Scope, rank_top, top_candidates
from discovery_svc.text import tokenize

__all__ = [
    "CandidateMask",
    "IndexScopeFields",
    "RestrictedIndex",
    "ScopeFields",
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

_NAME_NORM_RE = re.compile(r"[\s_\-]+")


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


def document_tokens(
    doc: SearchDoc,
    *,
    name_weight: int = NAME_WEIGHT,
    bodies: dict[tuple[str, int], list[str]] | None = None,
) -> list[str]:
    """The bag of words indexed for one tool.

    ``bodies``: the words of the description and schema already found, by (description, the
    schema's ``id``), for an index build over docs that share them (a fleet runs the same server
    many times; the catalog follower keeps one parsed schema per distinct schema). The docs must
    stay alive while it is used (an ``id`` is unique only among live objects).
    """
    tokens = tokenize(doc.name) * name_weight
    tokens += tokenize(doc.server)
    key = (doc.description, id(doc.input_schema))
    body = bodies.get(key) if bodies is not None else None
    if body is None:
        body = tokenize(doc.description)
        for text in _schema_text(doc.input_schema):
            body += tokenize(text)
        if bodies is not None:
            bodies[key] = body
    tokens += body
    return tokens


class ScopeFields(TypedDict, total=False):
    """Where a search looks (the keyword arguments of every ``search``): ``server`` scopes to one
    server, ``only`` restricts to those keys, ``skip`` excludes keys."""

    server: str | None
    skip: Collection[str]
    only: Collection[str] | None


class IndexScopeFields(ScopeFields, total=False):
    """:class:`ScopeFields` and ``candidates``: a mask built by :meth:`SearchIndex.mask` (a toolset)."""

    candidates: CandidateMask | None


class Searcher(Protocol):
    """:class:`SearchIndex` and :class:`~discovery_svc.hybrid.HybridIndex` alike."""

    def __len__(self) -> int: ...

    def search(self, query: str, limit: int, **scope: Unpack[IndexScopeFields]) -> list[SearchHit]: ...


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

    def search(self, query: str, limit: int, **scope: Unpack[ScopeFields]) -> list[SearchHit]:
        return self.index.search(query, limit, **scope, candidates=self.candidates)


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

        if not ordered:
            self._postings = Postings((), (), (), ())
            return
        # rank-bm25 divides by the average length; an all-empty corpus gets one dummy token each.
        # The words of a description and schema that many tools share are found once.
        bodies: dict[tuple[str, int], list[str]] = {}
        corpus = [document_tokens(d, name_weight=name_weight, bodies=bodies) or ["\x00"] for d in ordered]
        del bodies
        bm25 = _LuceneBM25(corpus)
        del corpus
        # One posting per (term, document), in three flat columns made without a Python loop over
        # the postings (a million at 50,000 tools): terms numbered as first met, documents in
        # order, each document's terms as it first met them. Weights as
        # idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avgdl)), evaluated in that order.
        freqs = bm25.doc_freqs
        total = sum(map(len, freqs))
        number = {term: i for i, term in enumerate(dict.fromkeys(chain.from_iterable(freqs)))}
        term_of = np.fromiter(map(number.__getitem__, chain.from_iterable(freqs)), np.int32, total)
        doc_of = np.repeat(
            np.arange(len(freqs), dtype=np.int32), np.fromiter(map(len, freqs), np.int64, len(freqs))
        )
        tf = np.fromiter(chain.from_iterable(map(dict.values, freqs)), np.float64, total)
        idf = np.fromiter(map(bm25.idf.__getitem__, number), np.float64, len(number))
        norm = k1 * (1.0 - b + b * np.asarray(bm25.doc_len, dtype=np.float64) / bm25.avgdl)
        weight = idf[term_of] * tf * (k1 + 1.0) / (tf + norm[doc_of])
        del bm25, freqs
        self._postings = Postings(list(number), term_of, doc_of, weight)

    def __len__(self) -> int:
        return len(self._keys)

    @property
    def keys(self) -> Sequence[str]:
        """Tool keys in doc-id order ((server, key) order); row i of a dense matrix is keys[i]."""
        return self._keys

    @property
    def postings(self) -> Postings:
        return self._postings

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

    def scoped(self, scope: IndexScopeFields) -> tuple[Collection[int] | None, set[int]] | None:
        """The doc ids a search in ``scope`` may return (None: all) and the ones it must not
        (``skip``); None when nothing can match."""
        ids = self._scope_ids(scope.get("server"), scope.get("only"), scope.get("candidates"))
        if ids is not None and not ids:
            return None
        return ids, {i for k in scope.get("skip", ()) if (i := self._id_of.get(k)) is not None}

    def _scope_ids(
        self, server: str | None, only: Collection[str] | None, candidates: CandidateMask | None
    ) -> Collection[int] | None:
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

    def search(self, query: str, limit: int, **where: Unpack[IndexScopeFields]) -> list[SearchHit]:
        """Best matches first: exact name matches, then BM25 score (ties in (server, key) order).

        Only documents with a real match are returned (a shared term or an exact name), within
        ``where`` (:class:`IndexScopeFields`). An empty or all-stopword query matches nothing
        (unless it is a tool's exact name).
        """
        scoped = self.scoped(where) if limit > 0 and self._keys else None
        if scoped is None:
            return []
        scope, banned = scoped

        exact = [
            i
            for i in self._exact.get(normalize_name(query), ())
            if i not in banned and (scope is None or i in scope)
        ]
        found = [p for t in dict.fromkeys(tokenize(query)) if (p := self._postings.get(t)) is not None]
        ids, scores = top_candidates(found, limit, Scope(scope, banned, len(self._keys)), exact)
        top = float(scores.max()) if len(scores) else 0.0
        hits: list[SearchHit] = []
        if exact:
            # Exact names outrank every BM25 score; among themselves, by their own BM25 score.
            words_of = dict(zip(ids.tolist(), scores.tolist(), strict=True))
            for doc_id in sorted(exact, key=lambda i: (-words_of.get(i, 0.0), i))[:limit]:
                words = words_of.get(doc_id, 0.0)
                hits.append(SearchHit(self._keys[doc_id], top + 1.0 + words, exact=True, bm25=words or None))
            others = np.ones(len(ids), dtype=np.bool_)
            for doc_id in exact:
                others &= ids != doc_id
            ids, scores = ids[others], scores[others]
        best = rank_top(ids, scores, limit - len(hits))
        hits.extend(SearchHit(self._keys[doc_id], score, bm25=score) for doc_id, score in best)
        return hits

    def document_frequency(self, term: str) -> int:
        """How many tools hold ``term`` (an indexed token, as :func:`tokenize` makes it)."""
        return self._postings.document_frequency(term)
