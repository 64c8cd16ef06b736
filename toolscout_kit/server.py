"""Build, run and gracefully stop a toolscout ``grpc.aio`` server.

Every service gets the same plumbing: health (per-service status, NOT_SERVING once shutdown
starts), reflection listing every service, the observability / error / auth / decoding
interceptors, a Prometheus endpoint on its own port, optional TLS, and cleanup callbacks run after
the server stops.

Shutdown, in order: health turns NOT_SERVING; streams that never end on their own (health
``Watch`` and each binding's ``endless_streams``) end with UNAVAILABLE; gRPC stops accepting RPCs
and gives those in flight the grace; *drains* registered by the services run meanwhile and must
finish their RPCs a little before the grace ends (the pool answers its calls still running then
with "outcome unknown"); cleanups run last. An idle server therefore stops at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2
from prometheus_client import CollectorRegistry

from toolscout_kit.config import SecuritySettings, ToolscoutConfig
from toolscout_kit.errors import ConfigError
from toolscout_kit.interceptors import (
    AuthInterceptor,
    DecodeInterceptor,
    ErrorInterceptor,
    ObservabilityInterceptor,
    ShutdownInterceptor,
    TracingInterceptor,
)
from toolscout_kit.logging import get_logger
from toolscout_kit.metrics import GrpcServerMetrics, MetricsEndpoint, new_registry, start_metrics_endpoint
from toolscout_kit.reload import ConfigReloader, Reload
from toolscout_kit.tracing import NO_TRACING, Tracing

__all__ = [
    "REFLECTION_V1",
    "RunningServer",
    "ServiceBinding",
    "Serving",
    "serve_until_signal",
    "start_server",
    "stop_on_signals",
]

_log = get_logger(__name__)

# Server-side keepalive: clients may ping every 20 s; idle connections stay open.
_SERVER_OPTIONS = [
    # gRPC binds with SO_REUSEPORT by default: a second server on a taken port would start and
    # share its connections with the first instead of failing.
    ("grpc.so_reuseport", 0),
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
]


# Drains get the grace minus this, so that what they answer still reaches the caller before gRPC
# cancels the RPCs left at the end of the grace (with UNAVAILABLE, which means "not sent").
DRAIN_MARGIN = 0.25
_HEALTH_WATCH = "/grpc.health.v1.Health/Watch"
# grpcio-reflection serves only v1alpha; current grpcurl, Postman and grpcui ask v1 first.
REFLECTION_V1 = "grpc.reflection.v1.ServerReflection"
_REFLECTION_V1_FILE = "grpc/reflection/v1/reflection.proto"


def _register_reflection_v1_descriptor() -> None:
    """Adds grpc/reflection/v1/reflection.proto to the default pool, so that reflection can describe
    the v1 service it serves. v1 is v1alpha with a new package name: same messages, same fields."""
    pool = descriptor_pool.Default()
    try:
        pool.FindFileByName(_REFLECTION_V1_FILE)
        return
    except KeyError:
        pass
    proto = descriptor_pb2.FileDescriptorProto()
    reflection_pb2.DESCRIPTOR.CopyToProto(proto)
    proto.name = _REFLECTION_V1_FILE
    proto.package = "grpc.reflection.v1"
    old, new = ".grpc.reflection.v1alpha.", ".grpc.reflection.v1."
    for message in proto.message_type:
        for field in message.field:
            if field.HasField("type_name"):
                field.type_name = field.type_name.replace(old, new)
    for service in proto.service:
        for method in service.method:
            method.input_type = method.input_type.replace(old, new)
            method.output_type = method.output_type.replace(old, new)
    pool.Add(proto)


def _enable_reflection(service_names: Sequence[str], server: grpc.aio.Server) -> None:
    """Server reflection as ``grpc.reflection.v1`` and ``v1alpha``, one servicer behind both (the two
    are the same messages on the wire)."""
    _register_reflection_v1_descriptor()
    names = [*service_names, REFLECTION_V1, reflection.SERVICE_NAME]
    servicer = reflection.aio.ReflectionServicer(names)
    handler = grpc.stream_stream_rpc_method_handler(
        servicer.ServerReflectionInfo,
        request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
    )
    for service in (REFLECTION_V1, reflection.SERVICE_NAME):
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(service, {"ServerReflectionInfo": handler}),)
        )


@dataclass(frozen=True)
class ServiceBinding:
    """One gRPC service to host: its full name, the generated ``add_*_to_server`` and the servicer.

    ``endless_streams`` names its server-streaming methods that only end when the caller leaves
    (``WatchCatalog``): they are ended at shutdown instead of holding it up for the whole grace.
    """

    name: str
    add_to_server: Callable[[Any, grpc.aio.Server], None]
    servicer: object
    endless_streams: tuple[str, ...] = ()


class _ServiceSettings(Protocol):
    listen: str
    metrics_port: int
    metrics_host: str
    shutdown_grace: float


class Serving(Protocol):
    """What :func:`serve_until_signal` runs: a started server (gRPC, or the MCP gateway's HTTP)."""

    shutdown_grace: float
    reloads: list[Reload]

    async def reload(self, config: ToolscoutConfig) -> None: ...

    async def stop(self, grace: float | None = None) -> None: ...

    async def wait_for_termination(self) -> None: ...


Cleanup = Callable[[], Awaitable[None]]
# Called at shutdown with the seconds left for in-flight work; must return within them.
Drain = Callable[[float], Awaitable[None]]


class RunningServer:
    """A started server. ``stop()`` is idempotent and runs the registered cleanups."""

    def __init__(
        self,
        server: grpc.aio.Server,
        health_servicer: health.aio.HealthServicer,
        port: int,
        metrics: MetricsEndpoint | None,
        shutdown_grace: float,
        service_names: Sequence[str],
        registry: CollectorRegistry,
        shutdown: asyncio.Event,
    ) -> None:
        self._server = server
        # What this server's metrics endpoint serves (tests read figures from it).
        self.registry = registry
        self.health = health_servicer
        self.port = port
        self.metrics_port: int | None = metrics.port if metrics else None
        self._metrics = metrics
        self.shutdown_grace = shutdown_grace
        self.service_names = tuple(service_names)
        self._cleanups: list[Cleanup] = []
        self._drains: list[Drain] = []
        self.reloads: list[Reload] = []
        self._shutdown = shutdown
        self._stopped = asyncio.Event()
        self._stopping = False

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def set_status(self, service: str, serving: bool) -> None:
        """Sets the health status of ``service`` (ignored once shutdown has started)."""
        status = (
            health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        await self.health.set(service, status)

    def add_cleanup(self, cleanup: Cleanup) -> None:
        """Registers an async callback run after the gRPC server stops (last added runs first)."""
        self._cleanups.append(cleanup)

    def add_drain(self, drain: Drain) -> None:
        """Registers ``drain(seconds)``, run at shutdown while gRPC lets in-flight RPCs finish."""
        self._drains.append(drain)

    def add_reload(self, reload: Reload) -> None:
        """Registers ``reload(config)``, run with the config file's new contents (see :mod:`toolscout_kit.reload`)."""
        self.reloads.append(reload)

    async def reload(self, config: ToolscoutConfig) -> None:
        """Applies ``config`` through the registered reload callbacks, in order."""
        for callback in self.reloads:
            await callback(config)

    async def stop(self, grace: float | None = None) -> None:
        """Flips health to NOT_SERVING, ends endless streams, drains in-flight RPCs for ``grace``
        seconds (the registered drains run meanwhile), then cleans up."""
        if self._stopping:
            await self._stopped.wait()
            return
        self._stopping = True
        await self.health.enter_graceful_shutdown()
        # Let health watchers send NOT_SERVING before their streams end.
        await asyncio.sleep(0)
        self._shutdown.set()
        grace = self.shutdown_grace if grace is None else grace
        # gRPC refuses new RPCs from here on; the drains answer the ones still running in time.
        stopping = asyncio.ensure_future(self._server.stop(max(grace, DRAIN_MARGIN)))
        if self._drains:
            budget = max(grace - DRAIN_MARGIN, 0.0)
            results = await asyncio.gather(*(drain(budget) for drain in self._drains), return_exceptions=True)
            for result in results:
                if isinstance(result, Exception):
                    _log.error("drain failed", exc_info=result)
        await stopping
        for cleanup in reversed(self._cleanups):
            try:
                await cleanup()
            except Exception:
                _log.exception("cleanup failed")
        if self._metrics:
            self._metrics.close()
        self._stopped.set()

    async def wait_for_termination(self) -> None:
        await self._stopped.wait()


def _server_credentials(security: SecuritySettings) -> grpc.ServerCredentials | None:
    if not security.tls_cert_file:
        return None
    try:
        with open(security.tls_cert_file, "rb") as cert, open(security.tls_key_file or "", "rb") as key:
            return grpc.ssl_server_credentials([(key.read(), cert.read())])
    except OSError as err:
        raise ConfigError(f"TLS: cannot read {err.filename}: {err.strerror}") from None


async def _listen(
    server: grpc.aio.Server,
    address: str,
    security: SecuritySettings,
    settings: _ServiceSettings,
    registry: CollectorRegistry,
    metrics_port: int | None,
) -> tuple[int, MetricsEndpoint | None]:
    """Binds ``address``, starts serving, and opens the metrics endpoint; returns both ports' owners.

    Raises:
        ConfigError: the address or the metrics port cannot be bound, or TLS files cannot be read.
    """
    credentials = _server_credentials(security)
    try:
        port = (
            server.add_secure_port(address, credentials) if credentials else server.add_insecure_port(address)
        )
    except RuntimeError as err:
        raise ConfigError(f"cannot listen on {address}: {err}") from None
    await server.start()
    wanted_metrics = settings.metrics_port if metrics_port is None else metrics_port
    metrics = None
    if wanted_metrics >= 0:
        try:
            metrics = start_metrics_endpoint(settings.metrics_host, wanted_metrics, registry)
        except OSError as err:
            await server.stop(0)
            raise ConfigError(
                f"cannot serve metrics on {settings.metrics_host}:{wanted_metrics}: {err}"
            ) from None
    return port, metrics


async def start_server(
    bindings: Sequence[ServiceBinding],
    settings: _ServiceSettings,
    security: SecuritySettings,
    *,
    registry: CollectorRegistry | None = None,
    listen: str | None = None,
    metrics_port: int | None = None,
    tracing: Tracing = NO_TRACING,
) -> RunningServer:
    """Starts a server hosting ``bindings`` plus health and reflection.

    ``registry`` is the service's own (from :func:`new_registry`, with its metrics already
    registered); the gRPC server metrics join it and the metrics endpoint serves it. ``listen`` /
    ``metrics_port`` override the settings (tests pass ``127.0.0.1:0`` and 0). Every service starts
    SERVING; call ``set_status`` to report otherwise. With ``tracing`` on, every RPC but health,
    reflection and the endless streams gets a span, and the server's ``stop()`` sends the last ones.

    Raises:
        ConfigError: the address cannot be bound or TLS files cannot be read.
    """
    registry = registry if registry is not None else new_registry()
    shutdown = asyncio.Event()
    endless = frozenset(
        [_HEALTH_WATCH, *(f"/{b.name}/{method}" for b in bindings for method in b.endless_streams)]
    )
    interceptors: list[grpc.aio.ServerInterceptor] = []
    if tracing.enabled:
        # Outermost: the observability interceptor's log line and metrics carry the RPC's span.
        interceptors.append(TracingInterceptor(tracing, endless))
    interceptors.append(ObservabilityInterceptor(GrpcServerMetrics(registry)))
    token = os.environ.get(security.auth_token_env, "")
    if token:
        interceptors.append(AuthInterceptor(token))
    # Innermost last: requests are decoded only once authorized.
    interceptors += [ErrorInterceptor(), ShutdownInterceptor(shutdown, endless), DecodeInterceptor()]

    server = grpc.aio.server(interceptors=interceptors, options=_SERVER_OPTIONS)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    for binding in bindings:
        binding.add_to_server(binding.servicer, server)
    names = [b.name for b in bindings]
    _enable_reflection([*names, health.SERVICE_NAME], server)

    address = listen or settings.listen
    try:
        port, metrics = await _listen(server, address, security, settings, registry, metrics_port)
    except ConfigError:
        await tracing.shutdown()
        raise

    running = RunningServer(
        server, health_servicer, port, metrics, settings.shutdown_grace, names, registry, shutdown
    )
    running.add_cleanup(tracing.shutdown)  # the first added runs last: after the service's own
    await running.set_status("", True)
    for name in names:
        await running.set_status(name, True)
    _log.info(
        "server started",
        address=address,
        port=port,
        metrics_port=running.metrics_port,
        services=names,
        auth=bool(token),
    )
    return running


def stop_on_signals() -> asyncio.Event:
    """An event set by SIGTERM/SIGINT from now on: taken before a server is built, so that a signal
    arriving while it starts stops it gracefully instead of killing the process."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def serve_until_signal(
    server: Serving,
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
