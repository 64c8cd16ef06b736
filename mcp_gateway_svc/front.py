"""The HTTP front of the gateway: every request passes here before the MCP SDK sees it.

In order: health and peer paths; the ``Host`` header (DNS-rebinding protection: 421), the
``Origin`` header (403); the bearer token when tokens are configured (401 with
``WWW-Authenticate``); the endpoint (``/mcp`` or ``/mcp/<toolset>``: 404 for an unknown toolset,
403 for one the token may not use — the same answer, so a tenant cannot probe other tenants'
toolsets); the ``MCP-Protocol-Version`` header and the POST body (read once, within ``max_body_bytes`` and
``request_read_timeout``, then held to the bounded JSON rules and the JSON-RPC envelope: see
:mod:`mcp_gateway_svc.bodies`); then the session (a request for another replica's session is
forwarded there, one for a session opened at another endpoint or by another token is answered
404); then the SDK's streamable-HTTP transport of the session's mode (a session-less request: the
mode its client's name picks, :mod:`mcp_gateway_svc.host_modes`, else the endpoint's), which checks
each method's parameters.

Why one ASGI callable and not a Starlette app of routes and middleware, as the SDK's
``Server.streamable_http_app`` composes one. What Starlette would take over here is the path
dispatch only: three fixed paths (the probes, the replica lookup), the OAuth metadata paths, two
page prefixes (console, login) and ``/mcp[/<toolset>]`` — a few comparisons in ``__call__``,
``_page_app`` and ``_own_path``. Everything after it is per-request policy Starlette has no piece
for, or whose pieces answer differently:

- the Host/Origin rules (:class:`Guard`, which says why not the SDK's ``TransportSecuritySettings``
  or Starlette's ``TrustedHostMiddleware``) apply to the pages and to ``/mcp`` but not to the
  probes, which a kubelet calls with the pod's IP as Host;
- the SDK's bearer middleware (``AuthenticationMiddleware`` + ``BearerAuthBackend`` +
  ``RequireAuthMiddleware``) verifies one kind of token and answers 401/403 bodies of its own; here
  a static token or an OAuth JWT (:mod:`mcp_gateway_svc.resource_server`) names a tenant bound to
  toolsets, each refusal is a JSON-RPC error body and is counted by reason, and a tenant gets the
  same answer for a toolset it may not use as for one that does not exist;
- the transport a request reaches (five SDK session managers) is picked from the session header,
  the endpoint's mode, the client's name in the body of ``initialize`` and whether the call asks for
  progress: the body is read once, bounded, checked and replayed (:mod:`mcp_gateway_svc.bodies`),
  which no route or middleware does;
- a session of another replica is forwarded before any of this (:mod:`mcp_gateway_svc.peers`).

Starlette's routing defaults also answer differently from what clients get now (each would need
overriding): a function endpoint refuses methods other than GET/HEAD with 405, the router
redirects ``/mcp/`` to ``/mcp`` (307), and its 404 is plain text where an MCP client is told the
endpoints in a JSON-RPC error. The SDK's pieces that do the job
are used: its streamable-HTTP session managers (the whole MCP transport), its request body limit
(``RequestBodyLimitMiddleware``, for forwarded requests), its header names; Starlette's ``Headers``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
import json
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import urlsplit

import anyio
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import RequestBodyLimitMiddleware
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from toolscout.client import CallToolResult

from mcp_gateway_svc.bodies import (
    ClientGoneError,
    Refusal,
    check_message,
    check_protocol_version,
    read_body,
    replaying,
)
from mcp_gateway_svc.console import is_console_path, is_event_stream
from mcp_gateway_svc.endpoints import Endpoints
from mcp_gateway_svc.handlers import REQUEST_INFO_KEY, McpHandlers, RequestInfo
from mcp_gateway_svc.host_modes import Opening, matched_mode, opening_of
from mcp_gateway_svc.lean import (
    answer_session,
    holding,
    live_transport,
    read_modern,
    read_session,
    write_json,
)
from mcp_gateway_svc.lean_rules import pool_result_wire
from mcp_gateway_svc.metrics import GatewayMetrics
from mcp_gateway_svc.peers import FORWARDED_HEADER, REPLICA_PATH, Forwarder, Replica
from mcp_gateway_svc.sessions import SessionRegistry, end_session
from mcp_gateway_svc.user_login import base_url, is_login_path
from toolscout_kit.config import GatewayMode
from toolscout_kit.errors import ConfigError
from toolscout_kit.inflight import InFlight
from toolscout_kit.logging import get_logger

if TYPE_CHECKING:
    from mcp_gateway_svc.resource_server import OAuthResourceServer

__all__ = ["STREAMING_META", "GatewayFront", "Guard", "Tenant", "Tenants"]

_log = get_logger(__name__)

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


# (scheme or "", host in lower case, port: a number, "*" for any, or None for none given)
_Address = tuple[str, str, int | str | None]


def _address(value: str, *, origin: bool) -> _Address | None:
    """``scheme://host[:port]`` (an Origin) or ``host[:port]`` (a Host) split exactly, or None when
    it is not one (a path, user info, a port that is not a number, ...). ``:*`` is kept as a port
    of "*" (patterns only)."""
    wildcard = value.endswith(":*")
    text = value[:-2] if wildcard else value
    try:
        parts = urlsplit(text if origin else f"//{text}")
        port: int | str | None = "*" if wildcard else parts.port
    except ValueError:
        return None
    plain = not (parts.path or parts.query or parts.fragment or parts.username or parts.password)
    if (
        not parts.hostname
        or not plain
        or (origin and not parts.scheme)
        or (wildcard and parts.port is not None)
    ):
        return None
    return parts.scheme.lower(), parts.hostname.lower(), port


@functools.lru_cache(maxsize=1024)
def _allowed(value: str, patterns: tuple[str, ...], *, origin: bool) -> bool:
    """Scheme, host and port compared exactly (the host in any case); a pattern's ``:*`` allows
    any port, or none. (Remembered: a client sends the same Host on every request.)"""
    given = _address(value, origin=origin)
    if given is None or given[2] == "*":
        return False
    for pattern in patterns:
        wanted = _address(pattern, origin=origin)
        if wanted is not None and wanted[:2] == given[:2] and wanted[2] in ("*", given[2]):
            return True
    return False


@dataclass(frozen=True, slots=True)
class Guard:
    """Host and Origin checks (DNS-rebinding protection, per the MCP security best practices).

    Written here rather than taken from the SDK: ``mcp.server.transport_security``'s
    ``TransportSecuritySettings`` compares hosts case-sensitively and reads a ``:*`` pattern as a
    text prefix (``localhost:*`` admits ``localhost:1.evil.example``), and runs inside each
    endpoint's transport, after the token; Starlette's ``TrustedHostMiddleware`` ignores ports
    and has no Origin check. Here both headers are parsed and compared by scheme, host and port.
    """

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
        return self.allowed_hosts is None or (
            host is not None and _allowed(host, self.allowed_hosts, origin=False)
        )

    def origin_ok(self, origin: str | None) -> bool:
        # Clients that are not browsers send no Origin; a browser page always does.
        return origin is None or _allowed(origin, self.allowed_origins, origin=True)


async def _reply(
    send: Send,
    status: int,
    message: str,
    *,
    headers: Sequence[tuple[bytes, bytes]] = (),
    code: int = _INVALID_REQUEST,
    request_id: str | int | None = None,
) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), *headers],
        }
    )
    await send({"type": "http.response.body", "body": body.encode()})


async def _ended(send: Send) -> None:
    """Ends the answer of a request that the gateway's stop cut short: a 503 if it had not begun,
    else the end of its body (a client reading a stream sees it end without the answer)."""
    try:
        await _reply(send, 503, "the gateway stopped before this request was answered")
    except RuntimeError:  # the answer had begun
        with contextlib.suppress(RuntimeError):
            await send({"type": "http.response.body", "body": b"", "more_body": False})


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
        read_timeout: float,
        max_sessions: int,
        tenant_quota: int,
        ready: Callable[[], bool],
        oauth: OAuthResourceServer | None = None,
        console: ASGIApp | None = None,
        client_modes: Mapping[str, GatewayMode] | None = None,
        client_all_max_tools: int = 1000,
        login: ASGIApp | None = None,
        lean: McpHandlers | None = None,
    ) -> None:
        """``lean``: the handlers that answer a plain ``tools/call`` on the lean path
        (:mod:`mcp_gateway_svc.lean`; None: every request goes to the SDK)."""
        self._endpoints = endpoints
        self._lean = lean
        self._client_modes = dict(client_modes or {})
        # A host's matched mode, by its name (the globs are matched once per name; bounded).
        self._mode_of_client = functools.lru_cache(maxsize=1024)(
            functools.partial(matched_mode, patterns=self._client_modes)
        )
        self._client_all_max_tools = client_all_max_tools
        self._managers = managers
        self._sessions = sessions
        self._tenants = tenants
        self._guard = guard
        self._replica = replica
        self._forwarder = forwarder
        self._metrics = metrics
        self._ready = ready
        self._max_body = max_body_bytes
        # toolscout.gateway.oauth: JWTs of an identity provider, besides the static tokens.
        self._oauth = oauth
        # The web console (mcp_gateway_svc.console), None when it is off.
        self._console = console
        # The login routes of per_user servers (mcp_gateway_svc.user_login), None without any.
        self._login = login
        self._read_timeout = read_timeout
        self._max_sessions = max_sessions
        self._tenant_quota = tenant_quota
        # The requests being answered (not counting GET streams): shutdown lets them finish, then
        # ends those still running (end_requests).
        self._requests = InFlight()
        self.idle = self._requests.idle
        # Set once the stop's grace is over: every MCP request is answered 503 from then on.
        self._closed = False

    def end_requests(self) -> int:
        """Refuses every MCP request from now on (the gateway is stopping and its grace is over)
        and ends those still being answered; returns how many it ended. Each is answered 503 if
        its answer had not begun, else its answer ends."""
        self._closed = True
        return self._requests.end_all()

    async def _reject(self, send: Send, status: int, reason: str, message: str, **kw: Any) -> None:
        self._metrics.rejections.labels(reason).inc()
        await _reply(send, status, message, **kw)

    async def _refuse_stopping(self, send: Send) -> None:
        """Every request but the probes once the stop's grace is over (:meth:`end_requests`)."""
        await self._reject(send, 503, "stopping", "the gateway is stopping")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        page = self._page_app(scope["path"])
        if page is not None:
            await self._serve_console(page, scope, receive, send)
            return
        if await self._own_path(scope["path"], send):
            return
        info = await self._admit(scope, send)
        if info is None:
            return
        headers = Headers(scope=scope)
        refusal = check_protocol_version(headers.get(MCP_PROTOCOL_VERSION_HEADER))
        opening = Opening(False, "")
        message: dict[str, Any] | None = None
        if refusal is None and scope["method"] == "POST":
            try:
                body = await read_body(
                    receive, limit=self._max_body, seconds=self._read_timeout, declared=_length(headers)
                )
            except ClientGoneError:
                _log.info("request dropped: the client went away before its body arrived")
                return
            if isinstance(body, Refusal):
                refusal = body
            else:
                checked = check_message(body)
                refusal = checked if isinstance(checked, Refusal) else None
                if not isinstance(checked, Refusal):
                    opening = opening_of(checked)
                    message = checked
                receive = replaying(body, receive)
        if refusal is not None:
            if refusal.reason == "body_timeout":
                _log.info("request dropped: its body did not arrive in time", timeout=self._read_timeout)
            self._metrics.rejections.labels(refusal.reason).inc()
            await _reply(
                send, refusal.status, refusal.message, code=refusal.code, request_id=refusal.request_id
            )
            return
        await self._mcp(scope, receive, send, info, headers, opening=opening, message=message)

    def _page_app(self, path: str) -> ASGIApp | None:
        """The app of a page a browser opens (the console, a per_user server's login), else None."""
        if self._console is not None and is_console_path(path):
            return self._console
        if self._login is not None and is_login_path(path):
            return self._login
        return None

    async def _serve_console(self, console: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
        """The console signs its visitors in with the same tokens itself (a browser cannot send a
        bearer token on a page load); the Host and Origin rules are these. The login routes of
        per_user servers are served the same way (their link carries a signed ticket instead)."""
        headers = Headers(scope=scope)
        if not self._guard.host_ok(headers.get("host")):
            await self._reject(send, 421, "bad_host", "Invalid Host header")
        elif not self._guard.origin_ok(headers.get("origin")):
            await self._reject(send, 403, "bad_origin", "Invalid Origin header")
        elif self._closed:
            await self._refuse_stopping(send)
        else:
            # A page's event stream is endless: the console ends those when the stop begins.
            with self._requests.track(counted=not is_event_stream(scope["path"])) as request:
                await console(scope, receive, send)
            if request.ended:
                await _ended(send)

    async def _own_path(self, path: str, send: Send) -> bool:
        """Answers the probes and the peer lookup, and refuses every other request once the gateway
        has closed (:meth:`end_requests`); False for anything else."""
        if path == "/healthz":
            await _plain(send, 200, {"status": "serving"})
        elif path == "/readyz":
            ok = self._ready()
            await _plain(send, 200 if ok else 503, {"status": "ready" if ok else "not ready"})
        elif path == REPLICA_PATH:
            await _plain(send, 200, {"replica": self._replica.id})
        elif self._oauth is not None and (metadata := self._oauth.metadata_for(path)) is not None:
            await _plain(send, 200, metadata)
        elif _endpoint_key(path) is None:
            await _reply(send, 404, "not found: the MCP endpoints are /mcp and /mcp/<toolset>")
        elif self._closed:
            await self._refuse_stopping(send)
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
        if self._tenants.enabled or self._oauth is not None:
            tenant = self._tenants.authenticate(headers.get("authorization"))
            if tenant is None and self._oauth is not None:
                verdict = await self._oauth.authenticate(headers.get("authorization"), path)
                if not isinstance(verdict, Tenant):
                    await self._reject(
                        send, verdict.status, verdict.reason, verdict.message, headers=verdict.headers
                    )
                    return None
                tenant = verdict
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
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        info: RequestInfo,
        headers: Headers,
        *,
        opening: Opening,
        message: dict[str, Any] | None = None,
    ) -> None:
        sid = headers.get(MCP_SESSION_ID_HEADER)
        if sid is not None:
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
            info = RequestInfo(info.endpoint, info.principal, session, session.mode)
            if message is not None and message.get("method") == "notifications/cancelled":
                # A call on the lean path is not the SDK session's to cancel (it is told too).
                params = message.get("params")
                session.cancel_lean(params.get("requestId") if isinstance(params, dict) else None)
            with self._sessions.serving(session):
                await self._serve(
                    self._managers[_manager_key(session.mode, True)], scope, receive, send, info, message
                )
            if scope["method"] == "DELETE":
                self._sessions.close(raw)
            return
        mode = info.endpoint.mode
        if scope["method"] == "POST":
            chosen = (self._mode_of_client(opening.client_name) if opening.client_name else None) or mode
            view = info.endpoint.view
            too_many = view is not None and len(view.by_name) > self._client_all_max_tools
            mode = mode if chosen == GatewayMode.ALL and mode != GatewayMode.ALL and too_many else chosen
        manager = self._managers[_manager_key(mode, opening.initialize)]
        if not manager.stateless and opening.initialize and not await self._make_room(info.principal):
            await self._reject(send, 503, "too_many_sessions", "Too many open sessions (all of them busy)")
            return
        info = RequestInfo(info.endpoint, info.principal, None, mode)
        streaming = self._managers.get(STREAMING_META)
        if manager.stateless and streaming is not None and opening.asks_progress:
            # A stateless endpoint answers with one JSON body, where progress notifications have
            # nowhere to go: a request that asks for progress is answered on an SSE stream.
            manager = streaming
        await self._serve(manager, scope, receive, send, info, message)

    async def _make_room(self, principal: str) -> bool:
        """Room for one more session of ``principal``: at its quota, or at the replica's limit, the
        least recently used idle session (of the tenant, or of anyone) is ended. False when every
        session in the way is busy."""
        for limit, of_tenant, reason in (
            (self._tenant_quota, True, "tenant_quota"),
            (self._max_sessions, False, "max_sessions"),
        ):
            if of_tenant and not principal:
                continue  # without tokens there is one tenant: max_sessions is its quota
            open_now = self._sessions.of_principal(principal) if of_tenant else self._sessions.all()
            if len(open_now) < limit:
                continue
            idle = [s for s in open_now if not s.inflight]
            if not idle:
                return False
            victim = min(idle, key=lambda s: s.last_seen)
            self._sessions.close(victim.sid)
            self._metrics.session_evictions.labels(reason).inc()
            await end_session(self._managers[_manager_key(victim.mode, True)], victim.sid)
        return True

    async def _serve(
        self,
        manager: StreamableHTTPSessionManager,
        scope: Scope,
        receive: Receive,
        send: Send,
        info: RequestInfo,
        message: dict[str, Any] | None = None,
    ) -> None:
        scope = {**scope, REQUEST_INFO_KEY: info}
        with self._requests.track(counted=scope["method"] != "GET") as request:
            if (
                message is not None
                and self._lean is not None
                and message.get("method") == "tools/call"
                and await self._lean_call(info, message, manager, _Http(scope, receive, send))
            ):
                return
            if manager.stateless and scope["method"] == "POST":
                await _cancelled_on_disconnect(manager, scope, receive, self._sending(send, info))
            else:
                await manager.handle_request(scope, receive, self._sending(send, info))
        if request.ended:
            await _ended(send)

    async def _lean_call(
        self, info: RequestInfo, message: dict[str, Any], manager: StreamableHTTPSessionManager, http: _Http
    ) -> bool:
        """Answers a plain ``tools/call`` on the lean path (:mod:`mcp_gateway_svc.lean`); False,
        having done nothing, for a request the SDK answers."""
        assert self._lean is not None
        scope, receive, send = http
        headers = Headers(scope=scope)
        modern = headers.get(MCP_PROTOCOL_VERSION_HEADER) in MODERN_PROTOCOL_VERSIONS
        session = info.session
        url = base_url(scope)
        transport = None
        if session is None:
            # (a transport that may answer on a stream pings a long call: the SDK's path then)
            call = read_modern(message, headers, base_url=url) if modern and manager.json_response else None
        else:
            transport = live_transport(manager, session.sid)
            call = (
                read_session(message, headers, session, sse=not manager.json_response, base_url=url)
                if transport
                else None
            )
        target = self._lean.lean_target(info, call) if call is not None else None
        if call is None or target is None:
            return False
        run = self._lean.lean_call(info, call, target)
        if session is None:
            # The call runs in this task, cancelled when its client goes away (asyncio's own
            # cancellation: an anyio cancel scope per call was a measurable part of its cost).
            request_task = asyncio.current_task()
            gone: list[bool] = []

            def went_away() -> None:
                gone.append(True)
                if request_task is not None:
                    request_task.cancel()

            watcher = _cancel_on_disconnect(receive, went_away)
            try:
                outcome = await _outcome(manager, call.protocol_version, run)
            except asyncio.CancelledError:
                # Nothing to answer to a client that went away; any other cancellation goes on.
                if not gone or request_task is None or request_task.uncancel():
                    raise
                return True
            finally:
                watcher.cancel()
            if outcome is not None:
                await write_json(send, call.request_id, outcome)
            return True
        task = asyncio.ensure_future(_outcome(manager, call.protocol_version, run))
        with holding(transport):
            session.lean_calls[call.request_id] = task
            try:
                await answer_session(
                    send, call.request_id, task, session_id=self._replica.session_id(session.sid)
                )
            finally:
                session.lean_calls.pop(call.request_id, None)
                task.cancel()
        return True

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
                            raw, endpoint=info.endpoint.key, mode=info.mode, principal=info.principal
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


class _Http(NamedTuple):
    """One HTTP request as the ASGI server hands it over."""

    scope: Scope
    receive: Receive
    send: Send


async def _outcome(
    manager: StreamableHTTPSessionManager, version: str, run: Awaitable[BaseModel | CallToolResult]
) -> dict[str, Any] | Exception | None:
    """A lean call's result in its wire form, or the exception it raised; None while it has not
    finished (cancelled: the caller's scope absorbs the cancellation)."""
    outcome: dict[str, Any] | Exception | None = None
    try:
        outcome = pool_result_wire(manager.app, version, await run)
    except Exception as err:
        outcome = err
    return outcome


def _length(headers: Headers) -> int | None:
    try:
        return int(headers["content-length"])
    except (KeyError, ValueError):
        return None


def _manager_key(mode: GatewayMode, session: bool) -> str:
    """The transport answering ``mode``: meta's is stateless, but a client that opens a session
    with ``initialize`` gets one (so that it can be told of catalog changes)."""
    return "meta-sessions" if mode == GatewayMode.META and session else mode


async def _cancelled_on_disconnect(
    manager: StreamableHTTPSessionManager, scope: Scope, receive: Receive, send: Send
) -> None:
    """A stateless request, cancelled when its client goes away before the answer.

    A 2026-07-28 client cancels a request by closing its response stream; the SDK's stateless JSON
    responses do not watch for that, so the call would run to its end. Once the body is read the
    SDK does not read again, and the disconnect is watched for here.
    """
    body_read = asyncio.Event()

    async def receiving() -> Message:
        message = await receive()
        if message["type"] != "http.request" or not message.get("more_body", False):
            body_read.set()
        return message

    # A bare watcher task and a cancel scope rather than a task group: a task group's own cancel
    # at the end of every request formatted the request task's repr (anyio names the canceller),
    # a measurable part of a call's cost. The scope is cancelled only when the client left.
    with anyio.CancelScope() as request_scope:
        watcher = _cancel_on_disconnect(
            receive, lambda: request_scope.cancel("the client went away"), after=body_read
        )
        try:
            await manager.handle_request(scope, receiving, send)
        finally:
            watcher.cancel()


def _cancel_on_disconnect(
    receive: Receive, cancel: Callable[[], object], *, after: asyncio.Event | None = None
) -> asyncio.Task[None]:
    """A task calling ``cancel`` when the client goes away (``after``: once the body is read);
    the caller cancels it once the answer is out."""

    async def watch() -> None:
        if after is not None:
            await after.wait()
        while (await receive())["type"] != "http.disconnect":
            pass
        cancel()

    watcher = asyncio.get_running_loop().create_task(watch())
    # A receive that fails once the answer is out changes nothing: retrieved, not reported.
    watcher.add_done_callback(lambda task: task.cancelled() or task.exception())
    return watcher


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
