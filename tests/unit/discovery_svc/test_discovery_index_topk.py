"""Property test: the pruned top-k search (MaxScore) returns exactly what scoring every tool does.

Random catalogs (a Zipf-like vocabulary, so some words are in most tools and most words in few;
duplicated tools, so scores tie), random queries from one word to a paragraph, and every kind of
scope (server, ``only``, toolset mask, ``skip``, combinations), compared hit for hit, score for
score, with a reference that scores every in-scope tool.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from discovery_svc.index import IndexScopeFields, SearchDoc, SearchHit, SearchIndex, normalize_name
from discovery_svc.postings import TermPostings, _kth, _kth_bound, exhaustive_scores
from discovery_svc.text import tokenize


def reference(
    index: SearchIndex, docs: list[SearchDoc], query: str, limit: int, **where: object
) -> list[SearchHit]:
    """Every in-scope tool scored, exact names first, then by score and (server, key) order."""
    scoped = index.scoped(where)  # type: ignore[arg-type]
    if scoped is None or limit <= 0:
        return []
    scope, banned = scoped
    allowed = [i for i in range(len(index)) if i not in banned and (scope is None or i in scope)]
    found = [p for t in dict.fromkeys(tokenize(query)) if (p := index.postings.get(t)) is not None]
    scores = exhaustive_scores(TermPostings.order(found), np.asarray(allowed, dtype=np.int32)).tolist()
    score_of = {i: s for i, s in zip(allowed, scores, strict=True) if s > 0.0}
    by_key = {d.key: d for d in docs}
    wanted = normalize_name(query)
    exact = [
        i
        for i in allowed
        if wanted and wanted in {normalize_name(by_key[index.keys[i]].name), normalize_name(index.keys[i])}
    ]
    top = max(score_of.values(), default=0.0)
    hits = [
        SearchHit(index.keys[i], top + 1.0 + score_of.get(i, 0.0), exact=True, bm25=score_of.get(i))
        for i in sorted(exact, key=lambda i: (-score_of.get(i, 0.0), i))[:limit]
    ]
    rest = sorted((i for i in score_of if i not in exact), key=lambda i: (-score_of[i], i))
    hits += [SearchHit(index.keys[i], score_of[i], bm25=score_of[i]) for i in rest[: limit - len(hits)]]
    return hits


def zipf_catalog(rng: random.Random, size: int, servers: int) -> tuple[list[SearchDoc], list[str]]:
    vocab = [f"w{i}" for i in range(400)]
    weights = [1.0 / (rank + 1) for rank in range(len(vocab))]
    docs: list[SearchDoc] = []
    for i in range(size):
        if docs and rng.random() < 0.1:  # a copy of an earlier tool's text: tied scores
            text = rng.choice(docs).description
        else:
            text = " ".join(rng.choices(vocab, weights, k=rng.randint(3, 40)))
        name = rng.choice(["get_data", "search", f"tool_{i}", f"w{rng.randint(0, 399)}"])
        docs.append(SearchDoc(f"s{i % servers}__t{i}", f"s{i % servers}", name, text, {}))
    return docs, vocab


def random_scope(rng: random.Random, index: SearchIndex, docs: list[SearchDoc]) -> IndexScopeFields:
    keys = [d.key for d in docs]
    where: IndexScopeFields = {}
    kind = rng.choice(["none", "server", "only", "mask", "mask+server", "mask+only"])
    if "server" in kind or (kind == "none" and rng.random() < 0.2):
        where["server"] = f"s{rng.randint(0, 6)}"
    if "only" in kind:
        where["only"] = rng.sample(keys, rng.choice([1, 10, len(keys) // 3, len(keys) - 1]))
    if "mask" in kind:
        where["candidates"] = index.mask(rng.sample(keys, rng.choice([0, 5, len(keys) // 2, len(keys) - 3])))
    if rng.random() < 0.4:
        where["skip"] = set(rng.sample(keys, rng.choice([1, 5, 40])))
    return where


@pytest.mark.parametrize("seed", range(6))
def test_pruned_top_k_equals_scoring_every_tool(seed: int) -> None:
    rng = random.Random(seed)  # noqa: S311 - test data, not cryptography
    docs, vocab = zipf_catalog(rng, rng.choice([60, 700, 2500]), 7)
    index = SearchIndex(docs)
    for _ in range(60):
        if rng.random() < 0.1:
            query = rng.choice(["get data", "search", "GET-DATA", rng.choice(docs).name])
        else:
            length = rng.choice([1, 2, 4, 12, 40])
            query = " ".join(rng.choice(vocab[:20] if rng.random() < 0.4 else vocab) for _ in range(length))
        limit = rng.choice([1, 5, 5, 10, 50])
        where = random_scope(rng, index, docs)
        assert index.search(query, limit, **where) == reference(index, docs, query, limit, **where), (
            query,
            limit,
            where,
        )


@pytest.mark.parametrize("seed", range(3))
def test_pruned_top_k_equals_scoring_every_tool_for_paragraphs_over_thousands_of_tools(seed: int) -> None:
    """Long queries of common words over a catalog of thousands: the postings they read exceed
    the first summing budget (several rounds) and the candidates are many (the chunked lower
    bound of the k-th best partial score, not the exact one)."""
    rng = random.Random(100 + seed)  # noqa: S311 - test data, not cryptography
    docs, vocab = zipf_catalog(rng, 4000, 7)
    index = SearchIndex(docs)
    for _ in range(25):
        length = rng.choice([12, 30, 60])
        query = " ".join(rng.choice(vocab[:60] if rng.random() < 0.7 else vocab) for _ in range(length))
        limit = rng.choice([1, 5, 10])
        where: IndexScopeFields = {}
        if rng.random() < 0.3:
            where["candidates"] = index.mask(rng.sample([d.key for d in docs], 2000))
        assert index.search(query, limit, **where) == reference(index, docs, query, limit, **where), (
            query,
            limit,
        )


def test_the_cheap_bound_of_the_kth_best_score_never_exceeds_it() -> None:
    rng = np.random.default_rng(7)
    for size in (3, 900, 1100, 5000, 20_000):
        for k in (1, 5, 50):
            scores = rng.random(size) * rng.choice([1.0, 1e-3])
            if size > 10:
                scores[rng.integers(0, size, size // 3)] = 0.0
            exact = _kth(scores, k)
            bound = _kth_bound(scores, k)
            assert bound <= exact
            if size <= 1024:
                assert bound == exact
