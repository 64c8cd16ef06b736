"""Channels to toolscout services: retries, load balancing, keepalive, TLS and bearer tokens.

Every toolscout client (and every toolscout service calling another one) opens its channels
here, so the policies below are declared once:

* **Retries** on ``UNAVAILABLE`` only, declared in the channel's service config (gRPC retries the
  call itself, with exponential backoff and jitter), and only for methods without side effects
  (:data:`RETRIED_METHODS`: the List*, Watch*, PlanTools, SearchTools and GetManifest methods, and
  health checks). ``CallTool``, ``Chat`` and ``StreamChat`` are never replayed by a channel: the
  tool may already have run, and only the caller can decide whether running it again is safe (the
  pool answers ``ABORTED`` when a call was sent and its outcome is unknown, ``UNAVAILABLE`` when
  nothing was sent). A method not listed here is not retried, so a new method is safe by default.
  A server-streaming call (``WatchCatalog``) is only retried until its first response arrives:
  gRPC commits a call once the server has sent anything, so a stream is never replayed mid-body.
* **Load balancing** ``round_robin``: with a ``dns:///name:port`` target that resolves to several
  addresses (a headless Kubernetes Service), calls spread over every pod, and the client-side
  health check takes a pod out of rotation as soon as it reports NOT_SERVING (graceful shutdown).
* **Keepalive** pings so that a dead peer behind a silent load balancer is noticed.
* **TLS** and a **bearer token**. gRPC refuses call credentials on an insecure channel, so over
  plain TCP the token is attached by a client interceptor instead (use that only on trusted
  networks: the token then travels in clear text).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal, TypedDict, Unpack, overload

import grpc
import grpc.aio

from toolscout.client._version import __version__

__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "RETRIED_METHODS",
    "SERVICE_NAMES",
    "ChannelFields",
    "ChannelOption",
    "create_channel",
    "default_channel_options",
    "service_config",
]

ChannelOption = tuple[str, Any]

# Full names of the three services.
SERVICE_NAMES = (
    "toolscout.mcp_pool.v1.McpPool",
    "toolscout.discovery.v1.Discovery",
    "toolscout.orchestrator.v1.Orchestrator",
)
# The methods a channel may call again after UNAVAILABLE: they read, and repeating them changes
# nothing. Everything else (CallTool, Chat, StreamChat, any method added later) runs at most once.
RETRIED_METHODS: dict[str, tuple[str, ...]] = {
    "toolscout.mcp_pool.v1.McpPool": (
        "ListServers",
        "ListTools",
        "WatchCatalog",
        "ReadResult",
        "ListFeatures",
        "WatchFeatures",
    ),
    "toolscout.discovery.v1.Discovery": ("PlanTools", "SearchTools", "GetManifest", "WatchPlan"),
    "toolscout.orchestrator.v1.Orchestrator": ("ListModels", "ListToolsets"),
    "grpc.health.v1.Health": ("Check", "Watch"),
}
# gRPC caps maxAttempts at 5 (the first call included).
DEFAULT_MAX_ATTEMPTS = 5
_USER_AGENT = f"toolscout-client/{__version__}"
# Catalogs of tens of thousands of tools exceed gRPC's 4 MiB default.
_MAX_MESSAGE_BYTES = 64 * 1024 * 1024


def service_config(
    *,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    initial_backoff: float = 0.1,
    max_backoff: float = 2.0,
    backoff_multiplier: float = 2.0,
    load_balancing: str = "round_robin",
    health_check: bool = True,
) -> dict[str, Any]:
    """The gRPC service config every toolscout channel uses (as a dict; JSON-encode it for grpc).

    ``max_attempts`` counts the first call (1 disables retries; gRPC caps it at 5). Only the methods
    in :data:`RETRIED_METHODS` get the retry policy; every other method of the three services gets a
    method config without one (gRPC picks the most specific entry: method, then service).
    """
    if not 1 <= max_attempts <= 5:
        raise ValueError("max_attempts must be between 1 and 5 (gRPC's limit)")
    method_configs: list[dict[str, Any]] = [{"name": [{"service": name} for name in SERVICE_NAMES]}]
    if max_attempts > 1:
        method_configs.append(
            {
                "name": [
                    {"service": service, "method": method}
                    for service, methods in RETRIED_METHODS.items()
                    for method in methods
                ],
                "retryPolicy": {
                    "maxAttempts": max_attempts,
                    "initialBackoff": f"{initial_backoff}s",
                    "maxBackoff": f"{max_backoff}s",
                    "backoffMultiplier": backoff_multiplier,
                    "retryableStatusCodes": ["UNAVAILABLE"],
                },
            }
        )
    config: dict[str, Any] = {
        "loadBalancingConfig": [{load_balancing: {}}],
        "methodConfig": method_configs,
    }
    if health_check:
        # "" is the server's overall status, which toolscout servers set to NOT_SERVING on shutdown;
        # a server without the health service (UNIMPLEMENTED) is treated as healthy.
        config["healthCheckConfig"] = {"serviceName": ""}
    return config


def default_channel_options(
    *,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    keepalive_time_ms: int = 60_000,
    keepalive_timeout_ms: int = 20_000,
) -> list[ChannelOption]:
    """Channel arguments for ``create_channel``: service config, keepalive, message size, user agent."""
    return [
        ("grpc.service_config", json.dumps(service_config(max_attempts=max_attempts))),
        ("grpc.enable_retries", 1),
        # Pings only while calls are in flight: servers (gRPC's default policy) answer pings on an
        # idle connection sent more often than every 5 minutes with GOAWAY "too_many_pings".
        ("grpc.keepalive_time_ms", keepalive_time_ms),
        ("grpc.keepalive_timeout_ms", keepalive_timeout_ms),
        ("grpc.keepalive_permit_without_calls", 0),
        ("grpc.max_receive_message_length", _MAX_MESSAGE_BYTES),
        ("grpc.max_send_message_length", _MAX_MESSAGE_BYTES),
        ("grpc.primary_user_agent", _USER_AGENT),
        # Each channel connects on its own: gRPC otherwise shares connections between channels to
        # the same address, and a new channel would inherit another's failure and reconnect backoff,
        # so a call's "not reachable" could speak of an attempt made before the server was back.
        ("grpc.use_local_subchannel_pool", 1),
    ]


def _merge_options(defaults: Sequence[ChannelOption], extra: Sequence[ChannelOption]) -> list[ChannelOption]:
    # Later options win; grpc itself would keep the first occurrence of a duplicated key.
    merged = dict(defaults)
    merged.update(dict(extra))
    return list(merged.items())


def _bearer(token: str) -> tuple[str, str]:
    return ("authorization", f"Bearer {token}")


# --- bearer token over an insecure channel: interceptors ----------------------------------------


def _with_token_aio(details: Any, header: tuple[str, str]) -> Any:
    pairs = [(k, v) for k, v in (details.metadata or ()) if k != "authorization"]
    return details._replace(metadata=grpc.aio.Metadata(*pairs, header))


class _AioAuth:
    """Adds the bearer header to every call; grpc.aio takes one interceptor per kind of call."""

    def __init__(self, header: tuple[str, str]) -> None:
        self._header = header

    async def _continue(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(_with_token_aio(details, self._header), request)


class _AioUnaryUnaryAuth(_AioAuth, grpc.aio.UnaryUnaryClientInterceptor):
    async def intercept_unary_unary(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return await self._continue(continuation, client_call_details, request)


class _AioUnaryStreamAuth(_AioAuth, grpc.aio.UnaryStreamClientInterceptor):
    async def intercept_unary_stream(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return await self._continue(continuation, client_call_details, request)


class _AioStreamUnaryAuth(_AioAuth, grpc.aio.StreamUnaryClientInterceptor):
    async def intercept_stream_unary(
        self, continuation: Any, client_call_details: Any, request_iterator: Any
    ) -> Any:
        return await self._continue(continuation, client_call_details, request_iterator)


class _AioStreamStreamAuth(_AioAuth, grpc.aio.StreamStreamClientInterceptor):
    async def intercept_stream_stream(
        self, continuation: Any, client_call_details: Any, request_iterator: Any
    ) -> Any:
        return await self._continue(continuation, client_call_details, request_iterator)


def _aio_auth_interceptors(token: str) -> list[Any]:
    header = _bearer(token)
    return [
        _AioUnaryUnaryAuth(header),
        _AioUnaryStreamAuth(header),
        _AioStreamUnaryAuth(header),
        _AioStreamStreamAuth(header),
    ]


class _CallDetails(grpc.ClientCallDetails):
    def __init__(self, base: Any, metadata: list[tuple[str, str]]) -> None:
        self.method = base.method
        self.timeout = base.timeout
        self.metadata = metadata
        self.credentials = base.credentials
        self.wait_for_ready = getattr(base, "wait_for_ready", None)
        self.compression = getattr(base, "compression", None)


class _SyncAuth(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    def __init__(self, header: tuple[str, str]) -> None:
        self._header = header

    def _details(self, details: Any) -> _CallDetails:
        pairs = [(k, v) for k, v in (details.metadata or ()) if k != "authorization"]
        return _CallDetails(details, [*pairs, self._header])

    def intercept_unary_unary(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return continuation(self._details(client_call_details), request)

    def intercept_unary_stream(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return continuation(self._details(client_call_details), request)

    def intercept_stream_unary(
        self, continuation: Any, client_call_details: Any, request_iterator: Any
    ) -> Any:
        return continuation(self._details(client_call_details), request_iterator)

    def intercept_stream_stream(
        self, continuation: Any, client_call_details: Any, request_iterator: Any
    ) -> Any:
        return continuation(self._details(client_call_details), request_iterator)


# --- the one entry point ------------------------------------------------------------------------


class ChannelFields(TypedDict, total=False):
    """The channel's keyword arguments of :func:`create_channel` (besides ``aio``), as a type: the
    clients' ``connect`` take them too (their ``ConnectFields`` add ``deadlines``) and pass them on."""

    tls: bool
    root_certificates: bytes | None
    token: str | None
    options: Sequence[ChannelOption]
    max_attempts: int


@overload
def create_channel(
    target: str, *, aio: Literal[True] = ..., **fields: Unpack[ChannelFields]
) -> grpc.aio.Channel: ...


@overload
def create_channel(target: str, *, aio: Literal[False], **fields: Unpack[ChannelFields]) -> grpc.Channel: ...


def create_channel(
    target: str,
    *,
    tls: bool = False,
    root_certificates: bytes | None = None,
    token: str | None = None,
    aio: bool = True,
    options: Sequence[ChannelOption] = (),
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
) -> Any:
    """Open a channel to a toolscout service.

    Args:
        target: ``host:port``, ``dns:///host:port`` (use this for a headless Kubernetes Service so
            that round_robin sees every pod) or ``unix:/path``.
        tls: use TLS; the server certificate is verified against ``root_certificates`` (PEM) or
            the system's roots when ``None``.
        root_certificates: PEM CA bundle; implies ``tls``.
        token: bearer token sent as ``authorization: Bearer <token>`` on every call. With TLS it is
            a call credential; without TLS it is added by an interceptor.
        aio: ``True`` for a ``grpc.aio.Channel`` (async clients), ``False`` for a ``grpc.Channel``.
        options: extra channel arguments; they override the defaults of the same key.
        max_attempts: attempts per call on UNAVAILABLE, the first included (1 = no retries, max 5);
            only methods without side effects are retried (:data:`RETRIED_METHODS`).

    The channel connects lazily; close it (``await channel.close()`` / ``channel.close()``) when done.

    Raises:
        ValueError: ``max_attempts`` out of range, or an empty target.
    """
    if not target:
        raise ValueError("target must not be empty (expected host:port)")
    opts = _merge_options(default_channel_options(max_attempts=max_attempts), options)
    use_tls = tls or root_certificates is not None
    if use_tls:
        creds = grpc.ssl_channel_credentials(root_certificates=root_certificates)
        if token:
            creds = grpc.composite_channel_credentials(creds, grpc.access_token_call_credentials(token))
        if aio:
            return grpc.aio.secure_channel(target, creds, options=opts)
        return grpc.secure_channel(target, creds, options=opts)
    if aio:
        interceptors = _aio_auth_interceptors(token) if token else None
        return grpc.aio.insecure_channel(target, options=opts, interceptors=interceptors)
    channel = grpc.insecure_channel(target, options=opts)
    if token:
        return grpc.intercept_channel(channel, _SyncAuth(_bearer(token)))
    return channel
