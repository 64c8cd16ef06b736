"""Embedding cache: vectors by text hash, in memory and on disk; restarts embed only new texts."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
import structlog

from discovery_svc.embedding_cache import EmbeddingCache, embed_with_cache
from discovery_svc.embeddings import EmbedderError, Vectors, normalize_rows


class CountingEmbedder:
    """A fake embedder: vector = normalised (length, vowels, 1); records every text it embeds."""

    def __init__(self, model_id: str = "fake-model") -> None:
        self.model_id = model_id
        self.embedded: list[str] = []

    def _vec(self, text: str) -> list[float]:
        return [float(len(text)), float(sum(ch in "aeiou" for ch in text)), 1.0]

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        self.embedded.extend(texts)
        return normalize_rows([self._vec(t) for t in texts])

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        return self.embed_documents(texts)

    def embed_query(self, text: str) -> Vectors:
        return self.embed_documents([text])[0]


def test_vectors_are_returned_in_text_order_and_repeated_texts_embedded_once(tmp_path: Path) -> None:
    embedder = CountingEmbedder()
    cache = EmbeddingCache(embedder.model_id, tmp_path)
    texts = ["read a file", "web search", "read a file"]
    vectors = embed_with_cache(embedder, cache, texts)
    assert vectors.shape == (3, 3)
    assert np.allclose(vectors[0], vectors[2])
    assert np.allclose(vectors[1], embedder.embed_query("web search"))
    assert embedder.embedded[:2] == ["read a file", "web search"]


def test_a_restart_embeds_only_new_or_changed_texts(tmp_path: Path) -> None:
    first = CountingEmbedder()
    embed_with_cache(first, EmbeddingCache(first.model_id, tmp_path), ["alpha tool", "beta tool"])
    restarted = CountingEmbedder()
    cache = EmbeddingCache(restarted.model_id, tmp_path)
    assert len(cache) == 2
    vectors = embed_with_cache(restarted, cache, ["alpha tool", "beta tool, now changed", "gamma"])
    assert restarted.embedded == ["beta tool, now changed", "gamma"]
    assert vectors.shape == (3, 3)


def test_another_model_never_reuses_the_vectors(tmp_path: Path) -> None:
    embed_with_cache(CountingEmbedder("model-a"), EmbeddingCache("model-a", tmp_path), ["same text"])
    other = CountingEmbedder("model-b")
    embed_with_cache(other, EmbeddingCache("model-b", tmp_path), ["same text"])
    assert other.embedded == ["same text"]


def test_documents_and_queries_are_cached_apart(tmp_path: Path) -> None:
    cache = EmbeddingCache("m", tmp_path)
    cache.put("document", ["text"], normalize_rows([[1.0, 0.0]]))
    assert cache.get("query", "text") is None
    assert cache.get("document", "text") is not None


def test_a_corrupt_shard_is_ignored_with_a_warning_and_its_texts_embedded_again(tmp_path: Path) -> None:
    embedder = CountingEmbedder()
    embed_with_cache(embedder, EmbeddingCache(embedder.model_id, tmp_path), ["one"], batch_size=1)
    embed_with_cache(embedder, EmbeddingCache(embedder.model_id, tmp_path), ["two"], batch_size=1)
    shards = sorted(tmp_path.rglob("shard-*.npz"))
    assert len(shards) == 2
    shards[0].write_bytes(shards[0].read_bytes()[:40])  # a write cut short
    with structlog.testing.capture_logs() as logs:
        cache = EmbeddingCache(embedder.model_id, tmp_path)
    assert len(cache) == 1
    assert any("unreadable" in entry["event"] and entry["log_level"] == "warning" for entry in logs)
    assert not shards[0].exists()
    again = CountingEmbedder()
    embed_with_cache(again, cache, ["one", "two"])
    assert len(again.embedded) == 1


def test_garbage_and_leftover_temporary_files_do_not_break_loading(tmp_path: Path) -> None:
    cache = EmbeddingCache("m", tmp_path)
    cache.put("document", ["kept"], normalize_rows([[1.0, 2.0]]))
    model_dir = next(tmp_path.iterdir())
    (model_dir / "shard-zzzz.npz").write_bytes(b"not a zip file at all")
    (model_dir / ".shard-x.npz.1234.tmp").write_bytes(b"half written")
    reloaded = EmbeddingCache("m", tmp_path)
    assert len(reloaded) == 1
    assert not list(model_dir.glob("*.tmp"))


def test_a_shard_with_a_different_dimension_is_rejected(tmp_path: Path) -> None:
    cache = EmbeddingCache("m", tmp_path)
    cache.put("document", ["a"], normalize_rows([[1.0, 0.0, 0.0]]))
    with pytest.raises(EmbedderError, match="3-d"):
        cache.put("document", ["b"], normalize_rows([[1.0, 0.0]]))


def test_many_shards_are_merged_into_one_on_load(tmp_path: Path) -> None:
    cache = EmbeddingCache("m", tmp_path)
    for i in range(20):
        cache.put("document", [f"text {i}"], normalize_rows([[1.0, float(i)]]))
    model_dir = next(tmp_path.iterdir())
    assert len(list(model_dir.glob("shard-*.npz"))) == 20
    reloaded = EmbeddingCache("m", tmp_path)
    assert len(reloaded) == 20
    assert len(list(model_dir.glob("shard-*.npz"))) == 1
    assert len(EmbeddingCache("m", tmp_path)) == 20


def test_memory_only_cache_needs_no_directory() -> None:
    embedder = CountingEmbedder()
    cache = EmbeddingCache(embedder.model_id)
    embed_with_cache(embedder, cache, ["x", "y"])
    embed_with_cache(embedder, cache, ["x", "y"])
    assert embedder.embedded == ["x", "y"]


def test_progress_reports_batches_of_texts_to_embed(tmp_path: Path) -> None:
    embedder = CountingEmbedder()
    seen: list[tuple[int, int]] = []
    embed_with_cache(
        embedder,
        EmbeddingCache(embedder.model_id, tmp_path),
        [f"t{i}" for i in range(5)],
        batch_size=2,
        progress=lambda done, total: seen.append((done, total)),
    )
    assert seen == [(2, 5), (4, 5), (5, 5)]


def test_a_cache_of_another_model_is_refused() -> None:
    with pytest.raises(ValueError, match="cache of"):
        embed_with_cache(CountingEmbedder("a"), EmbeddingCache("b"), ["x"])
