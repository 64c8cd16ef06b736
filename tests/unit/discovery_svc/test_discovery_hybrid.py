"""HybridIndex: BM25 fused with dense vectors, scoped like BM25, degrading to BM25 on failure."""

from __future__ import annotations

import numpy as np
import pytest
import structlog

from discovery_svc.embeddings import embedding_text, normalize_rows
from discovery_svc.fusion import FusionConfig
from discovery_svc.hybrid import DenseIndex, HybridIndex
from discovery_svc.index import SearchDoc, SearchHit, SearchIndex
from tests.support.concept_embedder import ConceptEmbedder

CATALOG = [
    SearchDoc("search__web_search", "search", "web_search", "Search the internet", {}),
    SearchDoc("fs__search_files", "fs", "search_files", "Search files by name pattern on disk", {}),
    SearchDoc("fs__get_file_info", "fs", "get_file_info", "Retrieve metadata about a file", {}),
    SearchDoc("fs__read_file", "fs", "read_file", "Read a file from disk", {}),
    SearchDoc("weather__forecast", "weather", "forecast", "Weather forecast for a city", {}),
    SearchDoc("tracker__create_ticket", "tracker", "create_ticket", "Open a new bug ticket", {}),
]


def build(embedder: ConceptEmbedder | None = None, **kw: object) -> HybridIndex:
    embedder = embedder or ConceptEmbedder()
    bm25 = SearchIndex(CATALOG)
    by_key = {d.key: d for d in CATALOG}
    vectors = embedder.embed_documents([embedding_text(by_key[k]) for k in bm25.keys])
    # The fake model's cosines: a tool of the query's concepts is at ~0.98, others far below.
    config = FusionConfig(method="rrf", k=10.0, min_similarity=0.9)
    return HybridIndex(bm25, DenseIndex(vectors), embedder, config=config, **kw)  # type: ignore[arg-type]


def keys(hits: list[SearchHit]) -> list[str]:
    return [h.key for h in hits]


def test_a_vocabulary_gap_is_closed_by_the_dense_side() -> None:
    index = build()
    assert keys(index.bm25.search("online lookup", 5)) == []
    assert keys(index.search("online lookup", 1)) == ["search__web_search"]


def test_hybrid_prefers_the_tool_both_sides_agree_on() -> None:
    index = build()
    assert keys(index.search("file metadata details", 1)) == ["fs__get_file_info"]


def test_exact_name_still_ranks_first() -> None:
    hits = build().search("read_file", 3)
    assert hits[0].key == "fs__read_file"
    assert hits[0].exact


def test_server_only_skip_and_masks_scope_both_sides() -> None:
    index = build()
    assert set(keys(index.search("internet lookup", 5, server="fs"))) <= {
        "fs__search_files",
        "fs__get_file_info",
        "fs__read_file",
    }
    assert set(keys(index.search("weather", 5, only={"fs__read_file"}))) <= {"fs__read_file"}
    assert "search__web_search" not in keys(index.search("web search", 5, skip={"search__web_search"}))
    mask = index.bm25.mask(["fs__read_file", "weather__forecast"])
    found = keys(index.search("online information", 5, candidates=mask))
    assert set(found) <= {"fs__read_file", "weather__forecast"}
    view = index.restricted(mask)
    assert set(keys(view.search("bug ticket", 5))) <= {"fs__read_file", "weather__forecast"}
    assert index.search("issue", 5, server="nowhere") == []


def test_an_embedder_failure_degrades_to_bm25_with_a_warning() -> None:
    degraded: list[Exception] = []
    index = build(ConceptEmbedder(fail=True), on_degraded=degraded.append)
    with structlog.testing.capture_logs() as logs:
        hits = index.search("weather forecast", 3)
    assert keys(hits) == keys(index.bm25.search("weather forecast", 3))
    assert len(degraded) == 1
    assert any(entry["log_level"] == "warning" for entry in logs)


def test_repeated_queries_are_embedded_once() -> None:
    embedder = ConceptEmbedder()
    index = build(embedder)
    index.search("find the weather", 3)
    index.search("find the weather", 3)
    assert embedder.queries == ["find the weather"]


def test_a_matrix_that_does_not_match_the_catalog_is_refused() -> None:
    bm25 = SearchIndex(CATALOG)
    with pytest.raises(ValueError, match="vectors for"):
        HybridIndex(bm25, DenseIndex(np.zeros((2, 7), dtype=np.float32)), ConceptEmbedder())


def test_dense_search_within_rows_returns_best_rows_first() -> None:
    dense = DenseIndex(normalize_rows([[1, 0], [0.9, 0.1], [0, 1], [0.5, 0.5]]))
    query = normalize_rows([[1, 0]])[0]
    assert [r for r, _ in dense.search(query, 2)] == [0, 1]
    assert [r for r, _ in dense.search(query, 2, scope={2, 3})] == [3, 2]
    assert [r for r, _ in dense.search(query, 5, scope=range(1, 3), banned={1})] == [2]
    assert dense.search(query, 0) == []
