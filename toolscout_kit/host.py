"""The one service host: how every toolscout server starts, listens, reports, reloads and stops.

The three gRPC services and the MCP gateway (an HTTP server) run the same lifecycle, written here
once; what differs is only what they serve on, a :class:`Listener` (:mod:`toolscout_kit.server`
builds the gRPC one, the gateway its HTTP one):

- *listening*: the service's address is bound before anything answers, a taken or malformed
  address is a :class:`ConfigError` naming it (:func:`bind_socket` for HTTP, gRPC's own port
  binding for gRPC), and so is a metrics port that cannot be opened (:func:`open_metrics`);
- *ready*: gRPC services report per-service health (``set_status``); the gateway's ``/readyz``
  reads :attr:`RunningServer.stopping` and its own plan stream;
- *stop*, in order: the listener refuses new work (health NOT_SERVING, readiness false, endless
  streams end); it closes, giving the requests in flight the grace; the *drains* registered by the
  service run meanwhile and must finish a little before the grace ends (the pool answers its calls
  still running then with "outcome unknown"); the *cleanups* run last, newest first (the
  downstream clients, the tracer); then the metrics endpoint closes. An idle server stops at once;
- *signals*: :func:`serve_until_signal` runs a server until SIGTERM/SIGINT and applies the config
  file again on SIGHUP (the reload callbacks, e.g. a new pool shard count: see
  :mod:`toolscout_kit.service_clients` for the callers' side of a reshard).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol

from grpc_health.v1 import health, health_pb2
from prometheus_client import CollectorRegistry

from toolscout_kit.config import ToolscoutConfig
from toolscout_kit.errors import ConfigError
from toolscout_kit.logging import get_logger
from toolscout_kit.metrics import MetricsEndpoint, start_metrics_endpoint
from toolscout_kit.reload import ConfigReloader, Reload

__all__ = [
    "DRAIN_MARGIN",
    "Cleanup",
    "Drain",
    "Listener",
    "RunningServer",
    "bind_socket",
    "open_metrics",
    "serve_until_signal",
    "stop_on_signals",
]

_log = get_logger(__name__)

# Drains get the grace minus this, so that what they answer still reaches the caller before the
# listener cuts the requests left at the end of the grace (gRPC with UNAVAILABLE, "not sent").
DRAIN_MARGIN = 0.25

Cleanup = Callable[[], Awaitable[None]]
# Called at shutdown with the seconds left for in-flight work; must return within them.
Drain = Callable[[float], Awaitable[None]]


class Listener(Protocol):
    """What a server serves on: the gRPC server, or the gateway's HTTP server."""

    async def refuse(self) -> None:
        """Stops taking new work (health / readiness say so); the requests in flight go on."""

    async def close(self, grace: float) -> None:
        """Stops serving; the requests in flight get ``grace`` seconds."""

    async def closed(self) -> None:
        """Returns once serving has ended: closed, or failed on its own."""


class _MetricsSettings(Protocol):
    metrics_port: int
    metrics_host: str


def open_metrics(
    settings: _MetricsSettings, registry: CollectorRegistry, metrics_port: int | None
) -> MetricsEndpoint | None:
    """The service's Prometheus endpoint serving ``registry`` (None when the port is negative: off);
    ``metrics_port`` overrides the settings' (tests pass 0).

    Raises:
        ConfigError: the port cannot be bound.
    """
    wanted = settings.metrics_port if metrics_port is None else metrics_port
    if wanted < 0:
        return None
    try:
        return start_metrics_endpoint(settings.metrics_host, wanted, registry)
    except OSError as err:
        raise ConfigError(f"cannot serve metrics on {settings.metrics_host}:{wanted}: {err}") from None


def bind_socket(listen: str) -> socket.socket:
    """A listening, non-blocking TCP socket on ``host:port`` (``[v6]:port``; no host: 127.0.0.1).

    Raises:
        ConfigError: the address is malformed or taken.
    """
    host, _, port = listen.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    try:
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    except OSError as err:
        raise ConfigError(f"cannot listen on {listen}: {err}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted connections inherit it: a response's head and body are two writes, and Nagle's
        # algorithm would hold the body for the client's delayed ACK (~40 ms per request).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, int(port)))
        sock.listen(512)
        sock.setblocking(False)
    except (OSError, ValueError) as err:
        sock.close()
        raise ConfigError(f"cannot listen on {listen}: {err}") from None
    return sock


class RunningServer:
    """A started server. ``stop()`` is idempotent: drains, then cleanups, then the metrics endpoint.

    ``host`` and ``port`` are where it listens (``host`` as a client dials it: a wildcard address
    shows as 127.0.0.1). ``health`` is a gRPC server's health servicer (None for the gateway, whose
    probes are HTTP routes of its own).
    """

    def __init__(
        self,
        listener: Listener,
        *,
        port: int,
        registry: CollectorRegistry,
        metrics: MetricsEndpoint | None,
        shutdown_grace: float,
        host: str = "127.0.0.1",
        health: health.aio.HealthServicer | None = None,
        service_names: tuple[str, ...] = (),
    ) -> None:
        self._listener = listener
        shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host  # noqa: S104 - displayed, not bound
        self.host = f"[{shown}]" if ":" in shown else shown
        self.port = port
        # What this server's metrics endpoint serves (tests read figures from it).
        self.registry = registry
        self.metrics_port: int | None = metrics.port if metrics else None
        self._metrics = metrics
        self.shutdown_grace = shutdown_grace
        self.health = health
        self.service_names = service_names
        self.reloads: list[Reload] = []
        self._cleanups: list[Cleanup] = []
        self._drains: list[Drain] = []
        self._stopping = False
        self._stopped = asyncio.Event()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def stopping(self) -> bool:
        """Whether ``stop()`` has begun (a readiness probe answers "not ready" from then on)."""
        return self._stopping

    async def set_status(self, service: str, serving: bool) -> None:
        """Sets a gRPC server's health status of ``service`` (ignored once shutdown has started)."""
        if self.health is None:
            raise TypeError("this server has no gRPC health service")
        status = (
            health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        await self.health.set(service, status)

    def add_cleanup(self, cleanup: Cleanup) -> None:
        """Registers an async callback run after the listener closes (last added runs first)."""
        self._cleanups.append(cleanup)

    def add_drain(self, drain: Drain) -> None:
        """Registers ``drain(seconds)``, run at shutdown while the requests in flight finish."""
        self._drains.append(drain)

    def add_reload(self, reload: Reload) -> None:
        """Registers ``reload(config)``, run with the config file's new contents (see :mod:`toolscout_kit.reload`)."""
        self.reloads.append(reload)

    async def reload(self, config: ToolscoutConfig) -> None:
        """Applies ``config`` through the registered reload callbacks, in order."""
        for callback in self.reloads:
            await callback(config)

    async def stop(self, grace: float | None = None) -> None:
        """Refuses new work, gives the requests in flight ``grace`` seconds (the registered drains
        run meanwhile), then cleans up."""
        if self._stopping:
            await self._stopped.wait()
            return
        self._stopping = True
        grace = self.shutdown_grace if grace is None else grace
        await self._listener.refuse()
        closing = asyncio.ensure_future(self._listener.close(grace))
        if self._drains:
            budget = max(grace - DRAIN_MARGIN, 0.0)
            results = await asyncio.gather(*(drain(budget) for drain in self._drains), return_exceptions=True)
            for result in results:
                if isinstance(result, Exception):
                    _log.error("drain failed", exc_info=result)
        await closing
        for cleanup in reversed(self._cleanups):
            try:
                await cleanup()
            except Exception:
                _log.exception("cleanup failed")
        if self._metrics:
            self._metrics.close()
        self._stopped.set()

    async def wait_for_termination(self) -> None:
        """Returns once the server has stopped, or its listener has ended on its own (a failure:
        ``stop()`` still has to clean up)."""
        closed = asyncio.ensure_future(self._listener.closed())
        stopped = asyncio.ensure_future(self._stopped.wait())
        try:
            await asyncio.wait({closed, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (closed, stopped):
                task.cancel()


def stop_on_signals() -> asyncio.Event:
    """An event set by SIGTERM/SIGINT from now on: taken before a server is built, so that a signal
    arriving while it starts stops it gracefully instead of killing the process."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def serve_until_signal(
    server: RunningServer,
    *,
    config_path: Path | None = None,
    reload_interval: float = 0.0,
    stop: asyncio.Event | None = None,
) -> None:
    """Runs until SIGTERM/SIGINT, then stops gracefully (health NOT_SERVING first).

    With ``config_path`` and reload callbacks registered, the file is applied again on SIGHUP and
    when it changes (checked every ``reload_interval`` seconds; 0 = on SIGHUP only). ``stop``: the
    event of :func:`stop_on_signals` when it was taken before the server was built.
    """
    loop = asyncio.get_running_loop()
    stop = stop if stop is not None else stop_on_signals()
    reloader: asyncio.Task[None] | None = None
    if config_path is not None and server.reloads:
        watcher = ConfigReloader(config_path, [server.reload], interval=reload_interval)
        reloader = asyncio.create_task(watcher.run(), name="config-reloader")
    waiter = asyncio.create_task(server.wait_for_termination())
    signalled = asyncio.create_task(stop.wait())
    await asyncio.wait({waiter, signalled}, return_when=asyncio.FIRST_COMPLETED)
    if stop.is_set():
        _log.info("shutdown requested", grace_seconds=server.shutdown_grace)
    if reloader is not None:
        reloader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reloader
    await server.stop()
    for task in (waiter, signalled):
        task.cancel()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.remove_signal_handler(sig)
