"""Fusion of BM25 and dense rankings: exact names first, RRF, weighted scores, confidence gating."""

from __future__ import annotations

import pytest

from discovery_svc.fusion import FusionConfig, bm25_confidence, fuse
from discovery_svc.index import SearchHit


def hits(*pairs: tuple[str, float], exact: tuple[str, ...] = ()) -> list[SearchHit]:
    return [SearchHit(k, s, exact=k in exact) for k, s in pairs]


def keys(found: list[SearchHit]) -> list[str]:
    return [h.key for h in found]


RRF = FusionConfig(method="rrf", k=60.0, dense_weight=1.0)


def test_a_tool_ranked_well_by_both_sides_beats_one_ranked_first_by_one_side() -> None:
    bm25 = hits(("a", 9.0), ("b", 8.0), ("c", 1.0))
    dense = [("d", 0.9), ("b", 0.8), ("e", 0.1)]
    assert keys(fuse(bm25, dense, 4, RRF))[:1] == ["b"]


def test_rrf_scores_are_the_sum_of_weighted_reciprocal_ranks() -> None:
    config = FusionConfig(method="rrf", k=10.0, bm25_weight=1.0, dense_weight=0.5)
    fused = {h.key: h.score for h in fuse(hits(("a", 3.0), ("b", 2.0)), [("b", 0.9)], 5, config)}
    assert fused["a"] == pytest.approx(1 / 11)
    assert fused["b"] == pytest.approx(1 / 12 + 0.5 / 11)


def test_dense_only_tools_are_found_when_bm25_has_nothing() -> None:
    assert keys(fuse([], [("web_search", 0.8), ("read_file", 0.3)], 5, RRF)) == ["web_search", "read_file"]


def test_exact_name_matches_stay_first_in_bm25_order_whatever_the_dense_side_says() -> None:
    bm25 = hits(("read_file", 20.0), ("read_dir", 2.0), exact=("read_file",))
    dense = [("open_doc", 0.99), ("read_dir", 0.98)]
    for config in (RRF, FusionConfig(method="weighted"), FusionConfig(gate_margin=0.1)):
        fused = fuse(bm25, dense, 3, config)
        assert fused[0].key == "read_file"
        assert fused[0].exact
        assert fused[0].score > fused[1].score
        assert keys(fused).count("read_file") == 1


def test_limit_caps_the_fused_list_and_zero_returns_nothing() -> None:
    bm25 = hits(("a", 3.0), ("b", 2.0), ("c", 1.0))
    assert len(fuse(bm25, [("d", 0.5), ("e", 0.4)], 2, RRF)) == 2
    assert fuse(bm25, [("d", 0.5)], 0, RRF) == []


def test_ties_break_by_key_so_results_are_deterministic() -> None:
    fused = fuse(hits(("b", 1.0)), [("a", 0.5)], 2, RRF)
    assert keys(fused) == ["a", "b"]  # same reciprocal rank on each side


def test_weighted_fusion_normalises_each_side_before_weighting() -> None:
    config = FusionConfig(method="weighted", bm25_weight=1.0, dense_weight=1.0)
    bm25 = hits(("a", 100.0), ("b", 50.0))
    dense = [("b", 0.9), ("c", 0.5), ("a", 0.1)]
    fused = {h.key: h.score for h in fuse(bm25, dense, 3, config)}
    assert fused["a"] == pytest.approx(0.5 * 1.0 + 0.5 * 0.0)
    assert fused["b"] == pytest.approx(0.5 * 0.5 + 0.5 * 1.0)
    assert fused["c"] == pytest.approx(0.5 * 0.5)


def test_bm25_confidence_is_the_margin_of_the_best_non_exact_hit() -> None:
    assert bm25_confidence([]) == 0.0
    assert bm25_confidence(hits(("a", 4.0))) == 1.0
    assert bm25_confidence(hits(("a", 4.0), ("b", 3.0))) == pytest.approx(0.25)
    assert bm25_confidence(hits(("x", 50.0), ("a", 4.0), ("b", 4.0), exact=("x",))) == 0.0


def test_gating_gives_the_dense_side_less_say_when_bm25_is_confident() -> None:
    config = FusionConfig(method="rrf", k=10.0, dense_weight=1.0, confident_dense_weight=0.0, gate_margin=0.5)
    dense = [("c", 0.9), ("b", 0.8)]
    confident = hits(("a", 10.0), ("b", 2.0))
    assert keys(fuse(confident, dense, 3, config))[:2] == ["a", "b"]
    unsure = hits(("a", 10.0), ("b", 9.5))
    assert keys(fuse(unsure, dense, 3, config))[0] == "b"


def test_a_similarity_floor_drops_distant_tools_without_a_lexical_match_only() -> None:
    floored = FusionConfig(method="weighted", dense_weight=0.4, min_similarity=0.5)
    dense = [("web_search", 0.8), ("read_file", 0.3), ("list_dir", 0.2)]
    # Nothing lexical and nothing close: nothing found (search_tools can say "No tools found").
    assert fuse([], [("read_file", 0.3), ("list_dir", 0.2)], 5, floored) == []
    assert keys(fuse([], dense, 5, floored)) == ["web_search"]
    # A lexical match keeps a tool whatever its cosine, and the others' order is unchanged.
    bm25 = hits(("list_dir", 4.0))
    plain = FusionConfig(method="weighted", dense_weight=0.4)
    assert keys(fuse(bm25, dense, 5, floored)) == [
        k for k in keys(fuse(bm25, dense, 5, plain)) if k != "read_file"
    ]
