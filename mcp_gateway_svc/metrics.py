"""The gateway's Prometheus metrics (``toolscout_gateway_*``; names are a contract: the dashboard and
the alert rules use them).

:class:`GatewayMetrics` registers in the registry it is given (the service's own, served on its
metrics port). Labels are bounded: MCP methods of the specification (anything else is ``other``),
the three modes, fixed outcome words. No label carries a query, an argument or a tool result.
"""

from __future__ import annotations

from collections.abc import Awaitable
from enum import StrEnum
from typing import TypeVar

from prometheus_client import CollectorRegistry, Counter, Histogram
from toolscout.client import GatewayMode

from toolscout_kit.metrics import MetricSet, TimedEvents
from toolscout_kit.tracing import exemplar

T = TypeVar("T")

__all__ = [
    "CALL_OUTCOMES",
    "KNOWN_METHODS",
    "MODES",
    "GatewayMetrics",
    "IntrospectionMetrics",
    "IntrospectionOutcome",
]

MODES = tuple(GatewayMode)
# MCP methods a client may send; any other method is counted as "other" (labels stay bounded).
KNOWN_METHODS = frozenset(
    {
        "initialize",
        "ping",
        "server/discover",
        "tools/list",
        "tools/call",
        "subscriptions/listen",
        "notifications/initialized",
        "notifications/cancelled",
    }
)
# Outcomes of a tool call through the gateway (call_tool in meta mode, a tool by name otherwise).
CALL_OUTCOMES = (
    "ok",
    "tool_error",
    "invalid_arguments",
    "unknown_tool",
    "unavailable",
    "unknown",
    "timeout",
    "cancelled",
    "error",
    # A per_user server and a caller without their own token: pointed at the login route, not sent.
    "authorization_required",
)


class IntrospectionOutcome(StrEnum):
    """What one token introspection (RFC 7662) came to."""

    # The provider knows the token as active for this gateway (issuer, audience, subject, expiry).
    ACTIVE = "active"
    # Inactive, or active for another issuer or audience, without a subject, or expired.
    INACTIVE = "inactive"
    # The provider could not be asked or gave no RFC 7662 answer (its refusal of our client too).
    ERROR = "error"


_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class GatewayMetrics:
    """Requests by MCP method, mode and outcome; search latency; tool calls; open sessions."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        m = MetricSet("toolscout_gateway_", registry)
        self.requests = m.counter(
            "requests",
            "MCP requests answered, by method, the endpoint's mode and outcome (ok, error: a "
            "JSON-RPC error answer).",
            "method",
            "mode",
            "outcome",
        )
        self.rejections = m.counter(
            "http_rejections",
            "HTTP requests refused before MCP, by reason (unauthorized, insufficient_scope, "
            "forbidden_toolset, unknown_toolset, bad_origin, bad_host, too_large, body_timeout, "
            "bad_protocol_version, bad_json, bad_jsonrpc, unknown_session, too_many_sessions).",
            "reason",
        )
        self.search_seconds = m.histogram(
            "search_duration_seconds",
            "Time to answer one search_tools call in the gateway (discovery's search included).",
            "mode",
            buckets=(0.0001, 0.00025, *_LATENCY_BUCKETS),
        )
        self.tool_calls = TimedEvents(
            m,
            (
                "tool_calls",
                "Tool calls through the gateway, by mode and outcome (ok, tool_error, "
                "invalid_arguments, unknown_tool, not_loaded = progressive, found by no search, "
                "unavailable, unknown = may or may not have run, timeout, cancelled, error, "
                "authorization_required = not sent: the caller must sign in, "
                "input_required = the server asked the host for input: one round).",
            ),
            ("tool_call_duration_seconds", "Time of one tool call through the gateway, by outcome."),
            "mode",
            "outcome",
            timed_by=("outcome",),
            buckets=_LATENCY_BUCKETS,
        )
        self.open_sessions = m.gauge(
            "open_sessions",
            "MCP sessions open on this replica (handshake revisions on progressive and all endpoints).",
            "mode",
        )
        self.session_evictions = m.counter(
            "session_evictions",
            "Idle sessions ended to make room for a new one, by reason (tenant_quota: the tenant was "
            "at gateway.max_sessions_per_tenant; max_sessions: the replica was at gateway.max_sessions).",
            "reason",
        )
        self.list_changed = m.counter(
            "list_changed_notifications",
            "notifications/tools/list_changed sent, by reason (catalog: a new catalog version "
            "changed the list; search: a progressive search loaded tools).",
            "reason",
        )
        self.forwarded = m.counter(
            "forwarded_requests",
            "Requests for a session held by another replica, forwarded there, by outcome (ok, unreachable).",
            "outcome",
        )
        self.introspections = IntrospectionMetrics(m)
        # The label children of the per-request metrics, by their label values (bounded: known
        # methods, modes, outcomes): a labels() lookup was a measurable part of a call.
        self._request_children: dict[tuple[str, GatewayMode, str], Counter] = {}
        self._call_children: dict[tuple[GatewayMode, str], tuple[Counter, Histogram]] = {}
        for mode in MODES:
            self.open_sessions.labels(mode).set(0)

    def request(self, method: str, mode: GatewayMode, outcome: str) -> None:
        key = (method if method in KNOWN_METHODS else "other", mode, outcome)
        child = self._request_children.get(key)
        if child is None:
            child = self._request_children[key] = self.requests.labels(*key)
        child.inc()

    async def counted(self, method: str, mode: GatewayMode, run: Awaitable[T]) -> T:
        """``run``'s result, the request counted by its outcome (ok, error, cancelled)."""
        outcome = "cancelled"
        try:
            result = await run
            outcome = "ok"
            return result
        except Exception:
            outcome = "error"
            raise
        finally:
            self.request(method, mode, outcome)

    def tool_call(self, mode: GatewayMode, outcome: str, seconds: float) -> None:
        """One tool call, as ``tool_calls.record`` counts it (its children looked up once)."""
        children = self._call_children.get((mode, outcome))
        if children is None:
            children = self._call_children[mode, outcome] = (
                self.tool_calls.counter.labels(mode, outcome),
                self.tool_calls.histogram.labels(outcome),
            )
        children[0].inc()
        children[1].observe(seconds, exemplar())


class IntrospectionMetrics:
    """Token introspection (RFC 7662) at the identity provider: requests by outcome and their
    latency, and tokens answered from a kept answer (``gateway.oauth.introspection_endpoint``)."""

    def __init__(self, m: MetricSet) -> None:
        self.requests = TimedEvents(
            m,
            (
                "introspections",
                "Token introspection requests to the identity provider (gateway.oauth."
                "introspection_endpoint), by outcome (active, inactive = inactive or not for this "
                "gateway, error = not asked or no RFC 7662 answer).",
            ),
            ("introspection_duration_seconds", "Time of one token introspection request, by outcome."),
            "outcome",
            buckets=_LATENCY_BUCKETS,
        )
        self.cache_hits = m.counter(
            "introspection_cache_hits",
            "Bearer tokens answered from the kept introspection answer without asking the identity "
            "provider, by the kept outcome (active, inactive).",
            "outcome",
        )
        # Every outcome exported from the start (0 until it happens), as Prometheus advises for
        # known label values: the error ratio and its alert evaluate on every gateway.
        for outcome in IntrospectionOutcome:
            self.requests.counter.labels(outcome)

    def asked(self, outcome: IntrospectionOutcome, seconds: float) -> None:
        """One request to the introspection endpoint that took ``seconds``."""
        self.requests.record(seconds, outcome)

    def kept(self, outcome: IntrospectionOutcome) -> None:
        """One token answered from the kept introspection answer."""
        self.cache_hits.labels(outcome).inc()
