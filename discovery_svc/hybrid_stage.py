"""Hybrid search in the service: embedding each catalog version in the background, then serving it.

When a catalog version's index is built, :meth:`HybridStage.start` embeds its tools in a worker
thread (only texts missing from the embedding cache reach the model; progress goes to the log)
while searches keep answering with BM25 and ``toolscout_search_mode_active{mode="bm25"}`` is 1.
When every tool has a vector, the catalog's searcher becomes a
:class:`~discovery_svc.hybrid.HybridIndex` and the gauge flips to ``hybrid``. A failed attempt
(endpoint down, model error) is logged as a warning and retried with a growing delay; search stays
BM25 meanwhile. A newer catalog version cancels the build of the older one: what it had embedded
is cached, so the next build starts from there.

Per query, :meth:`HybridStage.scope_for` embeds the query in a worker thread with a bounded wait
(``query_timeout``, and at most half of the caller's remaining deadline). If the embedder fails or
is too slow the search answers with BM25 alone, a warning is logged and
``toolscout_discovery_search_fallbacks_total`` counts it: the LLM never sees an error for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from discovery_svc.catalog_index import CatalogIndex
from discovery_svc.embedding_cache import EmbeddingCache, embed_with_cache
from discovery_svc.embeddings import (
    EMBEDDINGS_EXTRA,
    Embedder,
    EmbedderError,
    EmbedderUnavailableError,
    embedder_from_settings,
    embedding_text,
)
from discovery_svc.fusion import FusionConfig, fusion_for
from discovery_svc.hybrid import DenseIndex, HybridIndex
from discovery_svc.metrics import DiscoveryMetrics
from discovery_svc.scope import SearchScope
from toolscout_kit.config import ToolscoutConfig
from toolscout_kit.errors import ConfigError
from toolscout_kit.logging import get_logger

__all__ = ["HybridStage", "hybrid_stage_from_config"]

_log = get_logger(__name__)
_WARN_EVERY = 60.0  # seconds between repeated "answering with BM25" warnings


class _Cancelled(Exception):
    """The build was superseded (a newer catalog) or the service is stopping."""


class HybridStage:
    """Builds and activates the dense side of each catalog version; embeds queries with a bound."""

    def __init__(
        self,
        embedder: Embedder,
        *,
        metrics: DiscoveryMetrics,
        cache_dir: Path | None = None,
        fusion: FusionConfig | None = None,
        query_timeout: float = 2.0,
        batch_size: int = 64,
        retry_initial: float = 5.0,
        retry_max: float = 300.0,
        progress_every: float = 10.0,
    ) -> None:
        self._embedder = embedder
        self._metrics = metrics
        self._cache_dir = cache_dir
        # None: what was measured for this embedder (others find nothing by meaning alone).
        self._fusion = fusion if fusion is not None else fusion_for(embedder.model_id)
        self._query_timeout = query_timeout
        self._batch_size = batch_size
        self._retry_initial = retry_initial
        self._retry_max = retry_max
        self._progress_every = progress_every
        self._cache: EmbeddingCache | None = None
        self._cache_lock = threading.Lock()
        self._task: asyncio.Task[None] | None = None
        self._cancel = threading.Event()
        self._ready = asyncio.Event()
        self._warned_at = -_WARN_EVERY
        self._fallbacks_since_warning = 0
        metrics.set_search_mode("bm25")

    # --- building ----------------------------------------------------------------------------

    def start(self, base: CatalogIndex) -> None:
        """Embeds ``base`` in the background (superseding any build of an older version).

        Must be called on the event loop.
        """
        self._stop_build()
        self._metrics.set_search_mode("bm25")
        self._ready = asyncio.Event()
        self._cancel = threading.Event()
        self._task = asyncio.create_task(
            self._run(base, self._cancel, self._ready), name=f"discovery-embed-{base.version[:12]}"
        )

    async def wait_ready(self) -> None:
        """Returns once the latest catalog answers with hybrid search (bound the wait yourself)."""
        await self._ready.wait()

    async def close(self) -> None:
        """Stops a build in progress (its thread stops after the batch it is embedding)."""
        task = self._stop_build()
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _stop_build(self) -> asyncio.Task[None] | None:
        self._cancel.set()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
        return task

    async def _run(self, base: CatalogIndex, cancel: threading.Event, ready: asyncio.Event) -> None:
        delay = self._retry_initial
        while True:
            try:
                hybrid = await asyncio.to_thread(self._build, base, cancel)
            except _Cancelled:
                return
            except EmbedderError as err:
                self._metrics.embedding_failures.inc()
                _log.warning(
                    "embedding the catalog failed; search answers with BM25 until it succeeds",
                    catalog_version=base.version,
                    error=str(err),
                    retry_in=round(delay, 1),
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._retry_max)
                continue
            if cancel.is_set():
                return
            base.activate(hybrid)
            self._metrics.set_search_mode("hybrid")
            ready.set()
            _log.info("hybrid search ready", catalog_version=base.version, tools=len(base))
            return

    def _open_cache(self) -> EmbeddingCache:
        with self._cache_lock:
            if self._cache is None:
                started = time.perf_counter()
                self._cache = EmbeddingCache(self._embedder.model_id, self._cache_dir)
                _log.info(
                    "embedding cache loaded",
                    directory=str(self._cache_dir) if self._cache_dir else None,
                    vectors=len(self._cache),
                    seconds=round(time.perf_counter() - started, 3),
                )
            return self._cache

    def _build(self, base: CatalogIndex, cancel: threading.Event) -> HybridIndex:
        """Every tool's vector (cache first, the model for the rest), then the hybrid index.

        Raises:
            EmbedderError: the embedder failed (what it embedded before failing stays cached).
            _Cancelled: superseded or stopping.
        """
        if cancel.is_set():
            raise _Cancelled
        cache = self._open_cache()
        texts = [embedding_text(doc) for doc in base.docs()]
        _, missing = cache.lookup("document", texts)
        new = len({texts[i] for i in missing})
        started = time.perf_counter()
        logged, counted = [started], [0]
        if new:
            _log.info(
                "embedding tools; search answers with BM25 until done",
                catalog_version=base.version,
                tools=len(texts),
                new=new,
                cached=len(texts) - len(missing),
            )

        def progress(done: int, total: int) -> None:
            self._metrics.tools_embedded.inc(done - counted[0])
            counted[0] = done
            now = time.perf_counter()
            if done < total and now - logged[0] >= self._progress_every:
                logged[0] = now
                rate = done / max(now - started, 1e-9)
                _log.info(
                    "embedding tools",
                    catalog_version=base.version,
                    done=done,
                    total=total,
                    per_second=round(rate, 1),
                    eta_seconds=round((total - done) / max(rate, 1e-9)),
                )
            if cancel.is_set():
                raise _Cancelled

        vectors = embed_with_cache(
            self._embedder, cache, texts, batch_size=self._batch_size, progress=progress
        )
        if new:
            _log.info(
                "tools embedded",
                catalog_version=base.version,
                new=new,
                seconds=round(time.perf_counter() - started, 2),
            )
        return HybridIndex(
            base.bm25, DenseIndex(vectors), self._embedder, config=self._fusion, on_degraded=self._degraded
        )

    # --- queries -----------------------------------------------------------------------------

    def _degraded(self, err: Exception) -> None:
        self._metrics.search_fallbacks.labels("embedder_error").inc()

    async def scope_for(
        self, scope: SearchScope, query: str | None, time_limit: float | None
    ) -> tuple[SearchScope, bool]:
        """The scope a search with ``query`` should use, and whether it must run in a thread.

        With hybrid active, the query is embedded first (in a thread, bounded); on failure or
        timeout the scope answers with BM25 alone.
        """
        searcher = scope.base.searcher
        if not isinstance(searcher, HybridIndex) or query is None or not query.strip():
            return scope, False
        budget = self._query_timeout
        if time_limit is not None:
            budget = min(budget, max(time_limit, 0.0) / 2)
        try:
            await asyncio.wait_for(asyncio.to_thread(searcher.query_vector, query), budget)
        except TimeoutError:
            self._fallback("timeout", f"no query vector within {budget:.3g} s")
        except EmbedderError as err:
            self._fallback("embedder_error", str(err))
        else:
            return scope.using(searcher), True
        return scope.using(scope.base.bm25), False

    def _fallback(self, reason: str, error: str) -> None:
        self._metrics.search_fallbacks.labels(reason).inc()
        self._fallbacks_since_warning += 1
        now = time.monotonic()
        if now - self._warned_at >= _WARN_EVERY:
            _log.warning(
                "query embedding failed; answering with BM25 alone",
                reason=reason,
                error=error,
                fallbacks=self._fallbacks_since_warning,
            )
            self._warned_at = now
            self._fallbacks_since_warning = 0


def hybrid_stage_from_config(
    config: ToolscoutConfig, metrics: DiscoveryMetrics, env: Mapping[str, str] | None = None
) -> HybridStage | None:
    """The hybrid stage ``toolscout.search`` asks for, or None in BM25 mode.

    Imports the local model's package when it is the embedder (~0.3 s; run it off the event loop).

    Raises:
        ConfigError: hybrid with an embedder that cannot work here (the local model without the
            ``toolscout[embeddings]`` extra, an API key variable that is not set).
    """
    search = config.toolscout.search
    if search.mode != "hybrid":
        return None
    try:
        embedder = embedder_from_settings(search.embedder, os.environ if env is None else env)
    except EmbedderUnavailableError as err:
        hint = " (or set toolscout.search.mode to 'bm25')" if search.embedder.type == "local" else ""
        raise ConfigError(
            f"toolscout.search.mode is 'hybrid' but the {search.embedder.type} embedder cannot be used: "
            f"{err}{hint}"
        ) from None
    cache_dir = config.resolve_path(search.cache_dir) if search.cache_dir else None
    if cache_dir is None:
        _log.info("no toolscout.search.cache_dir: embeddings are kept in memory only")
    _log.info(
        "hybrid search configured",
        embedder=embedder.model_id,
        cache_dir=str(cache_dir) if cache_dir else None,
        extra=EMBEDDINGS_EXTRA if search.embedder.type == "local" else None,
    )
    return HybridStage(
        embedder,
        metrics=metrics,
        cache_dir=cache_dir,
        fusion=fusion_for(embedder.model_id, min_similarity=search.min_similarity),
        query_timeout=search.embedder.query_timeout,
        batch_size=search.embedder.batch_size,
    )
