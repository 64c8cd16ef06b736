"""Fusing a BM25 ranking with a dense (embedding) ranking into one list of hits.

Measured on all five evaluation sets (bench/fusion_sweep.py; figures in bench/README.md):

* ``rrf`` — reciprocal rank fusion: ``w_bm25 / (k + rank_bm25) + w_dense / (k + rank_dense)``.
  Scale-free, but it gives the dense list the same say whether BM25 found a clear winner or not:
  plain RRF (k=60, equal weights) loses up to 0.057 R@5 on sealtools.
* ``weighted`` — a weighted sum of normalised scores: BM25 divided by the query's best BM25
  score, cosine min-max scaled over the dense candidates. A lexical match that clearly wins
  keeps winning; near-ties are settled by meaning.
* BM25-confidence gating (``gate_margin``, either method): the dense weight drops to
  ``confident_dense_weight`` when BM25's best hit leads the next by the margin. On top of the
  weighted method it moved the mean R@5 by at most 0.001, so the chosen configuration is
  ungated.

:data:`DEFAULT_FUSION` — weighted, dense share 0.4/1.4, 50 candidates a side — is the one
configuration for every set. Exact tool-name matches are not fused: they stay first, in BM25's
order, whatever the method. All functions are pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from discovery_svc.index import SearchHit

__all__ = ["DEFAULT_FUSION", "FusionConfig", "bm25_confidence", "fuse"]

Method = Literal["rrf", "weighted"]


@dataclass(frozen=True, slots=True)
class FusionConfig:
    method: Method = "weighted"
    k: float = 60.0  # RRF rank offset
    bm25_weight: float = 1.0
    dense_weight: float = 0.4  # weighted: the dense share is dense / (bm25 + dense)
    # BM25-confidence gating (None: off): when BM25's best hit leads the next by at least this
    # margin, the dense side gets ``confident_dense_weight`` instead of ``dense_weight``.
    gate_margin: float | None = None
    confident_dense_weight: float = 0.3
    depth: int = 50  # candidates taken from each ranking before fusing
    # A tool with no lexical match is found only if its cosine reaches this floor (None: any):
    # a query that matches no tool lexically nor closely in meaning then finds nothing, as BM25
    # alone would, so search_tools can still answer "No tools found".
    min_similarity: float | None = None


def bm25_confidence(hits: Sequence[SearchHit]) -> float:
    """How far BM25's best non-exact hit stands above the next: ``(s1 - s2) / s1`` in [0, 1].

    1.0 when there is a single hit, 0.0 when there is none or the top two tie.
    """
    scores = [h.score for h in hits if not h.exact][:2]
    if not scores or scores[0] <= 0.0:
        return 0.0
    if len(scores) == 1:
        return 1.0
    return max(0.0, (scores[0] - scores[1]) / scores[0])


def fuse(
    bm25: Sequence[SearchHit],
    dense: Sequence[tuple[str, float]],
    limit: int,
    config: FusionConfig = FusionConfig(),  # frozen, so sharing the default is safe
) -> list[SearchHit]:
    """The fused top ``limit``: exact-name hits first, then by fused score (ties by key).

    ``bm25`` is best-first BM25 hits (exact ones flagged); ``dense`` is best-first (key, cosine).
    A tool missing from one list gets nothing from that side. The returned scores are the fused
    scores (exact hits rank above them).
    """
    if limit <= 0:
        return []
    exact = [h for h in bm25 if h.exact][:limit]
    seen = {h.key for h in exact}
    lexical = [h for h in bm25 if not h.exact][: config.depth]
    semantic = [(k, s) for k, s in dense[: config.depth] if k not in seen]
    dense_weight = config.dense_weight
    if config.gate_margin is not None and bm25_confidence(lexical) >= config.gate_margin:
        dense_weight = config.confident_dense_weight
    if config.method == "weighted":
        scores = _weighted(lexical, semantic, config.bm25_weight, dense_weight)
    else:
        scores = _rrf(lexical, semantic, config.k, config.bm25_weight, dense_weight)
    for key in seen:
        scores.pop(key, None)
    if config.min_similarity is not None:
        # Below the floor, a tool needs a lexical match to be found at all (the ranking of the
        # others is unchanged).
        matched = {h.key for h in lexical}
        for key, cosine in semantic:
            if cosine < config.min_similarity and key not in matched:
                scores.pop(key, None)
    ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[: limit - len(exact)]
    top = ranked[0][1] if ranked else 0.0
    hits = [SearchHit(h.key, top + 1.0 + (len(exact) - i), exact=True) for i, h in enumerate(exact)]
    hits.extend(SearchHit(key, score) for key, score in ranked)
    return hits


def _rrf(
    lexical: Sequence[SearchHit],
    semantic: Sequence[tuple[str, float]],
    k: float,
    bm25_weight: float,
    dense_weight: float,
) -> dict[str, float]:
    scores: dict[str, float] = {}
    for rank, hit in enumerate(lexical, start=1):
        scores[hit.key] = bm25_weight / (k + rank)
    for rank, (key, _) in enumerate(semantic, start=1):
        scores[key] = scores.get(key, 0.0) + dense_weight / (k + rank)
    return scores


def _weighted(
    lexical: Sequence[SearchHit],
    semantic: Sequence[tuple[str, float]],
    bm25_weight: float,
    dense_weight: float,
) -> dict[str, float]:
    """BM25 / best BM25 and cosine min-max scaled over the dense candidates, weighted and summed."""
    total = bm25_weight + dense_weight
    wb, wd = bm25_weight / total, dense_weight / total
    scores: dict[str, float] = {}
    if lexical and lexical[0].score > 0:
        best = lexical[0].score
        for hit in lexical:
            scores[hit.key] = wb * hit.score / best
    if semantic:
        high = semantic[0][1]
        low = min(s for _, s in semantic)
        span = high - low
        for key, cosine in semantic:
            scaled = (cosine - low) / span if span > 0 else 1.0
            scores[key] = scores.get(key, 0.0) + wd * scaled
    return scores


# The one configuration for every catalog (bench/fusion_sweep.py on all five evaluation sets).
DEFAULT_FUSION = FusionConfig(method="weighted", dense_weight=0.4)
