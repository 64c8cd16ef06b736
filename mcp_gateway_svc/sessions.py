"""MCP sessions of the handshake revisions on this replica: what each one loaded, and its channel
for ``notifications/tools/list_changed``.

A session (``Mcp-Session-Id``) is opened by the SDK's streamable-HTTP transport; the HTTP front
records it here when the transport hands out its id, binds it to the endpoint and the token that
opened it (a session is never usable from another toolset or by another tenant), counts its
requests in flight and forgets it when the client deletes it, when the transport no longer knows
it, or after ``session_idle_timeout`` without a request (the transport's own idle rule), or when
it is evicted: a tenant at ``max_sessions_per_tenant`` (or the replica at ``max_sessions``) that
opens one more ends its least recently used idle session instead of being refused, so clients that
went away without a DELETE cannot lock anyone out (the evicted session's next request gets 404,
and its client opens a new one). Progressive
mode keeps the session's loaded tools here; every mode keeps the session's server-to-client channel
so that a catalog change can be announced on its standalone stream.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from toolscout.client import GatewayMode

from mcp_gateway_svc.metrics import GatewayMetrics

__all__ = ["Session", "SessionRegistry", "end_session"]

# A session is forgotten this long after the transport's idle timeout (which ends it there first).
_REAP_MARGIN = 5.0


@dataclass
class Session:
    sid: str
    endpoint: str
    mode: GatewayMode
    principal: str
    # Progressive mode: LLM names loaded by this session's searches, in order.
    loaded: list[str] = field(default_factory=list)
    # The SDK's per-request session proxy of a recent request: its standalone channel reaches the
    # client's GET stream (if it opened one).
    outbound: Any = None
    # Hash of the tool list the session was last given (a change is announced with list_changed);
    # of a caller's own list (per_user servers), without those servers' tools (what the catalog
    # changes: tool_lists.shared_signature).
    listed: int | None = None
    # The per_user servers whose tools ``listed`` leaves out (empty: the list is the plan's).
    per_user: frozenset[str] = frozenset()
    inflight: int = 0
    last_seen: float = field(default_factory=time.monotonic)
    # The logging level the client set (logging/setLevel), or "" (none set).
    log_level: str = ""
    # Resource subscriptions (URI -> the task relaying its updates), ended with the session.
    subscriptions: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    # Calls on the lean path (mcp_gateway_svc.lean) by JSON-RPC id: what notifications/cancelled
    # cancels (the SDK's session never saw them).
    lean_calls: dict[str | int, asyncio.Task[Any]] = field(default_factory=dict)

    def cancel_lean(self, request_id: object) -> None:
        """Cancels the lean call ``request_id`` names (``notifications/cancelled``), if one runs."""
        if isinstance(request_id, str | int):
            task = self.lean_calls.get(request_id)
            if task is not None:
                task.cancel()


class SessionRegistry:
    """Sessions by the transport's session id."""

    def __init__(self, metrics: GatewayMetrics, idle_timeout: float) -> None:
        self._sessions: dict[str, Session] = {}
        self._metrics = metrics
        self._idle_timeout = idle_timeout

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, sid: str) -> Session | None:
        return self._sessions.get(sid)

    def open(self, sid: str, *, endpoint: str, mode: GatewayMode, principal: str) -> Session:
        session = self._sessions.get(sid)
        if session is None:
            session = self._sessions[sid] = Session(sid, endpoint, mode, principal)
            self._metrics.open_sessions.labels(mode).inc()
        return session

    def close(self, sid: str) -> None:
        session = self._sessions.pop(sid, None)
        if session is not None:
            self._metrics.open_sessions.labels(session.mode).dec()
            for task in session.subscriptions.values():
                task.cancel()
            session.subscriptions.clear()

    def all(self) -> list[Session]:
        return list(self._sessions.values())

    def of_principal(self, principal: str) -> list[Session]:
        return [s for s in self._sessions.values() if s.principal == principal]

    def of_endpoint(self, endpoint: str) -> list[Session]:
        return [s for s in self._sessions.values() if s.endpoint == endpoint]

    @contextmanager
    def serving(self, session: Session) -> Iterator[None]:
        """Counts one request of ``session`` in flight (a GET stream for as long as it is open)."""
        session.inflight += 1
        session.last_seen = time.monotonic()
        try:
            yield
        finally:
            session.inflight -= 1
            session.last_seen = time.monotonic()

    def reap(self, now: float | None = None) -> int:
        """Forgets sessions idle past the transport's timeout; returns how many."""
        now = time.monotonic() if now is None else now
        limit = self._idle_timeout + _REAP_MARGIN
        idle = [s.sid for s in self._sessions.values() if not s.inflight and now - s.last_seen > limit]
        for sid in idle:
            self.close(sid)
        return len(idle)


async def end_session(manager: StreamableHTTPSessionManager, sid: str) -> None:
    """Ends session ``sid`` in the SDK's manager as its idle timeout would: forgotten at once (its
    id answers 404), its transport terminated (its server task and streams end).

    The manager has no public way to end one session (only its own idle timeout, a client's
    DELETE and its ``max_sessions`` refusal, which refuses new sessions rather than ending old
    ones), so this calls the method those paths share.
    """
    transport = manager._server_instances.get(sid)
    if transport is not None:
        await manager._discard_session(sid, transport)
