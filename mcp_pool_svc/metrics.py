"""Prometheus metrics of the pool. Names are an interface: dashboards and alerts use them.

The collectors live in the default registry (served by the kit's metrics endpoint) and are
defined once here; the pool receives a :class:`PoolMetrics` so tests can pass their own sink.
"""

from __future__ import annotations

from typing import Literal

from prometheus_client import Counter, Gauge, Histogram

__all__ = ["OUTCOMES", "Outcome", "PoolMetrics", "PrometheusPoolMetrics"]

Outcome = Literal["ok", "tool_error", "timeout", "unavailable", "cancelled", "error"]
OUTCOMES: tuple[Outcome, ...] = ("ok", "tool_error", "timeout", "unavailable", "cancelled", "error")

_CALLS = Counter(
    "toolscout_pool_tool_calls",
    "Tool calls through the pool, by server and outcome.",
    ["server", "outcome"],
)
_CALL_SECONDS = Histogram(
    "toolscout_pool_tool_call_duration_seconds",
    "Wall time of tool calls through the pool, by server and outcome.",
    ["server", "outcome"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
_UP = Gauge("toolscout_pool_server_up", "1 while the server's session is ready, else 0.", ["server"])
_RESTARTS = Counter("toolscout_pool_server_restarts", "Restarts / reconnects of a server.", ["server"])
_CATALOG_TOOLS = Gauge("toolscout_pool_catalog_tools", "Tools of the server in the catalog.", ["server"])


class PoolMetrics:
    """The metrics sink the pool reports to. This base class records nothing."""

    def tool_call(self, server: str, outcome: Outcome, seconds: float) -> None:
        """One finished tool call."""

    def server_up(self, server: str, up: bool) -> None:
        """The server's session became ready (True) or was lost / stopped (False)."""

    def server_restarted(self, server: str) -> None:
        """The supervisor starts the server again after a loss."""

    def catalog_tools(self, server: str, count: int) -> None:
        """The number of the server's tools in the catalog."""


class PrometheusPoolMetrics(PoolMetrics):
    """Records into the module-level Prometheus collectors."""

    def tool_call(self, server: str, outcome: Outcome, seconds: float) -> None:
        _CALLS.labels(server, outcome).inc()
        _CALL_SECONDS.labels(server, outcome).observe(seconds)

    def server_up(self, server: str, up: bool) -> None:
        _UP.labels(server).set(1 if up else 0)

    def server_restarted(self, server: str) -> None:
        _RESTARTS.labels(server).inc()

    def catalog_tools(self, server: str, count: int) -> None:
        _CATALOG_TOOLS.labels(server).set(count)
