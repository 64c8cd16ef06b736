from __future__ import annotations

from prometheus_client import CollectorRegistry

from mcp_pool_svc.metrics import LISTING_REASONS, OUTCOMES, PoolMetrics

REGISTRY = CollectorRegistry()


def _value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_metrics_are_exported_under_their_documented_names() -> None:
    metrics = PoolMetrics(REGISTRY)
    server = "metrics-test-server"
    before = _value("toolscout_pool_tool_calls_total", server=server, outcome="timeout")
    metrics.tool_call(server, "timeout", 0.25)
    metrics.server_up(server, True)
    metrics.server_restarted(server)
    metrics.catalog_tools(server, 7)
    assert _value("toolscout_pool_tool_calls_total", server=server, outcome="timeout") == before + 1
    assert _value("toolscout_pool_tool_call_duration_seconds_count", server=server, outcome="timeout") >= 1
    assert _value("toolscout_pool_server_up", server=server) == 1
    assert _value("toolscout_pool_server_restarts_total", server=server) >= 1
    assert _value("toolscout_pool_catalog_tools", server=server) == 7
    metrics.server_up(server, False)
    assert _value("toolscout_pool_server_up", server=server) == 0


def test_the_outcomes_are_the_documented_set() -> None:
    assert OUTCOMES == ("ok", "tool_error", "timeout", "unavailable", "unknown", "cancelled", "error")


def test_listings_by_reason_and_write_lock_waits_are_exported_under_their_documented_names() -> None:
    registry = CollectorRegistry()
    metrics = PoolMetrics(registry)
    server = "listing-test-server"

    def _value(name: str, **labels: str) -> float:
        return registry.get_sample_value(name, labels) or 0.0

    for reason in LISTING_REASONS:
        metrics.tools_listed(server, reason)
    metrics.write_lock_waited(server, 0.5)
    metrics.write_lock_waited(server, 0.0)
    for reason in ("connect", "ttl", "notification", "after_call"):
        assert _value("toolscout_pool_tool_listings_total", server=server, reason=reason) == 1
    assert _value("toolscout_pool_write_lock_wait_seconds_count", server=server) == 2
    assert _value("toolscout_pool_write_lock_wait_seconds_sum", server=server) == 0.5
