"""The README's reference tables say what the code does: the metrics each service registers."""

from __future__ import annotations

import re

from prometheus_client import CollectorRegistry

from discovery_svc.metrics import DiscoveryMetrics
from mcp_pool_svc.metrics import PoolMetrics
from orchestrator_svc.metrics import DEPRECATED_NAMES, OrchestratorMetrics
from tests.support.mcp_servers import REPO_ROOT

README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end]


def _documented_metrics() -> set[str]:
    names: set[str] = set()
    for row in _section("Metrics").splitlines():
        if not row.startswith("| `toolscout_"):
            continue
        cell = row.split("|")[1]
        found = re.findall(r"`([a-z_]+)`", cell)
        # "`toolscout_x_sent_total` / `_all_total`": the second is a suffix of the first's stem.
        first = found[0]
        names.add(first)
        for suffix in found[1:]:
            names.add(suffix if suffix.startswith("toolscout_") else first.rsplit("_", 2)[0] + suffix)
    return names


def _registered_metrics() -> set[str]:
    registry = CollectorRegistry()
    PoolMetrics(registry)
    DiscoveryMetrics(registry)
    OrchestratorMetrics(registry)
    deprecated = {*DEPRECATED_NAMES, "toolscout_search_mode_active"}
    names = set()
    for family in registry.collect():
        if family.name in deprecated:
            continue
        names.add(family.name + "_total" if family.type == "counter" else family.name)
    return names


def test_the_metrics_table_lists_exactly_the_metrics_the_services_register() -> None:
    assert _documented_metrics() == _registered_metrics()


def test_every_renamed_metric_is_named_in_the_readme_and_the_changelog() -> None:
    changelog = (REPO_ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    for old in [*DEPRECATED_NAMES, "toolscout_search_mode_active", "toolscout_pool_shard_count"]:
        assert old in changelog, old
    metrics = _section("Metrics")
    for old in ("toolscout_search_mode_active", "toolscout_pool_shard_count", "toolscout_llm_tokens_total"):
        assert old in metrics, old
