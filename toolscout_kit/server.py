"""The gRPC side of the service host: a ``grpc.aio`` server run by :mod:`toolscout_kit.host`.

Every gRPC service gets the same plumbing: health (per-service status, NOT_SERVING once shutdown
starts), reflection listing every service, the observability / error / auth / decoding
interceptors, a Prometheus endpoint on its own port and optional TLS; the lifecycle (drains,
cleanups, reloads, signals) is the host's :class:`~toolscout_kit.host.RunningServer`.

Shutdown, in order: health turns NOT_SERVING; streams that never end on their own (health
``Watch`` and each binding's ``endless_streams``) end with UNAVAILABLE; gRPC stops accepting RPCs
and gives those in flight the grace; the host's drains run meanwhile; cleanups run last. An idle
server therefore stops at once.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_health.v1 import health, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2
from prometheus_client import CollectorRegistry

from toolscout_kit.config import SecuritySettings, ToolscoutConfig
from toolscout_kit.errors import ConfigError
from toolscout_kit.event_loop import loop_name
from toolscout_kit.host import (
    DRAIN_MARGIN,
    Cleanup,
    RunningServer,
    open_metrics,
    serve_until_signal,
    stop_on_signals,
)
from toolscout_kit.interceptors import (
    AuthInterceptor,
    DecodeInterceptor,
    ErrorInterceptor,
    InterceptorChain,
    Link,
    ObservabilityInterceptor,
    ShutdownInterceptor,
    TracingInterceptor,
)
from toolscout_kit.logging import get_logger
from toolscout_kit.metrics import MetricsEndpoint, grpc_server_metrics, new_registry
from toolscout_kit.tracing import NO_TRACING, Tracing, tracing_for

# RunningServer, serve_until_signal and stop_on_signals are the host's, re-exported for the
# gRPC services' callers.
__all__ = [
    "REFLECTION_V1",
    "RunningServer",
    "ServiceBinding",
    "ServiceStart",
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


class _GrpcListener:
    """The host's :class:`~toolscout_kit.host.Listener` for a ``grpc.aio`` server: refusing turns
    health NOT_SERVING and ends the endless streams; closing is gRPC's own graceful stop."""

    def __init__(
        self, server: grpc.aio.Server, health_servicer: health.aio.HealthServicer, shutdown: asyncio.Event
    ) -> None:
        self._server = server
        self._health = health_servicer
        self._shutdown = shutdown  # the ShutdownInterceptor ends the endless streams on it
        self._closed = asyncio.Event()

    async def refuse(self) -> None:
        await self._health.enter_graceful_shutdown()
        # Let health watchers send NOT_SERVING before their streams end.
        await asyncio.sleep(0)
        self._shutdown.set()

    async def close(self, grace: float) -> None:
        # gRPC refuses new RPCs from here on; the drains answer the ones still running in time.
        await self._server.stop(max(grace, DRAIN_MARGIN))
        self._closed.set()

    async def closed(self) -> None:
        await self._closed.wait()


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
    try:
        return port, open_metrics(settings, registry, metrics_port)
    except ConfigError:
        await server.stop(0)
        raise


def _interceptors(
    registry: CollectorRegistry,
    security: SecuritySettings,
    tracing: Tracing,
    shutdown: asyncio.Event,
    endless: frozenset[str],
) -> list[grpc.aio.ServerInterceptor]:
    interceptors: list[Link] = []
    if tracing.enabled:
        # Outermost: the observability interceptor's log line and metrics carry the RPC's span.
        interceptors.append(TracingInterceptor(tracing, endless))
    interceptors.append(ObservabilityInterceptor(grpc_server_metrics(registry)))
    token = os.environ.get(security.auth_token_env, "")
    if token:
        interceptors.append(AuthInterceptor(token))
    # Innermost last: requests are decoded only once authorized.
    interceptors += [ErrorInterceptor(), ShutdownInterceptor(shutdown, endless), DecodeInterceptor()]
    # One interceptor for gRPC, one wrapper per unary method (see InterceptorChain).
    return [InterceptorChain(interceptors)]


async def start_server(
    bindings: Sequence[ServiceBinding],
    settings: _ServiceSettings,
    security: SecuritySettings,
    *,
    registry: CollectorRegistry | None = None,
    listen: str | None = None,
    metrics_port: int | None = None,
    tracing: Tracing = NO_TRACING,
    undo: Sequence[Cleanup] = (),
) -> RunningServer:
    """Starts a server hosting ``bindings`` plus health and reflection.

    ``registry`` is the service's own (from :func:`new_registry`, with its metrics already
    registered); the gRPC server metrics join it and the metrics endpoint serves it. ``listen`` /
    ``metrics_port`` override the settings (tests pass ``127.0.0.1:0`` and 0). Every service starts
    SERVING; call ``set_status`` to report otherwise. With ``tracing`` on, every RPC but health,
    reflection and the endless streams gets a span, and the server's ``stop()`` sends the last ones.
    ``undo`` is what the service started before its server (the last first): it runs, and the
    tracer shuts down, when the server cannot start or the start is cancelled.

    Raises:
        ConfigError: the address cannot be bound or TLS files cannot be read.
    """
    registry = registry if registry is not None else new_registry()
    endless = frozenset(
        [_HEALTH_WATCH, *(f"/{b.name}/{method}" for b in bindings for method in b.endless_streams)]
    )
    health_servicer = health.aio.HealthServicer()
    shutdown = asyncio.Event()
    server = grpc.aio.server(
        interceptors=_interceptors(registry, security, tracing, shutdown, endless), options=_SERVER_OPTIONS
    )
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    for binding in bindings:
        binding.add_to_server(binding.servicer, server)
    names = [b.name for b in bindings]
    _enable_reflection([*names, health.SERVICE_NAME], server)

    address = listen or settings.listen
    try:
        port, metrics = await _listen(server, address, security, settings, registry, metrics_port)
    except BaseException:
        for cleanup in reversed(undo):
            await cleanup()
        await tracing.shutdown()
        raise

    running = RunningServer(
        _GrpcListener(server, health_servicer, shutdown),
        port=port,
        registry=registry,
        metrics=metrics,
        shutdown_grace=settings.shutdown_grace,
        health=health_servicer,
        service_names=tuple(names),
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
        auth=bool(os.environ.get(security.auth_token_env, "")),
        event_loop=loop_name(),
    )
    return running


class ServiceStart:
    """What each gRPC service's ``build_server`` starts from, written once: the service's own
    registry and tracing (made first, for the service's parts to use), and its server started on
    the config's settings for ``service`` or the caller's ``listen`` / ``metrics_port`` overrides.

    Raises (on construction):
        ConfigError: an ``OTEL_*`` variable holds a value toolscout cannot use.
    """

    def __init__(
        self,
        config: ToolscoutConfig,
        service: Literal["pool", "discovery", "orchestrator"],
        *,
        listen: str | None = None,
        metrics_port: int | None = None,
    ) -> None:
        self._config = config
        self._settings: _ServiceSettings = getattr(config.toolscout, service)
        self._listen = listen
        self._metrics_port = metrics_port
        self.registry = new_registry()
        self.tracing = tracing_for(config, service)

    async def serve(self, binding: ServiceBinding, *, undo: Sequence[Cleanup] = ()) -> RunningServer:
        """:func:`start_server` for ``binding`` with this service's settings, registry and tracing.

        Raises:
            ConfigError: the address cannot be bound or TLS files cannot be read.
        """
        return await start_server(
            [binding],
            self._settings,
            self._config.toolscout.security,
            registry=self.registry,
            listen=self._listen,
            metrics_port=self._metrics_port,
            tracing=self.tracing,
            undo=undo,
        )
