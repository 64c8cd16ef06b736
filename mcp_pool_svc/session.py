"""One live MCP session to one server, over stdio, SSE or streamable HTTP.

:func:`open_connection` spawns or dials the server, negotiates the newest MCP revision both sides
speak and yields a :class:`Connection` that the supervisor keeps open for as long as the server is
healthy. Requests from many callers run concurrently on that one session. The transport's read
stream is relayed through a small forwarder so that the supervisor learns at once when the server
goes away (process exit, broken stream) instead of waiting for the next ping.

Revisions (the pinned ``mcp`` SDK): 2026-07-28 has no handshake; a client probes it with
``server/discover`` and stamps every request with the version. Older revisions (2024-11-05 …
2025-11-25) need ``initialize``. :func:`negotiate` probes ``server/discover`` first and falls back
to ``initialize`` when the server refuses it (on stdio the first request decides the era, so the
order matters: an ``initialize`` refused by a 2026-only server would lock that process out of
2026-07-28). At 2026-07-28 there is no ``ping``: health checks send ``server/discover`` again; tool
listings carry a ``ttlMs`` cache hint (kept as :attr:`Connection.tools_ttl`) and change
notifications come on a ``subscriptions/listen`` stream, which the connection keeps open while the
server offers it.

Streamable-HTTP servers share one HTTP client per distinct header set (:class:`HttpClients`),
without httpx's cap of 100 connections: handshake-era sessions each hold one connection for their
GET stream, and a thousand servers behind one client would starve each other.

Liberal in what it accepts: a 2026-07-28 ``tools/call`` result missing ``resultType`` (servers on
SDKs written before that field) is read as a complete result, and the connection reports it once
(``lenient_result``); the SDK's client session would refuse the whole reply instead, and it has no
hook for this, so the session is given a dispatcher that fills the field in (:class:`_LenientDispatcher`).
"""

from __future__ import annotations

import contextvars
import json
import os
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import anyio
import httpx2
import mcp_types
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from httpx2._utils import get_environment_proxies
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost, listen
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp.shared.message import SessionMessage
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from mcp_pool_svc.catalog import ListedTool, listed_tool_from_mcp
from mcp_pool_svc.http11 import LeanHttpTransport
from mcp_pool_svc.lean import LeanPost, lean_call
from mcp_pool_svc.reaper import Reaper
from mcp_pool_svc.relay import CallRouter, HostSession, context_relay, without_host_capabilities
from mcp_pool_svc.stdio import stdio_transport
from toolscout_kit.config import RemoteServerConfig, StdioServerConfig
from toolscout_kit.json_text import LoneSurrogateEscapes
from toolscout_kit.oauth_client import OAuthProvider, RemoteAuth, reporting_failure

__all__ = [
    "INVALID_LISTING",
    "NOT_SENT_CODE",
    "Connection",
    "ConnectionEvent",
    "Connector",
    "HttpClients",
    "StderrSink",
    "make_connector",
    "negotiate",
    "open_connection",
    "transport_name",
    "was_not_sent",
]

# "listen_lost": the change-notification stream ended unexpectedly (the server may be gone).
# "lenient_result": a result missed a field its revision requires and was read all the same.
# "features_changed": its resources or prompts changed; "resource_updated": a subscribed resource
# changed (the detail is its URI).
ConnectionEvent = Literal[
    "closed",
    "exited",
    "tools_changed",
    "stream_error",
    "listen_lost",
    "lenient_result",
    "features_changed",
    "resource_updated",
]
# Error code of a tools/list reply that does not validate (e.g. a 2026-07-28 reply without ttlMs).
INVALID_LISTING = mcp_types.INTERNAL_ERROR
# Re-opening a lost listen stream: first after this many seconds, doubling up to the cap.
_LISTEN_RETRY = 1.0
_LISTEN_RETRY_CAP = 60.0
_CLIENT_INFO = mcp_types.Implementation(name="toolscout-mcp-pool", version="0.1.0")
# SSE streams stay open between events; only the connect/write phases use connect_timeout.
_SSE_READ_TIMEOUT = 300.0


def transport_name(config: StdioServerConfig | RemoteServerConfig) -> str:
    """``stdio``, ``sse`` or ``streamable-http``."""
    if isinstance(config, StdioServerConfig):
        return "stdio"
    return config.resolved_transport


@dataclass
class Connection:
    """A negotiated session plus what the server said about itself."""

    session: ClientSession
    server_info: str
    closed: anyio.Event
    # The negotiated MCP revision ("2026-07-28", "2025-06-18", ...).
    protocol_version: str = ""
    # The server's cache hint from its last listing, in seconds (the smallest over the pages);
    # None when it gave none (older revisions, or 0 = "no hint").
    tools_ttl: float | None = None
    # True while a subscriptions/listen stream delivers the server's tool changes (2026-07-28);
    # handshake-era servers announce changes on the session itself (see change_notifications).
    listening: bool = False
    # The OAuth provider of a server with ``auth`` (its ``failure`` tells a lost authorization).
    auth: OAuthProvider | None = None
    # Routes the server's requests and log messages during a call to that call's host.
    router: CallRouter = field(default_factory=lambda: CallRouter(request_streams=False))
    # The session's dispatcher's send_raw_request: a plain tools/call skips the SDK's call_tool
    # and is sent with this (mcp_pool_svc.lean.plain_call_tool; None: always the SDK's call_tool).
    send_raw: Callable[[str, Any, Any], Awaitable[dict[str, Any]]] | None = None

    @property
    def modern(self) -> bool:
        return self.protocol_version in MODERN_PROTOCOL_VERSIONS

    @property
    def change_notifications(self) -> bool:
        """Whether the server announces tool changes to this session."""
        if self.modern:
            return self.listening
        caps = self.session.server_capabilities if self.session is not None else None
        return bool(caps and caps.tools and caps.tools.list_changed)

    async def list_tools(self) -> list[ListedTool]:
        """Every tool of the server, following pagination cursors; records the pages' cache hint.
        Each page of a 2026-07-28 streamable-HTTP server is one direct POST (:mod:`mcp_pool_svc.lean`).

        Raises:
            MCPError: the server refused, or its reply is not a valid listing (``INVALID_LISTING``,
                e.g. a 2026-07-28 reply without its required ``ttlMs``).
        """
        tools: list[ListedTool] = []
        cursor: str | None = None
        hints: list[int] = []
        while True:
            params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
            try:
                with lean_call():
                    page = await self.session.list_tools(params=params)
            except ValidationError as err:
                problem = err.errors(include_url=False, include_input=False)[0]
                where = ".".join(str(part) for part in problem["loc"]) or "the result"
                raise MCPError(
                    INVALID_LISTING,
                    f"the server's tools/list reply is not valid at {self.protocol_version or 'its revision'}: "
                    f"{where}: {problem['msg']}",
                ) from None
            tools.extend(listed_tool_from_mcp(t) for t in page.tools)
            # Older revisions have no hint (the SDK strips it); a 2026 server without one sends 0.
            if "ttl_ms" in page.model_fields_set and page.ttl_ms:
                hints.append(page.ttl_ms)
            cursor = page.next_cursor
            if not cursor:
                self.tools_ttl = min(hints) / 1000.0 if hints else None
                return tools

    async def ping(self) -> None:
        """A health check: ``ping`` before 2026-07-28, a ``server/discover`` probe at it (no ping there)."""
        if self.modern:
            await self.session.send_discover(self.protocol_version)
        else:
            await self.session.send_ping()


class Connector(Protocol):
    """Opens a connection; the supervisor depends on this, so tests can pass their own.
    ``host``: a session for one host's call (:class:`~mcp_pool_svc.relay.HostSession`)."""

    def __call__(
        self,
        name: str,
        config: StdioServerConfig | RemoteServerConfig,
        on_event: Callable[[ConnectionEvent, str], None],
        host: HostSession | None = None,
    ) -> AbstractAsyncContextManager[Connection]: ...


async def _forward(
    source: ObjectReceiveStream[SessionMessage | Exception],
    sink: ObjectSendStream[tuple[contextvars.Context | None, SessionMessage | Exception]],
    closed: anyio.Event,
    on_event: Callable[[ConnectionEvent, str], None],
) -> None:
    try:
        async with sink:
            async for item in source:
                # Exceptions (unparsable lines) pass through; the session's message handler reports
                # them. The sender's context travels along: it names the call a request belongs to.
                await sink.send((getattr(source, "last_context", None), item))
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
        pass
    finally:
        closed.set()
        on_event("closed", "connection closed by the server")


def _transport(
    config: StdioServerConfig | RemoteServerConfig,
    on_event: Callable[[ConnectionEvent, str], None],
    *,
    base_dir: Path,
    on_stderr: Callable[[str], None],
    max_line_bytes: int,
    http_clients: HttpClients | None,
    reaper: Reaper,
    auth: OAuthProvider | None = None,
) -> AbstractAsyncContextManager[Any]:
    if isinstance(config, StdioServerConfig):
        cwd = Path(os.path.expanduser(config.cwd)) if config.cwd else base_dir
        if not cwd.is_absolute():
            cwd = base_dir / cwd
        return stdio_transport(
            config.command,
            config.args,
            env=config.env,
            cwd=cwd,
            on_exit=lambda detail: on_event("exited", detail),
            on_stderr=on_stderr,
            max_line_bytes=max_line_bytes,
            reaper=reaper,
        )
    return _remote_transport(config, http_clients, auth)


# A POST that could not even connect (refused, unresolvable, no connection in time) is answered
# with this JSON-RPC error, marked with this process's nonce so that no server can forge it: the
# request was certainly not delivered. (The SDK would instead end the whole transport with the
# connection error, which the caller sees as CONNECTION_CLOSED: "sent, then lost".)
NOT_SENT_CODE = mcp_types.INTERNAL_ERROR
_NOT_SENT_MARK = "toolscout/notSent"
_NOT_SENT_NONCE = os.urandom(8).hex()


def was_not_sent(err: MCPError) -> bool:
    """Whether ``err`` says the request never reached the server (see :class:`_NotSentTransport`)."""
    data = err.error.data
    return (
        err.code == NOT_SENT_CODE and isinstance(data, dict) and data.get(_NOT_SENT_MARK) == _NOT_SENT_NONCE
    )


class _NotSentTransport(httpx2.AsyncBaseTransport):
    """An HTTP transport that answers a JSON-RPC request whose POST could not connect with a
    "not sent" JSON-RPC error (HTTP 503, JSON), which the SDK hands to that request alone.

    Refused connections are the common way a dead server answers; telling them apart from a
    request lost after it was sent is what lets a call right after a server died be answered
    "not sent" at once, in every window of the reconnect cycle, instead of waiting for the server
    to come back (a repeatable tool) or being reported as "may have run".
    """

    def __init__(self, inner: LeanHttpTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            return await self.inner.handle_async_request(request)
        except (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout) as err:
            request_id = _request_id(request)
            if request_id is None:
                raise
            return httpx2.Response(
                503,
                headers={"content-type": "application/json"},
                content=json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": request_id,
                        "error": _not_sent_error(err).model_dump(by_alias=True, exclude_none=True),
                    }
                ).encode(),
                request=request,
            )

    async def aclose(self) -> None:
        await self.inner.aclose()


# The answers the SDK's transports parse as JSON (a body, or an SSE stream's events).
_JSON_TYPES = ("application/json", "text/event-stream")


async def _well_formed(response: httpx2.Response) -> None:
    """A response hook of the clients under the ``mcp`` SDK's transports (streamable HTTP and SSE
    alike): JSON and SSE bodies arrive with each lone surrogate's escape rewritten as U+FFFD's
    (:class:`~toolscout_kit.json_text.LoneSurrogateEscapes`). The SDK's parser refuses a whole
    message for one, and the answer it carried would be lost (the call waiting for its timeout);
    the pool's own parsers read it as U+FFFD (:func:`~toolscout_kit.json_text.server_json`). A hook,
    not a transport, so that it holds on every transport a client routes to (a proxy's too)."""
    headers = response.headers
    if (
        headers.get("content-type", "").startswith(_JSON_TYPES)
        and headers.get("content-encoding", "identity") == "identity"
    ):
        response.stream = _WellFormed(response.stream)


_HOOKS: dict[str, list[Callable[[httpx2.Response], Awaitable[None]]]] = {"response": [_well_formed]}


def _proxy_mounts() -> dict[str, httpx2.AsyncBaseTransport | None]:
    """The environment's proxies (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``, ``NO_PROXY``) as
    ``httpx2`` mounts them for a client of its own making: a client given a transport (the pool's
    HTTP/1.1 one) would skip them, and a server behind a proxy would never be reached."""
    return {
        pattern: None if proxy is None else httpx2.AsyncHTTPTransport(proxy=proxy)
        for pattern, proxy in get_environment_proxies().items()
    }


def _sse_http_client(
    headers: dict[str, str] | None = None,
    timeout: httpx2.Timeout | None = None,
    auth: httpx2.Auth | None = None,
) -> httpx2.AsyncClient:
    """The client the SDK makes for an SSE server, with :func:`_well_formed` among its hooks."""
    client = create_mcp_http_client(headers, timeout, auth)
    client.event_hooks = {**client.event_hooks, "response": [*client.event_hooks["response"], _well_formed]}
    return client


class _WellFormed(httpx2.AsyncByteStream):
    """A response body as :func:`_well_formed` leaves it."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        rewriter = LoneSurrogateEscapes()
        async for piece in self._inner:
            if out := rewriter.feed(piece):
                yield out
        if rest := rewriter.end():
            yield rest

    async def aclose(self) -> None:
        await self._inner.aclose()


def _not_sent_error(err: Exception) -> mcp_types.ErrorData:
    """The error a request whose POST could not connect is answered with (see :func:`was_not_sent`)."""
    return mcp_types.ErrorData(
        code=NOT_SENT_CODE,
        message=f"the server could not be reached ({type(err).__name__}); the request was not sent",
        data={_NOT_SENT_MARK: _NOT_SENT_NONCE},
    )


def not_sent(err: Exception) -> MCPError:
    """:func:`_not_sent_error` as the dispatcher raises it (for :class:`~mcp_pool_svc.lean.LeanPost`)."""
    return MCPError.from_error_data(_not_sent_error(err))


def _request_id(request: httpx2.Request) -> str | int | None:
    """The JSON-RPC id of a POSTed request (None: not a POST, or a notification)."""
    if request.method != "POST":
        return None
    try:
        message = json.loads(request.content)
    except (ValueError, httpx2.RequestNotRead):
        return None
    request_id = message.get("id") if isinstance(message, dict) and "method" in message else None
    return request_id if isinstance(request_id, str | int) and not isinstance(request_id, bool) else None


class HttpClients:
    """One shared HTTP client per distinct (headers, connect timeout) of streamable-HTTP servers.

    Measured on 1,000 simulated servers: one client per session costs ~1.05 MB and 34 ms of CPU per
    session, a shared one ~0.22 MB and 17-20 ms. Neither the connection count nor the kept-alive
    connections are capped (httpx's defaults, 100 and 20, starve or churn a thousand sessions).
    Their requests go out on :class:`~mcp_pool_svc.http11.LeanHttpTransport` (HTTP/1.1 on asyncio
    streams), which costs a fraction of ``httpcore2``'s CPU per request.
    """

    def __init__(self) -> None:
        self._clients: dict[
            tuple[tuple[tuple[str, str], ...], float], tuple[httpx2.AsyncClient, _NotSentTransport]
        ] = {}

    def get(self, config: RemoteServerConfig) -> httpx2.AsyncClient:
        return self._entry(config)[0]

    def transport(self, config: RemoteServerConfig) -> _NotSentTransport:
        """The transport under :meth:`get`'s client (for :mod:`mcp_pool_svc.lean`)."""
        return self._entry(config)[1]

    def _entry(self, config: RemoteServerConfig) -> tuple[httpx2.AsyncClient, _NotSentTransport]:
        key = (tuple(sorted(config.headers.items())), config.connect_timeout)
        entry = self._clients.get(key)
        if entry is None:
            transport = _NotSentTransport(LeanHttpTransport(keepalive_expiry=30.0))
            client = httpx2.AsyncClient(
                headers=config.headers or None,
                timeout=httpx2.Timeout(config.connect_timeout, read=_SSE_READ_TIMEOUT),
                transport=transport,
                mounts=_proxy_mounts(),
                event_hooks=_HOOKS,
            )
            entry = self._clients[key] = (client, transport)
        return entry

    async def aclose(self) -> None:
        clients, self._clients = [client for client, _ in self._clients.values()], {}
        for client in clients:
            await client.aclose()


@asynccontextmanager
async def _remote_transport(
    config: RemoteServerConfig, http_clients: HttpClients | None, auth: OAuthProvider | None = None
) -> AsyncIterator[Any]:
    # A server with OAuth (``auth``) has a client of its own: its credentials are its alone.
    if config.resolved_transport == "sse":
        async with (
            sse_client(
                config.url,
                headers=config.headers,
                timeout=config.connect_timeout,
                sse_read_timeout=_SSE_READ_TIMEOUT,
                httpx_client_factory=_sse_http_client,
                auth=auth,
            ) as streams,
            reporting_failure(auth),
        ):
            yield streams
        return
    if http_clients is not None and auth is None:
        async with streamable_http_client(config.url, http_client=http_clients.get(config)) as streams:
            yield streams
        return
    own = HttpClients()
    try:
        client = own.get(config)
        if auth is not None:
            client.auth = auth
        async with streamable_http_client(config.url, http_client=client) as streams, reporting_failure(auth):
            yield streams
    finally:
        await own.aclose()


def _message_handler(on_event: Callable[[ConnectionEvent, str], None]) -> Any:
    async def handle(message: Any) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            on_event("tools_changed", "")
        elif isinstance(
            message, mcp_types.ResourceListChangedNotification | mcp_types.PromptListChangedNotification
        ):
            on_event("features_changed", "")
        elif isinstance(message, mcp_types.ResourceUpdatedNotification):
            on_event("resource_updated", str(message.params.uri))
        elif isinstance(message, Exception):
            on_event("stream_error", f"invalid message from the server: {type(message).__name__}")

    return handle


# Logs one stderr line of a server (masked) and returns the masked line.
StderrSink = Callable[[str, str], str]
# The last stderr line a failed start is reported with is cut to this many characters.
_LAST_STDERR_CHARS = 300


def make_connector(
    *,
    base_dir: Path,
    stderr_sink: StderrSink,
    max_line_bytes: int,
    http_clients: HttpClients | None = None,
    reaper: Reaper | None = None,
    remote_auth: RemoteAuth | None = None,
) -> Connector:
    """The real connector: stdio paths resolve against ``base_dir`` (the config file's folder).

    Each line a stdio server writes to stderr goes to ``stderr_sink(server_name, line)``; a reply
    line longer than ``max_line_bytes`` is refused (see :mod:`mcp_pool_svc.stdio`). When the process
    exits, the exit event carries its last stderr line (masked): usually the reason it could not
    start ("ModuleNotFoundError: ..."). Streamable-HTTP servers share the clients of
    ``http_clients`` (each connection opens its own without it). Stdio servers' processes are
    reaped by ``reaper`` (one of its own without it). Remote servers configured with ``auth``
    authorize through ``remote_auth`` (OAuth 2.1, see :mod:`toolscout_kit.oauth_client`).
    """
    reaper = reaper or Reaper()

    def connect(
        name: str,
        config: StdioServerConfig | RemoteServerConfig,
        on_event: Callable[[ConnectionEvent, str], None],
        host: HostSession | None = None,
    ) -> AbstractAsyncContextManager[Connection]:
        last: list[str] = []

        def stderr(line: str) -> None:
            last[:] = [stderr_sink(name, line)]

        def event(kind: ConnectionEvent, detail: str) -> None:
            if kind == "exited" and last:
                line = last[0] if len(last[0]) <= _LAST_STDERR_CHARS else last[0][:_LAST_STDERR_CHARS] + "..."
                detail = f"{detail}; its last stderr line: {line}"
            on_event(kind, detail)

        auth = None
        if remote_auth is not None and isinstance(config, RemoteServerConfig):
            auth = remote_auth.provider(name, config)
        return open_connection(
            config,
            event,
            base_dir=base_dir,
            on_stderr=stderr,
            max_line_bytes=max_line_bytes,
            http_clients=http_clients,
            reaper=reaper,
            auth=auth,
            host=host,
        )

    return connect


def _supported(err: MCPError) -> list[str] | None:
    """The versions a -32022 refusal names, or None when it names none."""
    try:
        return mcp_types.UnsupportedProtocolVersionErrorData.model_validate(err.error.data).supported
    except ValidationError:
        return None


async def negotiate(session: ClientSession) -> None:
    """Settles the newest MCP revision both sides speak: ``server/discover`` first, else ``initialize``.

    Any refusal of the probe means an older server (over stdio it answers -32601, over HTTP an
    older SDK rejects the unknown version header with 400, read as -32600), except a -32022 that
    names only 2026-era versions this SDK does not speak, which is a real incompatibility. An
    ``initialize`` answered with -32022 is itself evidence of a 2026 server (a first probe that
    timed out here but reached a slow server): the probe is sent once more.

    Raises:
        MCPError: the server speaks no revision in common, or refused both.
        RuntimeError: ``initialize`` was answered with a revision this SDK does not speak.
    """
    try:
        await session.discover()
        return
    except MCPError as err:
        supported = _supported(err) if err.code == mcp_types.UNSUPPORTED_PROTOCOL_VERSION else None
        if supported is not None and not any(v in HANDSHAKE_PROTOCOL_VERSIONS for v in supported):
            raise
    except (RuntimeError, ValidationError):
        pass  # it answered, but with no 2026 revision this SDK speaks: an older server
    try:
        await session.initialize()
    except MCPError as err:
        if err.code != mcp_types.UNSUPPORTED_PROTOCOL_VERSION:
            raise
        await session.discover()


async def _listen_for_changes(
    conn: Connection, on_event: Callable[[ConnectionEvent, str], None], first: anyio.Event
) -> None:
    """Keeps a ``subscriptions/listen`` stream for tool changes open while the session lives.

    A change arrives both here and as a notification on the session (which already tells the
    supervisor), so the events are only drained. ``first`` is set once the first stream is open
    (or cannot be): the connection is handed out only then, so that no change falls between the
    first listing and the subscription. A stream that ends is re-opened with a growing delay,
    and the tools are listed again then, since changes meanwhile were not delivered.
    """
    try:
        await _listen_loop(conn, on_event, first)
    finally:
        first.set()


async def _listen_loop(
    conn: Connection, on_event: Callable[[ConnectionEvent, str], None], first: anyio.Event
) -> None:
    delay = _LISTEN_RETRY
    reopened = False
    while not conn.closed.is_set():
        problem = ""
        try:
            caps = conn.session.server_capabilities
            async with listen(
                conn.session,
                tools_list_changed=True,
                # Resource and prompt changes arrive on the session too (the supervisor lists again).
                prompts_list_changed=bool(caps and caps.prompts and caps.prompts.list_changed),
                resources_list_changed=bool(caps and caps.resources and caps.resources.list_changed),
            ) as subscription:
                if not subscription.honored.tools_list_changed:
                    return  # the server offers no tool-change events after all: the TTL rules
                conn.listening = True
                first.set()
                delay = _LISTEN_RETRY
                if reopened:
                    on_event("tools_changed", "")
                async for _event in subscription:
                    pass
                problem = "the server ended the change stream"
        except ListenNotSupportedError:
            return
        except (
            SubscriptionLost,
            MCPError,
            TimeoutError,
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
        ) as err:
            problem = f"change stream lost: {type(err).__name__}"
        finally:
            conn.listening = False
        first.set()
        if conn.closed.is_set():
            return
        on_event("listen_lost", problem)
        reopened = True
        with anyio.move_on_after(delay):
            await conn.closed.wait()
        delay = min(delay * 2, _LISTEN_RETRY_CAP)


class _LenientDispatcher(JSONRPCDispatcher[Any]):
    """The SDK's dispatcher, filling in the ``resultType`` a 2026-07-28 tools/call result lacks."""

    def __init__(self, *args: Any, on_event: Callable[[ConnectionEvent, str], None], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.protocol_version: Callable[[], str | None] = lambda: None
        # The direct POST of a plain tools/call at 2026-07-28 (streamable HTTP; see mcp_pool_svc.lean).
        self.lean: LeanPost | None = None
        self._on_event = on_event
        self._reported = False

    async def send_raw_request(
        self, method: str, params: Any, opts: Any = None, **kwargs: Any
    ) -> dict[str, Any]:
        if (
            isinstance(params, dict)
            and "_meta" in params
            and self.protocol_version() in MODERN_PROTOCOL_VERSIONS
        ):
            params = {**params, "_meta": without_host_capabilities(params["_meta"])}
        lean = self.lean
        if (
            lean is not None
            and not kwargs
            and lean.applies(method, opts)
            and self.protocol_version() in MODERN_PROTOCOL_VERSIONS
        ):
            raw = await lean.request(method, params, opts)
        else:
            raw = await super().send_raw_request(method, params, opts, **kwargs)
        if (
            method == "tools/call"
            and isinstance(raw, dict)
            and "resultType" not in raw
            and self.protocol_version() in MODERN_PROTOCOL_VERSIONS
        ):
            if not self._reported:
                self._reported = True
                self._on_event("lenient_result", "a tools/call result without resultType, read as complete")
            raw = {**raw, "resultType": "complete"}
        return raw


def _lean_post(
    config: StdioServerConfig | RemoteServerConfig,
    http_clients: HttpClients | None,
    auth: OAuthProvider | None,
    host: HostSession | None,
    relay: ObjectSendStream[tuple[contextvars.Context | None, SessionMessage | Exception]],
    closed: anyio.Event,
    on_event: Callable[[ConnectionEvent, str], None],
) -> LeanPost | None:
    """The lean path of a pooled streamable-HTTP session on a shared client (None for others)."""
    if (
        host is not None
        or auth is not None
        or http_clients is None
        or not isinstance(config, RemoteServerConfig)
        or config.resolved_transport != "streamable-http"
    ):
        return None

    async def deliver(message: SessionMessage) -> None:
        # As the transport hands a message over: with the context of the task that read it.
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):  # the connection is closing
            await relay.send((contextvars.copy_context(), message))

    def lost(detail: str) -> None:
        if not closed.is_set():
            closed.set()
            on_event("closed", detail)

    # With proxies in the environment the client routes by URL (its mounts): it sends every POST.
    direct = None if urllib.request.getproxies() else http_clients.transport(config)
    return LeanPost(
        http_clients.get(config),
        config.url,
        deliver,
        lost,
        direct,
        direct.inner if direct is not None else None,
        not_sent,
    )


def _client_session(
    dispatcher: _LenientDispatcher,
    router: CallRouter,
    host: HostSession | None,
    on_event: Callable[[ConnectionEvent, str], None],
) -> ClientSession:
    """The SDK session, whose callbacks route the server's requests to the call that caused them:
    all three for the pooled session, only the host's own for a session opened for its call."""
    declared = host.capabilities if host is not None else None
    return ClientSession(
        message_handler=_message_handler(on_event),
        client_info=_CLIENT_INFO,
        dispatcher=dispatcher,
        sampling_callback=router.sampling if declared is None or declared.sampling else None,
        elicitation_callback=router.elicitation if declared is None or declared.elicitation else None,
        list_roots_callback=router.list_roots if declared is None or declared.roots else None,
        logging_callback=router.logged,
        sampling_capabilities=declared.sampling if declared is not None else None,
    )


@asynccontextmanager
async def open_connection(
    config: StdioServerConfig | RemoteServerConfig,
    on_event: Callable[[ConnectionEvent, str], None],
    *,
    base_dir: Path,
    on_stderr: Callable[[str], None],
    max_line_bytes: int,
    http_clients: HttpClients | None = None,
    reaper: Reaper | None = None,
    auth: OAuthProvider | None = None,
    host: HostSession | None = None,
) -> AsyncIterator[Connection]:
    """Connects and negotiates (:func:`negotiate`) within ``config.connect_timeout``; a remote
    server is authorized with ``auth`` when given (OAuth 2.1, :mod:`toolscout_kit.oauth_client`).
    ``host``: a session for one host's call, which ``initialize``s (the handshake era) and declares
    exactly that host's sampling, elicitation and roots.

    Raises:
        toolscout_kit.oauth_approval.AuthorizationError: the server wants an authorization that failed.
        TimeoutError: the server did not answer ``server/discover`` or ``initialize`` in time.
        OSError: the command could not be started.
        mcp.MCPError: the server refused or closed the connection.
    """
    async with AsyncExitStack() as stack:
        # Not under fail_after: the transport's task group must not be entered inside a scope that
        # ends before it. Spawning is immediate and SSE's connect is bounded by its HTTP timeout.
        read, write = await stack.enter_async_context(
            _transport(
                config,
                on_event,
                base_dir=base_dir,
                on_stderr=on_stderr,
                max_line_bytes=max_line_bytes,
                http_clients=http_clients,
                reaper=reaper or Reaper(),
                auth=auth,
            )
        )
        relay_send, relay_recv = context_relay(16)
        stack.push_async_callback(relay_recv.aclose)
        closed = anyio.Event()
        tg = await stack.enter_async_context(anyio.create_task_group())
        tg.start_soon(_forward, read, relay_send, closed, on_event)
        # LIFO: the session exits first, then the forwarder is cancelled, then the transport closes.
        stack.callback(tg.cancel_scope.cancel)
        dispatcher = _LenientDispatcher(relay_recv, write, on_event=on_event)
        dispatcher.lean = _lean_post(config, http_clients, auth, host, relay_send, closed, on_event)
        # A host's own session carries that one call: every request on it is the call's.
        router = CallRouter(request_streams=host is None and transport_name(config) == "streamable-http")
        session = await stack.enter_async_context(_client_session(dispatcher, router, host, on_event))
        dispatcher.protocol_version = lambda: session.protocol_version
        with anyio.fail_after(config.connect_timeout):
            if host is None:
                await negotiate(session)
            else:
                await session.initialize()
        info = session.server_info
        conn = Connection(
            session=session,
            server_info=f"{info.name} {info.version}".strip() if info is not None else "",
            closed=closed,
            protocol_version=session.protocol_version or "",
            auth=auth,
            router=router,
        )
        conn.send_raw = dispatcher.send_raw_request
        caps = session.server_capabilities
        if conn.modern and caps is not None and caps.tools is not None and caps.tools.list_changed:
            # Its own task group, entered after the session: on the way out the change stream is
            # ended first, while the session can still say so, and only then the session closes.
            listening = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(listening.cancel_scope.cancel)
            subscribed = anyio.Event()
            listening.start_soon(_listen_for_changes, conn, on_event, subscribed)
            # Bounded: a server slow to open the stream is used meanwhile, with the TTL as before.
            with anyio.move_on_after(config.connect_timeout):
                await subscribed.wait()
        yield conn
