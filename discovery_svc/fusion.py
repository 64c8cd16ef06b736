"""Fusing a BM25 ranking with a dense (embedding) ranking into one list of hits.

Three families were measured on every evaluation set (bench/fusion_sweep.py, bench/README.md):

* ``rrf`` — reciprocal rank fusion: ``w_bm25 / (k + rank_bm25) + w_dense / (k + rank_dense)``.
  Scale-free, but it gives the dense list the same say whether BM25 found a clear winner or not.
* ``weighted`` — a weighted sum of normalised scores: BM25 divided by the best BM25 score of the
  query, cosine min-max scaled over the dense candidates.
* ``gated`` — RRF whose dense weight depends on how confident BM25 is: when BM25's best hit stands
  clearly above the next one (``margin``), the dense list only breaks ties and fills the page;
  otherwise it has its full weight. This keeps BM25's wins on sets whose queries reuse tool words
  (sealtools, restbench) and lets the dense list fix vocabulary gaps (metatool).

Exact tool-name matches are not fused: they stay first, in BM25's order, whatever the method.
All functions are pure; :class:`FusionConfig` is the one configuration chosen for every set.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from discovery_svc.index import SearchHit

__all__ = ["DEFAULT_FUSION", "FusionConfig", "bm25_confidence", "fuse"]

Method = Literal["rrf", "weighted", "gated"]


@dataclass(frozen=True, slots=True)
class FusionConfig:
    method: Method = "gated"
    k: float = 60.0  # RRF rank offset
    bm25_weight: float = 1.0
    dense_weight: float = 1.0  # weighted: the share of the dense score is dense / (bm25 + dense)
    # gated: dense weight when BM25 is confident (margin at least ``confident_margin``)
    confident_dense_weight: float = 0.3
    confident_margin: float = 0.25
    depth: int = 50  # candidates taken from each ranking before fusing


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
    The returned scores are the fused scores (exact hits rank above them with larger scores).
    """
    if limit <= 0:
        return []
    exact = [h for h in bm25 if h.exact][:limit]
    seen = {h.key for h in exact}
    lexical = [h for h in bm25 if not h.exact][: config.depth]
    semantic = [(k, s) for k, s in dense[: config.depth] if k not in seen]
    if config.method == "weighted":
        scores = _weighted(lexical, semantic, config)
    else:
        dense_weight = config.dense_weight
        if config.method == "gated" and bm25_confidence(lexical) >= config.confident_margin:
            dense_weight = config.confident_dense_weight
        scores = _rrf(lexical, semantic, config.k, config.bm25_weight, dense_weight)
    for key in seen:
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
    lexical: Sequence[SearchHit], semantic: Sequence[tuple[str, float]], config: FusionConfig
) -> dict[str, float]:
    total = config.bm25_weight + config.dense_weight
    wb, wd = config.bm25_weight / total, config.dense_weight / total
    scores: dict[str, float] = {}
    if lexical:
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


DEFAULT_FUSION = FusionConfig()
