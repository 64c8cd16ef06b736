"""An in-process fake embedding model whose vectors are bags of concepts, for hybrid search tests.

Synonyms without a shared word ("online lookup" / "Search the internet") get similar vectors, so a
test can show the dense side closing a vocabulary gap BM25 cannot. Failure knobs: queries that
raise, document batches that raise a given number of times, and queries or document batches held
until an event is set (a slow embedder). Every document text and query it embeds is recorded.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from discovery_svc.embeddings import EmbedderError, Vectors, normalize_rows

__all__ = ["CONCEPTS", "ConceptEmbedder"]

# Concepts the fake model "understands": a text's vector counts the concepts its words evoke.
CONCEPTS = {
    "web": 0, "internet": 0, "online": 0, "search": 1, "information": 1, "find": 1, "lookup": 1,
    "file": 2, "disk": 2, "details": 3, "metadata": 3, "info": 3, "weather": 4, "forecast": 4,
    "issue": 5, "bug": 5, "ticket": 5,
}  # fmt: skip


class ConceptEmbedder:
    """A fake model: each known word adds 1 to its concept, any other word 0.05 to a catch-all."""

    def __init__(
        self,
        *,
        fail: bool = False,
        fail_documents: int = 0,
        hold_queries: threading.Event | None = None,
        hold_documents: threading.Event | None = None,
        model_id: str = "concepts",
    ) -> None:
        self.model_id = model_id
        self.fail = fail  # every query raises
        self.fail_documents = fail_documents  # this many document batches raise, then they work
        self.hold_queries = hold_queries  # queries wait for this event (bounded by the test)
        self.hold_documents = hold_documents  # document batches wait for this event (bounded)
        self.queries: list[str] = []
        self.documents: list[str] = []
        self._lock = threading.Lock()

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * 7
        for word in text.lower().replace("(", " ").replace(")", " ").replace(".", " ").split():
            vector[CONCEPTS.get(word, 6)] += 1.0 if word in CONCEPTS else 0.05
        return vector

    def _embed(self, texts: Sequence[str]) -> Vectors:
        return normalize_rows([self._vector(t) for t in texts])

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        if self.hold_documents is not None and not self.hold_documents.wait(timeout=30):
            raise EmbedderError("held documents never released")
        with self._lock:
            if self.fail_documents > 0:
                self.fail_documents -= 1
                raise EmbedderError("model out of memory")
            self.documents.extend(texts)
        return self._embed(texts)

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        return self._embed(texts)

    def embed_query(self, text: str) -> Vectors:
        with self._lock:
            self.queries.append(text)
        if self.hold_queries is not None and not self.hold_queries.wait(timeout=30):
            raise EmbedderError("held query never released")
        if self.fail:
            raise EmbedderError("model on fire")
        row: Vectors = self._embed([text])[0]
        return row
