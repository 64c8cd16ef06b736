"""Wiring: config → client-library clients → endpoints, MCP handlers, HTTP front → uvicorn.

The gateway is an HTTP server (MCP's streamable HTTP), not a gRPC one; it shares the kit's config,
logging, metrics endpoint, channels and shard routing with the other services, and is run by the
kit's ``serve_until_signal`` like them. ``/healthz`` (serving) and ``/readyz`` are its probes.
Ready means the gateway can answer as the catalog is now: it is not stopping, it holds ``/mcp``'s
toolset plan, and its plan stream from discovery is open (so changes reach it and ``search_tools``
can be answered). While discovery is down ``/readyz`` answers 503, and a load balancer sends
clients to a replica that is ready; requests that still arrive are answered from the last plan.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import Sequence
from contextlib import AsyncExitStack
from typing import Any

import uvicorn
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from prometheus_client import CollectorRegistry
from toolscout.client import AsyncDiscoveryClient, AsyncOrchestratorClient, GatewayMode
from toolscout.client.sharded import AsyncShardedPoolClient
from uvicorn.protocols.http.h11_impl import H11Protocol

from mcp_gateway_svc.calls import ToolCaller
from mcp_gateway_svc.console import PREFIX as CONSOLE_PREFIX
from mcp_gateway_svc.console.app import Console
from mcp_gateway_svc.endpoints import Endpoints
from mcp_gateway_svc.front import STREAMING_META, GatewayFront, Guard, Tenants
from mcp_gateway_svc.handlers import McpHandlers
from mcp_gateway_svc.listing import ResultLimits
from mcp_gateway_svc.metrics import GatewayMetrics
from mcp_gateway_svc.peers import Forwarder, Replica
from mcp_gateway_svc.resource_server import OAuthResourceServer
from mcp_gateway_svc.results import KeptResults
from mcp_gateway_svc.sessions import SessionRegistry
from mcp_gateway_svc.user_login import UserLogin, has_per_user_servers
from toolscout_kit.channels import create_channel
from toolscout_kit.config import GatewaySettings, ToolscoutConfig
from toolscout_kit.errors import ConfigError
from toolscout_kit.logging import get_logger
from toolscout_kit.metrics import MetricsEndpoint, new_registry, start_metrics_endpoint
from toolscout_kit.preflight import GatewayAuth, gateway_auth
from toolscout_kit.reload import Reload
from toolscout_kit.server import Cleanup
from toolscout_kit.shards import ShardClients, server_placements, shard_targets, sharded_pool_client
from toolscout_kit.tracing import Tracing, tracing_for

__all__ = ["RunningGateway", "build_server"]

_log = get_logger(__name__)

# Seconds between sweeps for sessions the transport has ended for idleness.
_REAP_INTERVAL = 30.0
# Sessions being opened at once beyond gateway.max_sessions before the SDK itself refuses one.
_OPENING_MARGIN = 64
# Requests still running this close to the end of the grace are cut (their streams end).
_DRAIN_MARGIN = 0.25


class _Uvicorn(uvicorn.Server):
    """uvicorn without its own signal handling: the kit (or ``toolscout up``) owns the signals."""

    @contextlib.contextmanager
    def capture_signals(self):  # type: ignore[no-untyped-def]  # uvicorn's own signature is untyped
        yield


def _timed_http(seconds: float) -> type[H11Protocol]:
    """uvicorn's HTTP/1.1 protocol, closing a connection whose first request's headers have not
    all arrived within ``seconds`` (uvicorn times out idle keep-alive connections only; the body
    has its own timeout in the front)."""

    class _TimedH11(H11Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)  # type: ignore[arg-type]  # uvicorn's is a Transport
            self.loop.call_later(seconds, self._headers_due)

        def _headers_due(self) -> None:
            if self.cycle is None and not self.transport.is_closing():
                _log.info("connection dropped: its request headers did not arrive in time", timeout=seconds)
                self.transport.close()

    return _TimedH11


def _bind(listen: str) -> socket.socket:
    host, _, port = listen.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted connections inherit it: a response's head and body are two writes, and Nagle's
        # algorithm would hold the body for the client's delayed ACK (~40 ms per request).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, int(port)))
        sock.listen(512)
        sock.setblocking(False)
    except (OSError, ValueError) as err:
        raise ConfigError(f"cannot listen on {listen}: {err}") from None
    return sock


class RunningGateway:
    """A started gateway; ``stop()`` is idempotent."""

    def __init__(
        self,
        *,
        sock: socket.socket,
        server: _Uvicorn,
        managers: Sequence[StreamableHTTPSessionManager],
        front: GatewayFront,
        endpoints: Endpoints,
        sessions: SessionRegistry,
        metrics_endpoint: MetricsEndpoint | None,
        registry: CollectorRegistry,
        shutdown_grace: float,
        console: Console | None = None,
    ) -> None:
        host, port = sock.getsockname()[:2]
        self.port: int = port
        shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host  # noqa: S104 - displayed, not bound
        self.host = f"[{shown}]" if ":" in shown else shown
        self.registry = registry
        self.metrics_port: int | None = metrics_endpoint.port if metrics_endpoint else None
        self.shutdown_grace = shutdown_grace
        self.reloads: list[Reload] = []
        self.stopping = False
        self._sock = sock
        self._server = server
        self._managers = list(managers)
        self._front = front
        self._endpoints = endpoints
        self._sessions = sessions
        self._metrics_endpoint = metrics_endpoint
        self._console = console
        self._stop = asyncio.Event()
        self._stopped = asyncio.Event()
        self._started = asyncio.Event()
        self._cleanups: list[Cleanup] = []
        self._task = asyncio.create_task(self._run(), name="mcp-gateway")
        self._reaper = asyncio.create_task(self._reap(), name="mcp-gateway-reaper")

    @property
    def url(self) -> str:
        """The MCP endpoint of every tool (or the default toolset)."""
        return f"http://{self.host}:{self.port}/mcp"

    @property
    def address(self) -> str:
        return self.url

    @property
    def console_url(self) -> str | None:
        """The web console's address, None when it is off."""
        return f"http://{self.host}:{self.port}{CONSOLE_PREFIX}" if self._console is not None else None

    def toolset_url(self, toolset: str) -> str:
        return f"{self.url}/{toolset}"

    async def wait_started(self) -> None:
        await self._started.wait()

    async def _run(self) -> None:
        try:
            async with AsyncExitStack() as stack:
                for manager in self._managers:
                    await stack.enter_async_context(manager.run())
                serving = asyncio.create_task(self._server.serve(sockets=[self._sock]))
                self._started.set()
                stop = asyncio.create_task(self._stop.wait())
                await asyncio.wait({serving, stop}, return_when=asyncio.FIRST_COMPLETED)
                self._server.should_exit = True
            # The managers are closed: sessions ended, their GET streams with them.
            await serving
        except Exception:
            _log.exception("the gateway's HTTP server failed")
        finally:
            self._started.set()
            self._stopped.set()

    async def _reap(self) -> None:
        while True:
            await asyncio.sleep(_REAP_INTERVAL)
            self._sessions.reap()

    async def reload(self, config: ToolscoutConfig) -> None:
        for callback in self.reloads:
            await callback(config)

    async def stop(self, grace: float | None = None) -> None:
        """Stops answering (readiness first), lets requests in flight finish within ``grace``
        seconds, ends the sessions and their streams, then the server."""
        if self.stopping:
            await self._stopped.wait()
            return
        self.stopping = True
        grace = self.shutdown_grace if grace is None else grace
        self._server.config.timeout_graceful_shutdown = max(int(grace), 1)
        for endpoint in self._endpoints.opened():
            endpoint.listen.close()
        if self._console is not None:
            await self._console.close()  # its event streams end
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._front.idle.wait(), max(grace - _DRAIN_MARGIN, 0.0))
        self._stop.set()
        await self._stopped.wait()
        self._reaper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reaper
        await self._endpoints.close()
        for cleanup in reversed(self._cleanups):
            try:
                await cleanup()
            except Exception:
                _log.exception("cleanup failed")
        if self._metrics_endpoint is not None:
            self._metrics_endpoint.close()

    async def wait_for_termination(self) -> None:
        await self._stopped.wait()

    def add_cleanup(self, cleanup: Cleanup) -> None:
        self._cleanups.append(cleanup)

    def add_reload(self, reload: Reload) -> None:
        self.reloads.append(reload)


def _listen(
    address: str, settings: GatewaySettings, registry: CollectorRegistry, metrics_port: int | None
) -> tuple[socket.socket, MetricsEndpoint | None]:
    """The bound socket, and the metrics endpoint (None when off).

    Raises:
        ConfigError: the address or the metrics port cannot be bound.
    """
    sock = _bind(address)
    wanted = settings.metrics_port if metrics_port is None else metrics_port
    if wanted < 0:
        return sock, None
    try:
        return sock, start_metrics_endpoint(settings.metrics_host, wanted, registry)
    except OSError as err:
        sock.close()
        raise ConfigError(f"cannot serve metrics on {settings.metrics_host}:{wanted}: {err}") from None


def _managers(handlers: McpHandlers, settings: GatewaySettings) -> dict[str, StreamableHTTPSessionManager]:
    # The front checks Host and Origin itself (for both revisions alike); the SDK still checks the
    # Content-Type of every POST.
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    # meta: stateless, any replica answers any request; 2026-07-28 clients hear of changes on
    # subscriptions/listen.
    meta = StreamableHTTPSessionManager(
        app=handlers.server(resources=True),
        stateless=True,
        json_response=True,
        security_settings=security,
        max_request_body_size=settings.max_body_bytes,
    )

    def stateful(app: Any, json_response: bool) -> StreamableHTTPSessionManager:
        return StreamableHTTPSessionManager(
            app=app,
            stateless=False,
            json_response=json_response,
            security_settings=security,
            max_request_body_size=settings.max_body_bytes,
            session_idle_timeout=settings.session_idle_timeout,
            # A backstop only: the front ends idle sessions to stay under max_sessions (the margin
            # covers sessions being opened, which the front has not recorded yet).
            max_sessions=settings.max_sessions + _OPENING_MARGIN,
        )

    # meta, answering on an SSE stream: for a call whose host asked for progress (the front picks
    # it), so that the notifications have somewhere to go; every other request gets one JSON body.
    meta_stream = StreamableHTTPSessionManager(
        app=handlers.server(resources=True),
        stateless=True,
        json_response=False,
        security_settings=security,
        max_request_body_size=settings.max_body_bytes,
    )
    return {
        GatewayMode.META: meta,
        STREAMING_META: meta_stream,
        # A meta client that opens a session with initialize: list_changed on its stream.
        # Its answers are SSE streams, so that a call whose host asked for progress can carry it.
        "meta-sessions": stateful(handlers.server(resources=True), json_response=False),
        # progressive and all: sessions (handshake revisions), list_changed on their streams.
        GatewayMode.PROGRESSIVE: stateful(
            handlers.server(handshake_only=True, resources=True), json_response=False
        ),
        GatewayMode.ALL: stateful(handlers.server(), json_response=False),
    }


def _console(
    config: ToolscoutConfig,
    address: str,
    tenants: Tenants,
    pool: AsyncShardedPoolClient,
    discovery: AsyncDiscoveryClient,
    tracing: Tracing,
    orchestrator_target: str | None,
) -> tuple[Console | None, AsyncOrchestratorClient | None]:
    """The web console and the orchestrator client its chat uses, or (None, None) when it is off."""
    settings = config.toolscout.gateway
    if not settings.console_enabled(address):
        return None, None
    if not tenants.enabled and not GatewaySettings(console="auto").console_enabled(address):
        _log.warning(
            "the console is on outside loopback without gateway.tokens: anyone who reaches "
            "this port can see it",
            listen=address,
        )
    orchestrator = AsyncOrchestratorClient(
        create_channel(orchestrator_target or settings.orchestrator_target, config.toolscout.security),
        owns_channel=True,
    )
    console = Console(
        config=config,
        tenants=tenants,
        pool=pool,
        discovery=discovery,
        orchestrator=orchestrator,
        tracing=tracing,
    )
    return console, orchestrator


def _service_clients(
    config: ToolscoutConfig,
    pool_targets: Sequence[str] | None,
    pool_target: str | None,
    discovery_target: str | None,
) -> tuple[ShardClients, AsyncShardedPoolClient, AsyncDiscoveryClient]:
    """The clients of the pool (its shards) and of discovery the gateway calls."""
    settings, security = config.toolscout.gateway, config.toolscout.security
    targets = list(pool_targets) if pool_targets else shard_targets(config.toolscout.pool.shards)
    shard_clients = ShardClients(security)
    pool = sharded_pool_client(config, targets or [pool_target or settings.pool_target], shard_clients)
    discovery = AsyncDiscoveryClient(
        create_channel(discovery_target or settings.discovery_target, security), owns_channel=True
    )
    return shard_clients, pool, discovery


async def build_server(
    config: ToolscoutConfig,
    *,
    listen: str | None = None,
    metrics_port: int | None = None,
    discovery_target: str | None = None,
    pool_target: str | None = None,
    pool_targets: Sequence[str] | None = None,
    replica_id: str | None = None,
    orchestrator_target: str | None = None,
) -> RunningGateway:
    """Starts the gateway; the overrides replace the config's settings (tests use port 0).

    Raises:
        ConfigError: the address or metrics port cannot be bound, a token's variable is not set,
            the gateway would run open where it may not (see ``gateway_auth``), or the pool is
            sharded without shard addresses.
    """
    settings = config.toolscout.gateway
    address = listen or settings.listen
    auth = gateway_auth(config, os.environ, listen=address)
    tenants = Tenants(auth.tokens)
    tracing = tracing_for(config, "gateway")
    registry = new_registry()
    metrics = GatewayMetrics(registry)
    shard_clients, pool, discovery = _service_clients(config, pool_targets, pool_target, discovery_target)
    sessions = SessionRegistry(metrics, settings.session_idle_timeout)
    endpoints = Endpoints(
        toolsets={name: settings.mode_for(name) for name in config.tool_sets},
        default_toolset=settings.default_toolset,
        default_mode=settings.mode,
        discovery=discovery,
        sessions=sessions,
        metrics=metrics,
        limits=ResultLimits({name: server.max_result_size_chars for name, server in config.servers.items()}),
        descriptions={name: ts.description for name, ts in config.tool_sets.items()},
    )
    # per_user servers: each caller signs in at the gateway's login route (mcp_gateway_svc.user_login).
    user_login = UserLogin(config, os.environ) if has_per_user_servers(config) else None
    handlers = McpHandlers(
        discovery,
        ToolCaller(pool, metrics, user_login),
        metrics,
        private_lists=tenants.enabled or settings.oauth is not None,
        tracing=tracing,
        results=KeptResults(pool),
        result_budget=settings.result_budget_for,
    )
    managers = _managers(handlers, settings)
    replica = Replica(replica_id)
    forwarder = Forwarder(settings.peers, replica.id) if settings.peers else None
    try:
        sock, metrics_endpoint = _listen(address, settings, registry, metrics_port)
    except ConfigError:
        await tracing.shutdown()
        raise
    console, orchestrator = _console(config, address, tenants, pool, discovery, tracing, orchestrator_target)
    running: RunningGateway | None = None

    def ready() -> bool:
        if running is None or running.stopping:
            return False
        default = endpoints.get("")
        return default is not None and default.view is not None and default.following

    front = GatewayFront(
        endpoints=endpoints,
        managers=managers,
        sessions=sessions,
        tenants=tenants,
        guard=Guard.from_settings(address, settings.allowed_origins, settings.allowed_hosts),
        replica=replica,
        forwarder=forwarder,
        metrics=metrics,
        max_body_bytes=settings.max_body_bytes,
        read_timeout=settings.request_read_timeout,
        max_sessions=settings.max_sessions,
        tenant_quota=settings.max_sessions_per_tenant,
        ready=ready,
        oauth=OAuthResourceServer(settings.oauth) if settings.oauth is not None else None,
        console=console,
        client_modes=settings.client_modes,
        client_all_max_tools=settings.client_all_max_tools,
        login=user_login,
    )
    uv_config = uvicorn.Config(
        front,
        lifespan="off",
        log_level="warning",
        access_log=False,
        http=_timed_http(settings.request_read_timeout),
        timeout_graceful_shutdown=max(int(settings.shutdown_grace), 1),
    )
    running = RunningGateway(
        sock=sock,
        server=_Uvicorn(uv_config),
        managers=list(managers.values()),
        front=front,
        endpoints=endpoints,
        sessions=sessions,
        metrics_endpoint=metrics_endpoint,
        registry=registry,
        shutdown_grace=settings.shutdown_grace,
        console=console,
    )

    async def close_clients() -> None:
        if forwarder is not None:
            await forwarder.close()
        await pool.close()
        await shard_clients.close()
        await discovery.close()
        if orchestrator is not None:
            await orchestrator.close()

    running.add_cleanup(tracing.shutdown)  # the first added runs last
    running.add_cleanup(close_clients)
    if user_login is not None:
        running.add_cleanup(user_login.aclose)

    async def reshard(new_config: ToolscoutConfig) -> None:
        addresses = shard_targets(new_config.toolscout.pool.shards)
        if addresses is None:
            return
        unused = pool.reshard([shard_clients.get(a) for a in addresses], server_placements(new_config))
        await shard_clients.forget(unused)

    running.add_reload(reshard)
    endpoints.get("")  # follow /mcp's toolset from the start: /readyz reports discovery's answer
    await running.wait_started()
    _announce(running, auth, settings, replica)
    return running


def _announce(
    running: RunningGateway, auth: GatewayAuth, settings: GatewaySettings, replica: Replica
) -> None:
    """The start-up log lines: one WARNING whenever the gateway runs open, then where it listens."""
    if auth.open:
        _log.warning(
            "the gateway answers anyone who reaches it (no token is asked)",
            url=running.url,
            because=auth.open_because,
        )
    _log.info(
        "gateway started",
        url=running.url,
        metrics_port=running.metrics_port,
        mode=settings.mode,
        auth=not auth.open,
        replica=replica.id,
        console=running.console_url,
    )
