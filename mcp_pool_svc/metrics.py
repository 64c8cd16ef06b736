"""Prometheus metrics of the pool. Names are an interface: dashboards and alerts use them.

:class:`PoolMetrics` registers its collectors in the registry it is given: ``server.py`` passes the
service's own registry (the one its metrics endpoint serves); tests pass a fresh one.
"""

from __future__ import annotations

from typing import Any, Literal

from prometheus_client import CollectorRegistry

from toolscout_kit.metrics import MetricSet, ResultTokens, TimedEvents
from toolscout_kit.tracing import exemplar

__all__ = ["LISTING_REASONS", "OUTCOMES", "ListingReason", "Outcome", "PoolMetrics"]

# "unknown": the call was sent and its server went away before answering (it may have run).
Outcome = Literal["ok", "tool_error", "timeout", "unavailable", "unknown", "cancelled", "error"]
OUTCOMES: tuple[Outcome, ...] = (
    "ok",
    "tool_error",
    "timeout",
    "unavailable",
    "unknown",
    "cancelled",
    "error",
)


# Why the pool listed a server's tools: its session started, the re-listing interval came, the
# server announced a change, or a call of a tool that is not read-only may have changed them.
ListingReason = Literal["connect", "ttl", "notification", "after_call"]
LISTING_REASONS: tuple[ListingReason, ...] = ("connect", "ttl", "notification", "after_call")
# Seconds a call waited for its server's write lock (serialize_writes).
_WAIT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class PoolMetrics:
    """The pool's metrics, registered in ``registry`` (a throwaway one when None)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        m = MetricSet("toolscout_pool_", registry)
        self._calls = TimedEvents(
            m,
            ("tool_calls", "Tool calls through the pool, by server and outcome."),
            (
                "tool_call_duration_seconds",
                "Wall time of tool calls through the pool, by server and outcome.",
            ),
            "server",
            "outcome",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
        )
        self._up = m.gauge("server_up", "1 while the server's session is ready, else 0.", "server")
        self._restarts = m.counter("server_restarts", "Restarts / reconnects of a server.", "server")
        self._catalog_tools = m.gauge("catalog_tools", "Tools of the server in the catalog.", "server")
        self._shard_index = m.gauge("shard_index", "This pool process's shard index (0-based).")
        # Not "..._shard_count": the _count suffix belongs to histograms and summaries.
        self._shard_count = m.gauge("shards", "The shard count this pool process places servers for.")
        self._listings = m.counter(
            "tool_listings", "tools/list requests the pool sent to a server, by reason.", "server", "reason"
        )
        self._write_lock_wait = m.histogram(
            "write_lock_wait_seconds",
            "Time calls to tools not annotated read-only waited for their server's write lock "
            "(serialize_writes), by server.",
            "server",
            buckets=_WAIT_BUCKETS,
        )
        self._write_lock_children: dict[str, Any] = {}
        self._result_tokens = ResultTokens(
            m,
            "Tokens of tool results shaped to a budget, by server and kind: returned (by the server), "
            "delivered (to the caller) and saved (the difference).",
        )
        self._result_handles = m.counter(
            "result_handles",
            "Results over their budget kept behind a handle (a preview delivered).",
            "server",
        )
        self._moved = m.counter(
            "reshard_servers",
            "Servers started here (in) or handed to another shard (out) by a change of the shard count.",
            "direction",
        )

    def result_tokens(self, server: str, returned: int, delivered: int, kept: bool) -> None:
        """One result shaped to a budget (``kept``: a preview and a handle replaced it)."""
        self._result_tokens.shaped(server, returned, delivered)
        if kept:
            self._result_handles.labels(server).inc()

    def tool_call(self, server: str, outcome: Outcome, seconds: float) -> None:
        """One finished tool call."""
        self._calls.record(seconds, server, outcome, exemplar=exemplar())

    def server_up(self, server: str, up: bool) -> None:
        """The server's session became ready (True) or was lost / stopped (False)."""
        self._up.labels(server).set(1 if up else 0)

    def server_restarted(self, server: str) -> None:
        """The supervisor starts the server again after a loss."""
        self._restarts.labels(server).inc()

    def shard(self, index: int, count: int) -> None:
        """This process is shard ``index`` of ``count``."""
        self._shard_index.set(index)
        self._shard_count.set(count)

    def servers_moved(self, moved_in: int, moved_out: int) -> None:
        """A reshard started ``moved_in`` servers here and handed ``moved_out`` to other shards."""
        self._moved.labels("in").inc(moved_in)
        self._moved.labels("out").inc(moved_out)

    def tools_listed(self, server: str, reason: ListingReason) -> None:
        """The pool sent ``tools/list`` to the server (one listing, however many pages)."""
        self._listings.labels(server, reason).inc()

    def write_lock_waited(self, server: str, seconds: float) -> None:
        """A call waited ``seconds`` for the server's write lock (0 when it was free)."""
        child = self._write_lock_children.get(server)
        if child is None:
            child = self._write_lock_children[server] = self._write_lock_wait.labels(server)
        child.observe(seconds, exemplar())

    def catalog_tools(self, server: str, count: int) -> None:
        """The number of the server's tools in the catalog."""
        self._catalog_tools.labels(server).set(count)
