"""Hybrid search in the service: embedding each catalog version in the background, then serving it.

When a catalog version's index is built, :meth:`HybridStage.start` embeds its tools in a worker
thread (only texts missing from the embedding cache reach the model; progress goes to the log)
while searches keep answering with BM25 and ``toolscout_discovery_search_mode_active{mode="bm25"}`` is 1.
When every tool has a vector, the catalog's searcher becomes a
:class:`~discovery_svc.hybrid.HybridIndex` and the gauge flips to ``hybrid``. A failed attempt
(endpoint down, model error) is logged as a warning and retried with a growing delay; search stays
BM25 meanwhile. A newer catalog version cancels the build of the older one: what it had embedded
is cached, so the next build starts from there.

Per query, :meth:`HybridStage.scope_for` embeds the query in a worker thread with a bounded wait
(``query_timeout``, and at most half of the caller's remaining deadline). If the embedder fails,
answers with something that is not a usable vector (see
:func:`~discovery_svc.embeddings.checked_vectors`; a query vector must also have the catalog's
size) or is too slow, the search answers with BM25 alone and
``toolscout_discovery_search_fallbacks_total`` counts it by reason: the LLM never sees an error
for it. One warning per burst of failures, not one per search.

A circuit breaker (:mod:`discovery_svc.breaker`) keeps a dead or hung embedder from costing every
search its ``query_timeout``: after ``breaker_failures`` failures in a row searches go straight to
BM25 (reason ``breaker_open``) and ``toolscout_discovery_search_mode_active`` shows ``bm25``; a probe embeds
a fixed text every ``breaker_probe_interval`` seconds, and the first that works makes searches
hybrid again.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from discovery_svc.breaker import CircuitBreaker
from discovery_svc.catalog_index import CatalogIndex
from discovery_svc.embedding_cache import EmbeddingCache, embed_with_cache
from discovery_svc.embeddings import (
    EMBEDDINGS_EXTRA,
    Embedder,
    EmbedderError,
    EmbedderTimeoutError,
    EmbedderUnavailableError,
    MalformedEmbeddingError,
    Vectors,
    check_embedder,
    checked_vectors,
    embedder_from_settings,
    embedding_text,
)
from discovery_svc.fusion import FusionConfig, fusion_for
from discovery_svc.hybrid import DenseIndex, HybridIndex
from discovery_svc.metrics import DiscoveryMetrics
from discovery_svc.scope import SearchScope
from toolscout_kit.config import SEARCH_MODE_ENV, ToolscoutConfig
from toolscout_kit.errors import ConfigError
from toolscout_kit.logging import get_logger
from toolscout_kit.tracing import add_event

__all__ = ["HybridStage", "check_search", "hybrid_stage_from_config"]

_log = get_logger(__name__)
_WARN_EVERY = 60.0  # seconds between repeated warnings of one kind (the skipped ones are counted)
# What a probe of an open breaker embeds: any short text does; this one says what it is in the
# endpoint's own logs.
PROBE_TEXT = "toolscout embedder health probe"


class _Cancelled(Exception):
    """The build was superseded (a newer catalog) or the service is stopping."""


class _CatalogSized:
    """The embedder as a catalog's hybrid index uses it: every vector checked to have that
    catalog's size (an endpoint now serving another model would otherwise break the dot product)."""

    def __init__(self, embedder: Embedder, dim: int | None) -> None:
        self._embedder = embedder
        self._dim = dim

    @property
    def model_id(self) -> str:
        return self._embedder.model_id

    def _checked(self, vectors: Vectors, rows: int) -> Vectors:
        return checked_vectors(vectors.reshape(rows, -1), rows, "the embedder", self._dim)

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        return self._checked(self._embedder.embed_documents(texts), len(texts))

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        return self._checked(self._embedder.embed_queries(texts), len(texts))

    def embed_query(self, text: str) -> Vectors:
        row: Vectors = self._checked(self._embedder.embed_query(text), 1)[0]
        return row


class _Throttled:
    """Warnings of one kind at most every ``_WARN_EVERY`` seconds, with the count of those skipped."""

    def __init__(self) -> None:
        self._last: dict[str, float] = {}
        self._skipped: dict[str, int] = {}

    def warning(self, event: str, **fields: Any) -> None:
        now = time.monotonic()
        if now - self._last.get(event, -_WARN_EVERY) < _WARN_EVERY:
            self._skipped[event] = self._skipped.get(event, 0) + 1
            return
        skipped = self._skipped.pop(event, 0)
        self._last[event] = now
        _log.warning(event, **fields, **({"not_logged_since": skipped} if skipped else {}))


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
        breaker_failures: int = 3,
        breaker_probe_interval: float = 2.0,
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
        # Set while searches are hybrid: the newest catalog has its vectors and the breaker is closed.
        self._serving = asyncio.Event()
        self._base: CatalogIndex | None = None
        # The embedder of the newest hybrid index, checked against its catalog's vector size.
        self._query_embedder: Embedder = embedder
        self._breaker = CircuitBreaker(failures=breaker_failures, probe_interval=breaker_probe_interval)
        self._probe_task: asyncio.Task[None] | None = None
        self._burst = 0  # query embeddings failed since the last one that worked
        self._warnings = _Throttled()
        metrics.set_search_mode("bm25")

    # --- building ----------------------------------------------------------------------------

    def start(self, base: CatalogIndex) -> None:
        """Embeds ``base`` in the background (superseding any build of an older version).

        Must be called on the event loop.
        """
        self._stop_build()
        self._base = base
        self._show_mode()
        self._cancel = threading.Event()
        self._task = asyncio.create_task(
            self._run(base, self._cancel), name=f"discovery-embed-{base.version[:12]}"
        )

    @property
    def breaker(self) -> CircuitBreaker:
        """The query embedder's circuit breaker (its settings and state)."""
        return self._breaker

    async def wait_ready(self) -> None:
        """Returns once searches are hybrid: the latest catalog's vectors are ready and the embedder
        works (its breaker is closed). Bound the wait yourself."""
        await self._serving.wait()

    async def close(self) -> None:
        """Stops a build in progress (its thread stops after the batch it is embedding) and probing."""
        task = self._stop_build()
        probe, self._probe_task = self._probe_task, None
        for running in (task, probe):
            if running is not None:
                running.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await running

    def _stop_build(self) -> asyncio.Task[None] | None:
        self._cancel.set()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
        return task

    async def _run(self, base: CatalogIndex, cancel: threading.Event) -> None:
        delay = self._retry_initial
        while True:
            try:
                hybrid, query_embedder = await asyncio.to_thread(self._build, base, cancel)
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
            self._query_embedder = query_embedder
            self._show_mode()
            _log.info(
                "hybrid search ready",
                catalog_version=base.version,
                tools=len(base),
                embedder_breaker_open=self._breaker.is_open,
            )
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

    def _build(self, base: CatalogIndex, cancel: threading.Event) -> tuple[HybridIndex, Embedder]:
        """Every tool's vector (cache first, the model for the rest), then the hybrid index and the
        embedder it embeds queries with (checked against the catalog's vector size).

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
        sized = _CatalogSized(self._embedder, vectors.shape[1] if len(vectors) else None)
        hybrid = HybridIndex(
            base.bm25, DenseIndex(vectors), sized, config=self._fusion, on_degraded=self._degraded
        )
        return hybrid, sized

    # --- queries -----------------------------------------------------------------------------

    def _degraded(self, err: Exception) -> None:
        self._metrics.search_fallbacks.labels("embedder_error").inc()
        add_event("fallback", {"to": "bm25", "reason": "embedder_error"})

    async def scope_for(
        self, scope: SearchScope, query: str | None, time_limit: float | None
    ) -> tuple[SearchScope, bool]:
        """The scope a search with ``query`` should use, and whether it must run in a thread.

        With hybrid active, the query is embedded first (in a thread, bounded); on failure or
        timeout, or at once while the breaker is open, the scope answers with BM25 alone.
        """
        searcher = scope.base.searcher
        if not isinstance(searcher, HybridIndex) or query is None or not query.strip():
            return scope, False
        lexical = scope.using(scope.base.bm25)
        if self._breaker.is_open:
            self._metrics.search_fallbacks.labels("breaker_open").inc()
            add_event("fallback", {"to": "bm25", "reason": "breaker_open"})
            return lexical, False
        budget = self._query_timeout
        if time_limit is not None:
            budget = min(budget, max(time_limit, 0.0) / 2)
        try:
            await asyncio.wait_for(asyncio.to_thread(searcher.query_vector, query), budget)
        except (TimeoutError, EmbedderTimeoutError):
            # The SDK's own timeout (the same query_timeout) may fire first.
            # A wait cut short by the caller's own deadline says nothing about the embedder.
            self._failed(
                "timeout", f"no query vector within {budget:.3g} s", count=budget >= self._query_timeout
            )
        except MalformedEmbeddingError as err:
            self._failed("malformed", str(err))
        except EmbedderError as err:
            self._failed("embedder_error", str(err))
        else:
            self._succeeded()
            return scope.using(searcher), True
        return lexical, False

    def _failed(self, reason: str, error: str, *, count: bool = True) -> None:
        self._metrics.search_fallbacks.labels(reason).inc()
        add_event("fallback", {"to": "bm25", "reason": reason})
        self._burst += 1
        if self._burst == 1:
            self._warnings.warning(
                "query embedding failed; answering with BM25 alone", reason=reason, error=error
            )
        if count and self._breaker.record_failure():
            self._show_mode()
            self._warnings.warning(
                "the embedder keeps failing: searches answer with BM25 alone, without waiting for "
                "it, until a probe finds it working",
                consecutive_failures=self._breaker.consecutive_failures,
                probe_interval=self._breaker.probe_interval,
                reason=reason,
                error=error,
            )
            if self._probe_task is None or self._probe_task.done():
                self._probe_task = asyncio.create_task(self._probe(), name="discovery-embedder-probe")

    def _succeeded(self) -> None:
        if self._burst:
            _log.info("query embedding works again", failed_queries=self._burst)
            self._burst = 0
        open_for = self._breaker.open_for()
        if self._breaker.record_success():
            self._show_mode()
            _log.info("the embedder answers again: hybrid search resumes", open_seconds=round(open_for, 1))

    async def _probe(self) -> None:
        """While the breaker is open: embed :data:`PROBE_TEXT` every probe interval until it works."""
        while self._breaker.is_open:
            await asyncio.sleep(self._breaker.probe_interval)
            embedder = self._query_embedder
            try:
                await asyncio.wait_for(
                    asyncio.to_thread(embedder.embed_query, PROBE_TEXT), self._query_timeout
                )
            except (TimeoutError, EmbedderError) as err:
                self._breaker.record_failure()
                _log.debug("embedder probe failed", error=str(err) or type(err).__name__)
                continue
            self._succeeded()

    def _show_mode(self) -> None:
        """The mode gauge: hybrid when the newest catalog has its vectors and the embedder works."""
        base = self._base
        hybrid = base is not None and base.hybrid and not self._breaker.is_open
        self._metrics.set_search_mode("hybrid" if hybrid else "bm25")
        if hybrid:
            self._serving.set()
        else:
            self._serving.clear()


def check_search(config: ToolscoutConfig, env: Mapping[str, str] | None = None) -> None:
    """Whether ``toolscout.search`` can be served here; run before anything starts.

    Imports the local model's package when it is the embedder (~0.3 s).

    Raises:
        ConfigError: hybrid with an embedder that cannot work here (the local model without the
            ``toolscout[embeddings]`` extra, an API key variable that is not set).
    """
    search = config.toolscout.search
    if search.mode != "hybrid":
        return
    try:
        check_embedder(search.embedder, os.environ if env is None else env)
    except EmbedderUnavailableError as err:
        hint = (
            f" (or set toolscout.search.mode, or {SEARCH_MODE_ENV}, to 'bm25')"
            if search.embedder.type == "local"
            else ""
        )
        raise ConfigError(
            f"toolscout.search.mode is 'hybrid' but the {search.embedder.type} embedder cannot be used: "
            f"{err}{hint}"
        ) from None


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
    check_search(config, env)
    embedder = embedder_from_settings(search.embedder, os.environ if env is None else env)
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
        breaker_failures=search.embedder.breaker_failures,
        breaker_probe_interval=search.embedder.breaker_probe_interval,
    )
