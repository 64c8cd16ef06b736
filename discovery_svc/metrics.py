"""Discovery's Prometheus metrics (names are a contract: dashboards and alerts use them).

:class:`DiscoveryMetrics` registers in the registry it is given (the service's own, served by its
metrics endpoint; tests pass a fresh one). Toolset labels are configured names (bounded); the
empty toolset (every tool) is labelled ``_all``. Definition-token figures are the orchestrator's:
it knows how many LLM calls actually happened.
"""

from __future__ import annotations

from typing import Literal

from prometheus_client import CollectorRegistry

from toolscout_kit.metrics import DeprecatedNames, MetricSet, TimedEvents
from toolscout_kit.tracing import exemplar

__all__ = ["INLINE_TOOLSET_LABEL", "DiscoveryMetrics", "SearchRanking", "active_search_mode", "toolset_label"]

SearchRanking = Literal["bm25", "hybrid"]
# Inline toolsets are unbounded in number: they share one label.
INLINE_TOOLSET_LABEL = "_inline"


def toolset_label(toolset: str) -> str:
    if toolset.startswith("inline:"):
        return INLINE_TOOLSET_LABEL
    return toolset or "_all"


class DiscoveryMetrics:
    """Search latency and outcomes, tools discovered, prepared-state builds."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        m = MetricSet("toolscout_discovery_", registry)
        self.catalog_merge_seconds = m.histogram(
            "catalog_merge_seconds",
            "Time from a pool shard's catalog update to the merged catalog handed to discovery.",
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        self.searches = TimedEvents(
            m,
            ("searches", "search_tools calls by mode and outcome (found, empty, error)."),
            ("search_duration_seconds", "Time to answer one search_tools call, by mode."),
            "mode",
            "outcome",
            timed_by=("mode",),
            buckets=(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
        )
        self.tools_discovered = m.counter("tools_discovered", "Tools newly loaded by search_tools calls.")
        self.index_builds = TimedEvents(
            m,
            (
                "index_builds",
                "Search indexes built: one BM25 index per catalog version, shared by every toolset.",
            ),
            (
                "index_build_duration_seconds",
                "Time to build one catalog version's BM25 index and name lookups.",
            ),
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
        )
        self.toolset_builds = m.counter(
            "toolset_builds",
            "Prepared toolset states (partition, candidate mask, manifest) built, by kind (configured, inline).",
            "kind",
        )
        self.search_mode_active = m.gauge(
            "search_mode_active",
            "1 for the ranking that answers search queries now: bm25, or hybrid once the catalog's "
            "embeddings are ready.",
            "mode",
        )
        self.search_fallbacks = m.counter(
            "search_fallbacks",
            "Hybrid searches answered by BM25 alone because the query could not be embedded, by "
            "reason (embedder_error, malformed, timeout, breaker_open).",
            "reason",
        )
        self.tools_embedded = m.counter(
            "tools_embedded", "Tool texts embedded by the model (not found in the embedding cache)."
        )
        self.embedding_failures = m.counter(
            "embedding_failures",
            "Failed attempts to embed a catalog (search stays BM25; the attempt is retried).",
        )
        for mode in ("bm25", "hybrid"):
            self.search_mode_active.labels(mode).set(0)
        # Its name before 0.2.0, served until 0.3.0.
        DeprecatedNames(m.registry, {"toolscout_search_mode_active": self.search_mode_active})

    def merged(self, seconds: float) -> None:
        """One merge of a pool shard's changed catalog into discovery's catalog."""
        self.catalog_merge_seconds.observe(seconds)

    def search(self, mode: str, outcome: str, seconds: float) -> None:
        self.searches.record(seconds, mode, outcome, exemplar=exemplar())

    def index_built(self, seconds: float) -> None:
        self.index_builds.record(seconds)

    def set_search_mode(self, mode: SearchRanking) -> None:
        self.search_mode_active.labels("bm25").set(1 if mode == "bm25" else 0)
        self.search_mode_active.labels("hybrid").set(1 if mode == "hybrid" else 0)


def active_search_mode(registry: CollectorRegistry) -> SearchRanking | None:
    """The ranking a discovery serving ``registry`` answers queries with now (its mode gauge)."""
    for mode in ("hybrid", "bm25"):
        if registry.get_sample_value("toolscout_discovery_search_mode_active", {"mode": mode}) == 1:
            return mode
    return None
