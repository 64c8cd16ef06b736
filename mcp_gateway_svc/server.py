"""Wiring: config → client-library clients → endpoints, MCP handlers, HTTP front → the kit's host.

The gateway is an HTTP server (MCP's streamable HTTP), not a gRPC one; it runs on the kit's service
host like the other services (:mod:`toolscout_kit.host`: listening, lifecycle, signals, reloads;
its HTTP listener is :mod:`toolscout_kit.http_server`) and calls them through the kit's downstream
clients (:mod:`toolscout_kit.service_clients`: the pool's shards, discovery, resharding). ``/healthz`` (serving) and ``/readyz`` are its probes.
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from prometheus_client import CollectorRegistry
from toolscout.client import AsyncDiscoveryClient, AsyncOrchestratorClient, GatewayMode

from mcp_gateway_svc.calls import ToolCaller
from mcp_gateway_svc.console import PREFIX as CONSOLE_PREFIX
from mcp_gateway_svc.console.app import Console
from mcp_gateway_svc.endpoints import Endpoints
from mcp_gateway_svc.front import STREAMING_META, GatewayFront, Guard, Tenants
from mcp_gateway_svc.handlers import McpHandlers
from mcp_gateway_svc.input_rounds import InputRounds
from mcp_gateway_svc.listing import ResultLimits
from mcp_gateway_svc.metrics import GatewayMetrics
from mcp_gateway_svc.peers import Forwarder, Replica
from mcp_gateway_svc.resource_server import OAuthResourceServer
from mcp_gateway_svc.results import KeptResults
from mcp_gateway_svc.server_features import ServedFeatures
from mcp_gateway_svc.sessions import SessionRegistry
from mcp_gateway_svc.user_login import UserLogin, has_per_user_servers
from mcp_gateway_svc.user_tools import UserToolViews
from toolscout_kit.channels import create_channel
from toolscout_kit.config import GatewaySettings, ToolscoutConfig
from toolscout_kit.errors import ConfigError
from toolscout_kit.event_loop import loop_name
from toolscout_kit.host import DRAIN_MARGIN, RunningServer, bind_socket, open_metrics
from toolscout_kit.http_server import HttpListener
from toolscout_kit.logging import get_logger
from toolscout_kit.metrics import MetricsEndpoint, new_registry
from toolscout_kit.preflight import GatewayAuth, gateway_auth
from toolscout_kit.service_clients import Downstream
from toolscout_kit.tracing import Tracing, tracing_for

__all__ = ["RunningGateway", "build_server"]

_log = get_logger(__name__)

# Seconds between sweeps for sessions the transport has ended for idleness.
_REAP_INTERVAL = 30.0
# Sessions being opened at once beyond gateway.max_sessions before the SDK itself refuses one.
_OPENING_MARGIN = 64


class RunningGateway(RunningServer):
    """The host's running server with the gateway's addresses (its lifecycle is the host's)."""

    def __init__(self, listener: HttpListener, sock: socket.socket, *, console: bool, **kw: Any) -> None:
        host, port = sock.getsockname()[:2]
        super().__init__(listener, host=host, port=port, **kw)
        self._console = console

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
        return f"http://{self.host}:{self.port}{CONSOLE_PREFIX}" if self._console else None

    def toolset_url(self, toolset: str) -> str:
        return f"{self.url}/{toolset}"


def _listen(
    address: str, settings: GatewaySettings, registry: CollectorRegistry, metrics_port: int | None
) -> tuple[socket.socket, MetricsEndpoint | None]:
    """The bound socket, and the metrics endpoint (None when off).

    Raises:
        ConfigError: the address or the metrics port cannot be bound.
    """
    sock = bind_socket(address)
    try:
        return sock, open_metrics(settings, registry, metrics_port)
    except ConfigError:
        sock.close()
        raise


def _managers(handlers: McpHandlers, settings: GatewaySettings) -> dict[str, StreamableHTTPSessionManager]:
    # The front checks Host and Origin itself (for both revisions alike); the SDK still checks the
    # Content-Type of every POST.
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)

    def stateless(json_response: bool) -> StreamableHTTPSessionManager:
        return StreamableHTTPSessionManager(
            app=handlers.server(resources=True),
            stateless=True,
            json_response=json_response,
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

    return {
        # meta: stateless, any replica answers any request; 2026-07-28 clients hear of changes on
        # subscriptions/listen.
        GatewayMode.META: stateless(json_response=True),
        # meta, answering on an SSE stream: for a call whose host asked for progress (the front
        # picks it), so that the notifications have somewhere to go; every other request gets one
        # JSON body.
        STREAMING_META: stateless(json_response=False),
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
    downstream: Downstream,
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
        pool=downstream.pool,
        discovery=downstream.discovery,
        orchestrator=orchestrator,
        tracing=tracing,
    )
    return console, orchestrator


def _endpoints(
    config: ToolscoutConfig,
    discovery: AsyncDiscoveryClient,
    sessions: SessionRegistry,
    metrics: GatewayMetrics,
) -> Endpoints:
    """``/mcp`` and ``/mcp/<toolset>``: each toolset's mode, plan and limits."""
    settings = config.toolscout.gateway
    return Endpoints(
        toolsets={name: settings.mode_for(name) for name in config.tool_sets},
        default_toolset=settings.default_toolset,
        default_mode=settings.mode,
        discovery=discovery,
        sessions=sessions,
        metrics=metrics,
        limits=ResultLimits({name: server.max_result_size_chars for name, server in config.servers.items()}),
        descriptions={name: ts.description for name, ts in config.tool_sets.items()},
    )


def _handlers(
    config: ToolscoutConfig,
    downstream: Downstream,
    metrics: GatewayMetrics,
    tenants: Tenants,
    tracing: Tracing,
    user_login: UserLogin | None,
    endpoints: Endpoints,
    sessions: SessionRegistry,
) -> McpHandlers:
    """The MCP request handlers: MCP in, client-library calls out."""
    settings = config.toolscout.gateway
    # One key seals every input_required round (tools, reads, prompts) of this replica.
    rounds = InputRounds(os.environ)
    return McpHandlers(
        downstream.discovery,
        ToolCaller(downstream.pool, metrics, user_login, rounds),
        metrics,
        private_lists=tenants.enabled or settings.oauth is not None,
        tracing=tracing,
        results=KeptResults(downstream.pool),
        result_budget=settings.result_budget_for,
        # What the servers offer besides tools, followed from the pool (from the first request on).
        features=ServedFeatures(downstream.pool, config, endpoints, sessions, rounds),
        # per_user servers: each caller's tools are those the server lists to them.
        user_tools=UserToolViews(downstream.pool, config) if user_login is not None else None,
        user_login=user_login,
    )


@dataclass(frozen=True)
class _FrontParts:
    """What the HTTP front hands requests to, besides the endpoints' MCP managers."""

    endpoints: Endpoints
    sessions: SessionRegistry
    tenants: Tenants
    metrics: GatewayMetrics
    replica: Replica
    forwarder: Forwarder | None
    login: UserLogin | None
    console: Console | None


def _front(
    settings: GatewaySettings,
    address: str,
    parts: _FrontParts,
    managers: dict[str, StreamableHTTPSessionManager],
    ready: Callable[[], bool],
    handlers: McpHandlers,
) -> GatewayFront:
    return GatewayFront(
        endpoints=parts.endpoints,
        managers=managers,
        sessions=parts.sessions,
        tenants=parts.tenants,
        guard=Guard.from_settings(address, settings.allowed_origins, settings.allowed_hosts),
        replica=parts.replica,
        forwarder=parts.forwarder,
        metrics=parts.metrics,
        max_body_bytes=settings.max_body_bytes,
        read_timeout=settings.request_read_timeout,
        max_sessions=settings.max_sessions,
        tenant_quota=settings.max_sessions_per_tenant,
        ready=ready,
        oauth=(
            OAuthResourceServer(settings.oauth, metrics=parts.metrics) if settings.oauth is not None else None
        ),
        console=parts.console,
        client_modes=settings.client_modes,
        client_all_max_tools=settings.client_all_max_tools,
        login=parts.login,
        # A plain tools/call is answered without the SDK transport's per-request machinery.
        lean=handlers,
    )


def _listener(
    settings: GatewaySettings,
    sock: socket.socket,
    front: GatewayFront,
    managers: dict[str, StreamableHTTPSessionManager],
    parts: _FrontParts,
    handlers: McpHandlers,
) -> HttpListener:
    async def refuse() -> None:
        for endpoint in parts.endpoints.opened():
            endpoint.listen.close()
        if parts.console is not None:
            await parts.console.close()  # its event streams end

    async def end_requests() -> None:
        # The grace is over: a tool call or a console chat still running is cancelled and answered
        # that its outcome is unknown; any other request still running is ended after that, and
        # new ones refused.
        calls = handlers.end_calls()
        chats = parts.console.chat.end_turns() if parts.console is not None else 0
        if calls or chats:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(front.idle.wait(), DRAIN_MARGIN)
        requests = front.end_requests()
        if calls or chats or requests:
            _log.warning(
                "the shutdown grace is over: ended the requests still running",
                grace_seconds=settings.shutdown_grace,
                tool_calls=calls,
                console_chats=chats,
                other_requests=requests,
            )

    return HttpListener(
        front,
        sock,
        read_timeout=settings.request_read_timeout,
        shutdown_grace=settings.shutdown_grace,
        idle=front.idle,
        lifespans=[manager.run() for manager in managers.values()],
        on_refuse=[refuse],
        end_requests=end_requests,
    )


def _sweep_sessions(running: RunningGateway, sessions: SessionRegistry) -> None:
    """Sweeps the sessions the transport has ended for idleness, until the gateway stops."""

    async def reap() -> None:
        while True:
            await asyncio.sleep(_REAP_INTERVAL)
            sessions.reap()

    reaper = asyncio.create_task(reap(), name="mcp-gateway-reaper")

    async def stop() -> None:
        reaper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reaper

    running.add_cleanup(stop)


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
    downstream = Downstream(
        config,
        "the gateway",
        pool_target=pool_target or settings.pool_target,
        discovery_target=discovery_target or settings.discovery_target,
        pool_targets=pool_targets,
    )
    sessions = SessionRegistry(metrics, settings.session_idle_timeout)
    # per_user servers: each caller signs in at the gateway's login route (mcp_gateway_svc.user_login).
    user_login = UserLogin(config, os.environ) if has_per_user_servers(config) else None
    endpoints = _endpoints(config, downstream.discovery, sessions, metrics)
    handlers = _handlers(config, downstream, metrics, tenants, tracing, user_login, endpoints, sessions)
    managers = _managers(handlers, settings)
    replica = Replica(replica_id)
    forwarder = Forwarder(settings.peers, replica.id) if settings.peers else None
    try:
        sock, metrics_endpoint = _listen(address, settings, registry, metrics_port)
    except ConfigError:
        await tracing.shutdown()
        raise
    console, orchestrator = _console(config, address, tenants, downstream, tracing, orchestrator_target)
    parts = _FrontParts(endpoints, sessions, tenants, metrics, replica, forwarder, user_login, console)
    running: RunningGateway | None = None

    def ready() -> bool:
        if running is None or running.stopping:
            return False
        default = endpoints.get("")
        return default is not None and default.view is not None and default.following

    front = _front(settings, address, parts, managers, ready, handlers)
    listener = _listener(settings, sock, front, managers, parts, handlers)
    running = RunningGateway(
        listener,
        sock,
        console=console is not None,
        registry=registry,
        metrics=metrics_endpoint,
        shutdown_grace=settings.shutdown_grace,
    )
    _add_cleanups(running, tracing, downstream, orchestrator, parts, handlers)
    running.add_reload(downstream.reshard)
    endpoints.get("")  # follow /mcp's toolset from the start: /readyz reports discovery's answer
    await listener.start()
    _sweep_sessions(running, sessions)
    _announce(running, auth, settings, replica)
    return running


def _add_cleanups(
    running: RunningGateway,
    tracing: Tracing,
    downstream: Downstream,
    orchestrator: AsyncOrchestratorClient | None,
    parts: _FrontParts,
    handlers: McpHandlers,
) -> None:
    """What the gateway closes once its HTTP server has stopped (the last added runs first)."""

    async def close_clients() -> None:
        await handlers.close()
        if parts.forwarder is not None:
            await parts.forwarder.close()
        await downstream.close()
        if orchestrator is not None:
            await orchestrator.close()

    running.add_cleanup(tracing.shutdown)
    running.add_cleanup(close_clients)
    if parts.login is not None:
        running.add_cleanup(parts.login.aclose)
    running.add_cleanup(parts.endpoints.close)


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
        event_loop=loop_name(),
    )
