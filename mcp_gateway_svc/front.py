"""The HTTP front of the gateway: every request passes here before the MCP SDK sees it.

In order: health and peer paths; the ``Host`` header (DNS-rebinding protection: 421), the
``Origin`` header (403); the bearer token when tokens are configured (401 with
``WWW-Authenticate``); the endpoint (``/mcp`` or ``/mcp/<toolset>``: 404 for an unknown toolset,
403 for one the token may not use — the same answer, so a tenant cannot probe other tenants'
toolsets); then the session (a request for another replica's session is forwarded there, one for
a session opened at another endpoint or by another token is answered 404); then the SDK's
streamable-HTTP transport of the endpoint's mode, which refuses bodies over the cap (413) before
parsing and answers malformed JSON-RPC with the specification's error codes. Nothing here reads
the body except to forward it.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import RequestBodyLimitMiddleware
from starlette.datastructures import Headers
from starlette.types import Message, Receive, Scope, Send

from mcp_gateway_svc.endpoints import Endpoints
from mcp_gateway_svc.handlers import REQUEST_INFO_KEY, RequestInfo
from mcp_gateway_svc.metrics import GatewayMetrics
from mcp_gateway_svc.peers import FORWARDED_HEADER, REPLICA_PATH, Forwarder, Replica
from mcp_gateway_svc.sessions import SessionRegistry
from toolscout_kit.errors import ConfigError

__all__ = ["STREAMING_META", "GatewayFront", "Guard", "Tenant", "Tenants"]

_INVALID_REQUEST = -32600
_LOCAL_HOSTS = ("localhost", "127.0.0.1", "[::1]", "::1")
_SESSION_HEADER = MCP_SESSION_ID_HEADER.encode()
# The key of the managers' map for meta mode answering on an SSE stream (a call asking for progress).
STREAMING_META = "meta+stream"


@dataclass(frozen=True, slots=True)
class Tenant:
    """Who a token is: its variable's name, and the toolsets it may use (``*``: all, /mcp included)."""

    principal: str
    toolsets: frozenset[str]

    def may_use(self, toolset: str) -> bool:
        return "*" in self.toolsets or (bool(toolset) and toolset in self.toolsets)


class Tenants:
    """The configured bearer tokens (``toolscout.gateway.tokens``: variable name → toolsets)."""

    def __init__(self, tokens: Mapping[str, Sequence[str]], env: Mapping[str, str] | None = None) -> None:
        """Raises:
        ConfigError: a named variable is not set (the gateway must not start open by mistake).
        """
        env = os.environ if env is None else env
        self._tokens: list[tuple[bytes, Tenant]] = []
        for name, toolsets in tokens.items():
            value = env.get(name, "")
            if not value:
                raise ConfigError(
                    f"toolscout.gateway.tokens.{name}: the environment variable {name} is not set "
                    "(it holds a bearer token clients send to the gateway)"
                )
            self._tokens.append((value.encode(), Tenant(name, frozenset(toolsets))))

    @property
    def enabled(self) -> bool:
        return bool(self._tokens)

    def authenticate(self, authorization: str | None) -> Tenant | None:
        """The tenant of an ``Authorization: Bearer`` header, or None (missing or wrong token)."""
        if not authorization or not authorization.lower().startswith("bearer "):
            return None
        given = authorization[7:].strip().encode()
        found = None
        for token, tenant in self._tokens:
            # Compare with every token in constant time, whichever matches.
            if hmac.compare_digest(given, token):
                found = tenant
        return found


def _allowed(value: str, patterns: Sequence[str]) -> bool:
    for pattern in patterns:
        if value == pattern or (pattern.endswith(":*") and value.startswith(pattern[:-1])):
            return True
    return False


@dataclass(frozen=True, slots=True)
class Guard:
    """Host and Origin checks (DNS-rebinding protection, per the MCP security best practices)."""

    allowed_origins: tuple[str, ...]
    # None: any host (a non-loopback listener behind a Service).
    allowed_hosts: tuple[str, ...] | None

    @classmethod
    def from_settings(cls, listen: str, origins: Sequence[str], hosts: Sequence[str] | None) -> Guard:
        if hosts is None:
            host = listen.rsplit(":", 1)[0].strip("[]")
            local = host in _LOCAL_HOSTS or host.startswith("127.")
            hosts = (
                [f"{h}:*" for h in ("localhost", "127.0.0.1", "[::1]")] + list(_LOCAL_HOSTS)
                if local
                else None
            )
        return cls(tuple(origins), tuple(hosts) if hosts is not None else None)

    def host_ok(self, host: str | None) -> bool:
        return self.allowed_hosts is None or (host is not None and _allowed(host, self.allowed_hosts))

    def origin_ok(self, origin: str | None) -> bool:
        # Clients that are not browsers send no Origin; a browser page always does.
        return origin is None or _allowed(origin, self.allowed_origins)


async def _reply(
    send: Send, status: int, message: str, *, headers: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": _INVALID_REQUEST, "message": message}})
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), *headers],
        }
    )
    await send({"type": "http.response.body", "body": body.encode()})


async def _plain(send: Send, status: int, body: dict[str, Any]) -> None:
    await send(
        {"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]}
    )
    await send({"type": "http.response.body", "body": json.dumps(body).encode()})


class GatewayFront:
    """The gateway's ASGI application."""

    def __init__(
        self,
        *,
        endpoints: Endpoints,
        managers: Mapping[str, StreamableHTTPSessionManager],
        sessions: SessionRegistry,
        tenants: Tenants,
        guard: Guard,
        replica: Replica,
        forwarder: Forwarder | None,
        metrics: GatewayMetrics,
        max_body_bytes: int,
        ready: Callable[[], bool],
    ) -> None:
        self._endpoints = endpoints
        self._managers = managers
        self._sessions = sessions
        self._tenants = tenants
        self._guard = guard
        self._replica = replica
        self._forwarder = forwarder
        self._metrics = metrics
        self._ready = ready
        self._max_body = max_body_bytes
        # Requests being answered (not counting GET streams): shutdown lets them finish.
        self.inflight = 0
        self.idle = asyncio.Event()
        self.idle.set()

    async def _reject(self, send: Send, status: int, reason: str, message: str, **kw: Any) -> None:
        self._metrics.rejections.labels(reason).inc()
        await _reply(send, status, message, **kw)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or await self._own_path(scope["path"], send):
            return
        info = await self._admit(scope, send)
        if info is not None:
            await self._mcp(scope, receive, send, info, Headers(scope=scope))

    async def _own_path(self, path: str, send: Send) -> bool:
        """Answers the probes and the peer lookup; False for anything else."""
        if path == "/healthz":
            await _plain(send, 200, {"status": "serving"})
        elif path == "/readyz":
            ok = self._ready()
            await _plain(send, 200 if ok else 503, {"status": "ready" if ok else "not ready"})
        elif path == REPLICA_PATH:
            await _plain(send, 200, {"replica": self._replica.id})
        elif _endpoint_key(path) is None:
            await _reply(send, 404, "not found: the MCP endpoints are /mcp and /mcp/<toolset>")
        else:
            return False
        return True

    async def _admit(self, scope: Scope, send: Send) -> RequestInfo | None:
        """The request's endpoint and tenant, or None once it has been refused."""
        path: str = scope["path"]
        key = _endpoint_key(path) or ""
        headers = Headers(scope=scope)
        problem = None
        if not self._guard.host_ok(headers.get("host")):
            problem = (421, "bad_host", "Invalid Host header")
        elif not self._guard.origin_ok(headers.get("origin")):
            problem = (403, "bad_origin", "Invalid Origin header")
        if problem is not None:
            await self._reject(send, *problem)
            return None
        tenant: Tenant | None = None
        if self._tenants.enabled:
            tenant = self._tenants.authenticate(headers.get("authorization"))
            if tenant is None:
                given = headers.get("authorization") is not None
                challenge = 'Bearer realm="toolscout"' + (', error="invalid_token"' if given else "")
                await self._reject(
                    send,
                    401,
                    "unauthorized",
                    "unauthorized: send Authorization: Bearer <token>",
                    headers=[(b"www-authenticate", challenge.encode())],
                )
                return None
        toolset = self._endpoints.toolset_of(key)
        if tenant is not None and (toolset is None or not tenant.may_use(toolset)):
            await self._reject(send, 403, "forbidden_toolset", f"this token may not use {path}")
            return None
        endpoint = self._endpoints.get(key) if toolset is not None else None
        if endpoint is None:
            await self._reject(send, 404, "unknown_toolset", f"unknown toolset '{key}'")
            return None
        return RequestInfo(endpoint, tenant.principal if tenant is not None else "")

    async def _mcp(
        self, scope: Scope, receive: Receive, send: Send, info: RequestInfo, headers: Headers
    ) -> None:
        manager = self._managers[info.endpoint.mode]
        sid = headers.get(MCP_SESSION_ID_HEADER)
        stateful = not manager.stateless
        if stateful and sid is not None:
            replica_id, raw = Replica.split(sid)
            if replica_id != self._replica.id:
                await self._forward(replica_id, scope, receive, send, headers)
                return
            session = self._sessions.get(raw)
            if (
                session is None
                or session.endpoint != info.endpoint.key
                or session.principal != info.principal
            ):
                await self._reject(send, 404, "unknown_session", "Session not found")
                return
            scope = _with_session_header(scope, raw)
            info = RequestInfo(info.endpoint, info.principal, session)
            with self._sessions.serving(session):
                await self._serve(manager, scope, receive, send, info)
            if scope["method"] == "DELETE":
                self._sessions.close(raw)
            return
        streaming = self._managers.get(STREAMING_META)
        if manager.stateless and streaming is not None and scope["method"] == "POST":
            receive, asks = await _peek_for_progress(receive, self._max_body)
            if asks:
                manager = streaming
        await self._serve(manager, scope, receive, send, info)

    async def _serve(
        self,
        manager: StreamableHTTPSessionManager,
        scope: Scope,
        receive: Receive,
        send: Send,
        info: RequestInfo,
    ) -> None:
        scope = {**scope, REQUEST_INFO_KEY: info}
        counted = scope["method"] != "GET"
        if counted:
            self.inflight += 1
            self.idle.clear()
        try:
            if manager.stateless and scope["method"] == "POST":
                await _cancelled_on_disconnect(manager, scope, receive, self._sending(send, info))
            else:
                await manager.handle_request(scope, receive, self._sending(send, info))
        finally:
            if counted:
                self.inflight -= 1
                if not self.inflight:
                    self.idle.set()

    def _sending(self, send: Send, info: RequestInfo) -> Send:
        """``send`` with the transport's session id replaced by this replica's form of it, and the
        session recorded (new) or forgotten (the transport answered 404 for it)."""

        async def wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                out = []
                for name, value in message.get("headers", []):
                    if name.lower() != _SESSION_HEADER:
                        out.append((name, value))
                        continue
                    raw = value.decode("latin-1")
                    if info.session is None:
                        self._sessions.open(
                            raw, endpoint=info.endpoint.key, mode=info.endpoint.mode, principal=info.principal
                        )
                    out.append((name, self._replica.session_id(raw).encode("latin-1")))
                if message["status"] == 404 and info.session is not None:
                    self._sessions.close(info.session.sid)
                message = {**message, "headers": out}
            await send(message)

        return wrapped

    async def _forward(
        self, replica_id: str, scope: Scope, receive: Receive, send: Send, headers: Headers
    ) -> None:
        address = None
        if self._forwarder is not None and headers.get(FORWARDED_HEADER) is None:
            address = await self._forwarder.address_of(replica_id)
        if address is None or self._forwarder is None:
            await self._reject(send, 404, "unknown_session", "Session not found")
            return
        forwarder = self._forwarder

        async def forward(scope: Scope, receive: Receive, send: Send) -> None:
            if await forwarder.forward(address, scope, receive, send):
                self._metrics.forwarded.labels("ok").inc()
                return
            self._metrics.forwarded.labels("unreachable").inc()
            await self._reject(send, 404, "unknown_session", "Session not found")

        await RequestBodyLimitMiddleware(forward, self._max_body)(scope, receive, send)


async def _peek_for_progress(receive: Receive, limit: int) -> tuple[Receive, bool]:
    """Reads a request's body (up to ``limit`` bytes) to tell whether it asks for progress (a
    ``progressToken``: a byte search, no parsing), and a ``receive`` that replays what was read.

    A stateless endpoint answers with one JSON body, where progress notifications have nowhere to
    go: such a request is answered on an SSE stream instead (a false match costs only that).
    """
    read: list[Message] = []
    size = 0
    more = True
    while more and size <= limit:
        message = await receive()
        read.append(message)
        if message["type"] != "http.request":
            break
        size += len(message.get("body", b""))
        more = bool(message.get("more_body", False))
    asks = not more and b'"progressToken"' in b"".join(m.get("body", b"") for m in read)
    pending = list(read)

    async def replay() -> Message:
        return pending.pop(0) if pending else await receive()

    return replay, asks


async def _cancelled_on_disconnect(
    manager: StreamableHTTPSessionManager, scope: Scope, receive: Receive, send: Send
) -> None:
    """A stateless request, cancelled when its client goes away before the answer.

    A 2026-07-28 client cancels a request by closing its response stream; the SDK's stateless JSON
    responses do not watch for that, so the call would run to its end. Once the body is read the
    SDK does not read again, and the disconnect is watched for here.
    """
    body_read = anyio.Event()

    async def receiving() -> Message:
        message = await receive()
        if message["type"] != "http.request" or not message.get("more_body", False):
            body_read.set()
        return message

    async with anyio.create_task_group() as tg:

        async def watch() -> None:
            await body_read.wait()
            while (await receive())["type"] != "http.disconnect":
                pass
            tg.cancel_scope.cancel()

        tg.start_soon(watch)
        await manager.handle_request(scope, receiving, send)
        tg.cancel_scope.cancel()


def _endpoint_key(path: str) -> str | None:
    if path in ("/mcp", "/mcp/"):
        return ""
    if path.startswith("/mcp/"):
        key = path[5:].rstrip("/")
        if key and "/" not in key:
            return key
    return None


def _with_session_header(scope: Scope, raw: str) -> Scope:
    headers = [(k, v) for k, v in scope["headers"] if k.lower() != _SESSION_HEADER]
    headers.append((_SESSION_HEADER, raw.encode("latin-1")))
    return {**scope, "headers": headers}
