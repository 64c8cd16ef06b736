"""Discovery's Prometheus metrics (names are a contract: dashboards and alerts use them).

:class:`DiscoveryMetrics` registers in the registry it is given (the service's own, served by its
metrics endpoint; tests pass a fresh one). Toolset labels are configured names (bounded); the
empty toolset (every tool) is labelled ``_all``. Definition-token figures are the orchestrator's:
it knows how many LLM calls actually happened.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

__all__ = ["DiscoveryMetrics", "toolset_label"]


def toolset_label(toolset: str) -> str:
    return toolset or "_all"


class DiscoveryMetrics:
    """Search latency and outcomes, tools discovered, prepared-state builds."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = registry if registry is not None else CollectorRegistry()
        self.search_seconds = Histogram(
            "toolscout_discovery_search_duration_seconds",
            "Time to answer one search_tools call, by mode.",
            ["mode"],
            buckets=(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
            registry=r,
        )
        self.searches = Counter(
            "toolscout_discovery_searches",
            "search_tools calls by mode and outcome (found, empty, error).",
            ["mode", "outcome"],
            registry=r,
        )
        self.tools_discovered = Counter(
            "toolscout_discovery_tools_discovered",
            "Tools newly loaded by search_tools calls.",
            registry=r,
        )
        self.index_builds = Counter(
            "toolscout_discovery_index_builds",
            "Prepared toolset states (partition, BM25 index, manifest) built.",
            registry=r,
        )
        self.index_build_seconds = Histogram(
            "toolscout_discovery_index_build_duration_seconds",
            "Time to build one prepared toolset state (partition, BM25 index, manifest).",
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
            registry=r,
        )

    def search(self, mode: str, outcome: str, seconds: float) -> None:
        self.searches.labels(mode, outcome).inc()
        self.search_seconds.labels(mode).observe(seconds)

    def index_built(self, seconds: float) -> None:
        self.index_builds.inc()
        self.index_build_seconds.observe(seconds)
