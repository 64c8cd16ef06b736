"""Discovery's Prometheus metrics (names are a contract: dashboards and alerts use them).

They register in the default registry, which the kit's metrics endpoint serves. Toolset labels are
configured names (bounded); the empty toolset (every tool) is labelled ``_all``.
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

__all__ = [
    "DEFINITION_TOKENS_DEFERRED",
    "DEFINITION_TOKENS_SENT",
    "INDEX_BUILDS",
    "INDEX_BUILD_SECONDS",
    "SEARCHES",
    "SEARCH_SECONDS",
    "TOOLS_DISCOVERED",
    "toolset_label",
]

SEARCH_SECONDS = Histogram(
    "toolscout_discovery_search_duration_seconds",
    "Time to answer one search_tools call, by mode.",
    ["mode"],
    buckets=(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
)
SEARCHES = Counter(
    "toolscout_discovery_searches",
    "search_tools calls by mode and outcome (found, empty, error).",
    ["mode", "outcome"],
)
TOOLS_DISCOVERED = Counter(
    "toolscout_discovery_tools_discovered",
    "Tools newly loaded by search_tools calls.",
)
DEFINITION_TOKENS_SENT = Counter(
    "toolscout_discovery_definition_tokens_sent",
    "Tokens of tool definitions, search_tools and manifest planned to be sent to the LLM.",
    ["toolset"],
)
DEFINITION_TOKENS_DEFERRED = Counter(
    "toolscout_discovery_definition_tokens_deferred",
    "Tokens of tool definitions held back by deferral (all definitions minus what is sent).",
    ["toolset"],
)
INDEX_BUILDS = Counter(
    "toolscout_discovery_index_builds",
    "Prepared toolset states (partition, BM25 index, manifest) built.",
)
INDEX_BUILD_SECONDS = Histogram(
    "toolscout_discovery_index_build_duration_seconds",
    "Time to build one prepared toolset state (partition, BM25 index, manifest).",
    buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)


def toolset_label(toolset: str) -> str:
    return toolset or "_all"
