"""Fusion of BM25 and dense rankings: exact names first, RRF, weighted scores, confidence gating."""

from __future__ import annotations

import dataclasses

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


def test_tools_sharing_no_word_with_the_query_are_found_only_when_close_in_meaning() -> None:
    dense = [("web_search", 0.8), ("read_file", 0.3)]
    assert fuse([], dense, 5, RRF) == []  # no measured similarity: nothing by meaning alone
    assert keys(fuse([], dense, 5, dataclasses.replace(RRF, min_similarity=0.7))) == ["web_search"]


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
    fused = fuse(hits(("b", 1.0)), [("a", 0.5)], 2, dataclasses.replace(RRF, match_bm25_count=False))
    assert keys(fused) == ["a", "b"]  # same reciprocal rank on each side


def test_weighted_fusion_without_a_similarity_range_scales_cosines_over_the_candidates() -> None:
    config = FusionConfig(method="weighted", bm25_weight=1.0, dense_weight=1.0, match_bm25_count=False)
    bm25 = hits(("a", 100.0), ("b", 50.0))
    dense = [("b", 0.9), ("c", 0.5), ("a", 0.1)]
    fused = {h.key: h.score for h in fuse(bm25, dense, 3, config)}
    assert fused["a"] == pytest.approx(0.5 * 1.0 + 0.5 * 0.0)
    assert fused["b"] == pytest.approx(0.5 * 0.5 + 0.5 * 1.0)
    assert fused["c"] == pytest.approx(0.5 * 0.5)


def test_against_a_similarity_range_a_cosine_scores_the_same_however_many_candidates() -> None:
    # Min-max over the candidates made the nearest of a few unrelated tools look like a perfect
    # match; against the embedder's range, a cosine means the same in a catalog of any size.
    config = FusionConfig(similarity_range=(0.7, 0.9), match_bm25_count=False)
    few = {h.key: h.score for h in fuse([], [("a", 0.78), ("b", 0.75)], 5, config)}
    many = [("a", 0.78), ("b", 0.75)] + [(f"t{i}", 0.75 - i / 1000) for i in range(40)]
    assert few["a"] == pytest.approx(0.4 / 1.4 * 0.4)
    assert {h.key: h.score for h in fuse([], many, 5, config)}["a"] == few["a"]
    assert few["b"] < few["a"]


def test_a_search_returns_no_more_tools_than_share_a_word_with_the_query_unless_close_in_meaning() -> None:
    config = FusionConfig(similarity_range=(0.7, 0.9), min_similarity=0.88)
    bm25 = hits(("weak_word_match", 2.0))
    # Meaning swaps the weak word match for a closer tool, but the count stays BM25's.
    dense = [("close", 0.86), ("weak_word_match", 0.72), ("far", 0.75)]
    assert keys(fuse(bm25, dense, 5, config)) == ["weak_word_match"]
    swapped = fuse(hits(("weak_word_match", 2.0)), [("closer", 0.87), ("weak_word_match", 0.70)], 5,
                   dataclasses.replace(config, dense_weight=4.0))  # fmt: skip
    assert keys(swapped) == ["closer"]
    # A tool at min_similarity is found beyond the count, and alone when no word matches.
    dense_close = [("very_close", 0.9), ("weak_word_match", 0.72)]
    assert keys(fuse(bm25, dense_close, 5, config)) == ["weak_word_match", "very_close"]
    assert keys(fuse([], dense_close, 5, config)) == ["very_close"]
    assert fuse([], [("far", 0.84)], 5, config) == []


def test_fused_hits_carry_their_bm25_score_and_cosine() -> None:
    config = FusionConfig(similarity_range=(0.7, 0.9), min_similarity=0.88)
    fused = {h.key: h for h in fuse(hits(("a", 3.0), ("b", 1.5)), [("b", 0.8), ("c", 0.95)], 5, config)}
    assert (fused["a"].bm25, fused["a"].similarity) == (3.0, None)
    assert (fused["b"].bm25, fused["b"].similarity) == (1.5, 0.8)
    assert (fused["c"].bm25, fused["c"].similarity) == (None, 0.95)


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


def test_without_bm25_s_count_a_similarity_floor_drops_distant_tools_without_a_word_match() -> None:
    floored = FusionConfig(method="weighted", dense_weight=0.4, min_similarity=0.5, match_bm25_count=False)
    dense = [("web_search", 0.8), ("read_file", 0.3), ("list_dir", 0.2)]
    # Nothing lexical and nothing close: nothing found (search_tools can say "No tools found").
    assert fuse([], [("read_file", 0.3), ("list_dir", 0.2)], 5, floored) == []
    assert keys(fuse([], dense, 5, floored)) == ["web_search"]
    # A lexical match keeps a tool whatever its cosine, and the others' order is unchanged.
    bm25 = hits(("list_dir", 4.0))
    plain = FusionConfig(method="weighted", dense_weight=0.4, match_bm25_count=False)
    assert keys(fuse(bm25, dense, 5, floored)) == [
        k for k in keys(fuse(bm25, dense, 5, plain)) if k != "read_file"
    ]
