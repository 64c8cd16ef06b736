"""Server interceptors: tracing, observability, error translation, auth, request decoding, stream
shutdown.

Each says what it does around a method's behaviour as :class:`~toolscout_kit.interceptor_chain.Hooks`
(work before it, after it, around each unit of it), and
:class:`~toolscout_kit.interceptor_chain.InterceptorChain` runs them all as one interceptor
(:mod:`toolscout_kit.interceptor_chain`: the wrapping machinery). The order in
:func:`toolscout_kit.server.start_server` matters: tracing is outermost
(the RPC's log lines and metrics carry its span), requests are decoded by the innermost one
(:class:`DecodeInterceptor`), so a request without a valid token is refused before its bytes are
parsed, and a malformed one gets INVALID_ARGUMENT with a fixed message instead of gRPC's UNKNOWN
with a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import time
from collections.abc import Awaitable
from typing import Any

import grpc
from opentelemetry.context import Context, attach, detach
from opentelemetry.trace import SpanKind, StatusCode, set_span_in_context
from toolscout.client import SERVICE_STATUS_METADATA

from toolscout_kit.interceptor_chain import (
    Deserializer,
    Hooks,
    InterceptorChain,
    Link,
)
from toolscout_kit.logging import begin_request, end_request, get_logger, logs_at
from toolscout_kit.metrics import GrpcServerMetrics
from toolscout_kit.status import reply_status
from toolscout_kit.tracing import Tracing, exemplar, extract_context

__all__ = [
    "MALFORMED_REQUEST_MESSAGE",
    "OPEN_METHOD_PREFIXES",
    "SHUTDOWN_MESSAGE",
    "TOKEN_FREE_PREFIXES",
    "AuthInterceptor",
    "DecodeInterceptor",
    "ErrorInterceptor",
    "InterceptorChain",
    "Link",
    "ObservabilityInterceptor",
    "RpcRecord",
    "ShutdownInterceptor",
    "TracingInterceptor",
]

_log = get_logger(__name__)

# Health and reflection: plumbing, not traced or logged per call.
OPEN_METHOD_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")
# Only health answers without the token (kubelet and load-balancer probes carry none); reflection
# describes every method and message of the API, so it needs the token like the API itself
# (grpcurl -H 'authorization: Bearer …').
TOKEN_FREE_PREFIXES = ("/grpc.health.v1.Health/",)

# Fixed: the reply to a malformed request names no parser and no exception.
MALFORMED_REQUEST_MESSAGE = "malformed request: not a valid protobuf message for this method"
SHUTDOWN_MESSAGE = "the server is shutting down; reconnect to continue"


def _split(method: str) -> tuple[str, str]:
    service, _, name = method.lstrip("/").rpartition("/")
    return service, name


def _code_of(context: grpc.aio.ServicerContext, exc: BaseException | None) -> grpc.StatusCode:
    """The status an RPC ended with (``exc``: what its behaviour raised, if anything)."""
    if isinstance(exc, asyncio.CancelledError):
        return grpc.StatusCode.CANCELLED
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return code
    return grpc.StatusCode.UNKNOWN if exc is not None else grpc.StatusCode.OK


# gRPC codes that mark a server span as failed (OpenTelemetry's RPC conventions): the others are
# the caller's doing (bad input, not found, cancelled) or an answer (ABORTED: outcome unknown).
_SERVER_ERRORS = frozenset(
    {
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DATA_LOSS,
    }
)


class TracingInterceptor(Link):
    """One SERVER span per RPC (OpenTelemetry's RPC conventions), continuing the caller's W3C trace
    context from the request metadata. Installed outermost, so that the log lines and metrics of
    the RPC carry it. Health, reflection and endless streams (watches) are not traced."""

    def __init__(self, tracing: Tracing, untraced: frozenset[str] = frozenset()) -> None:
        super().__init__()
        self._tracing = tracing
        self._untraced = untraced

    def _hooks(self, method: str, deserializer: Deserializer) -> Hooks | None:
        if method.startswith(OPEN_METHOD_PREFIXES) or method in self._untraced:
            return None
        name = method.lstrip("/")
        attributes = {"rpc.system.name": "grpc", "rpc.method": name}
        tracing = self._tracing
        root = Context()

        async def enter(request: Any, context: grpc.aio.ServicerContext) -> tuple[Any, Any]:
            parent = extract_context(context.invocation_metadata()) or root
            span = tracing.start(name, kind=SpanKind.SERVER, attributes=attributes, parent=parent)
            token = attach(set_span_in_context(span, parent))
            return request, (span, token)

        async def leave(context: grpc.aio.ServicerContext, state: Any, exc: BaseException | None) -> bool:
            span, token = state
            code = _code_of(context, exc)
            span.set_attribute("rpc.response.status_code", code.name)
            if code in _SERVER_ERRORS:
                span.set_attribute("error.type", code.name)
                span.set_status(StatusCode.ERROR)
            detach(token)
            span.end()
            return False

        return Hooks(enter=enter, leave=leave)


class RpcRecord:
    """One method's share of the gRPC server metrics and its ``rpc`` log line: what the
    observability interceptor records for each RPC, and a servicer for each call it runs on a
    stream of its own (the pool's ``CallToolStream`` records each call as a ``CallTool``). The
    counter's child per status code is looked up once."""

    def __init__(self, metrics: GrpcServerMetrics, method: str) -> None:
        self._service, self._name = _split(method)
        self._handled = metrics.handled
        self._by_code: dict[grpc.StatusCode, Any] = {}
        self._seconds = metrics.handling_seconds.labels(self._service, self._name)
        self._logged = not method.startswith(OPEN_METHOD_PREFIXES)

    def count(self, code: grpc.StatusCode, elapsed: float) -> None:
        counter = self._by_code.get(code)
        if counter is None:
            counter = self._by_code[code] = self._handled.labels(self._service, self._name, code.name)
        counter.inc()
        self._seconds.observe(elapsed, exemplar())

    def log(self, code: grpc.StatusCode, elapsed: float, **fields: Any) -> None:
        if not self._logged:
            return
        # Successful RPCs are counted in metrics; a log line each would cost more than the RPC
        # itself on hot paths (search, calls), so they are DEBUG. Failures are INFO.
        if code != grpc.StatusCode.OK:
            _log.info("rpc", code=code.name, duration_ms=round(elapsed * 1000, 3), **fields)
        elif logs_at(logging.DEBUG):
            _log.debug("rpc", code=code.name, duration_ms=round(elapsed * 1000, 3), **fields)


class ObservabilityInterceptor(Link):
    """Binds request id + method to the log context and records the gRPC server metrics
    (:class:`RpcRecord`).

    The request id is the caller's ``x-request-id``, else one made when a log line first needs it
    (:class:`~toolscout_kit.logging.RequestContext`)."""

    def __init__(self, metrics: GrpcServerMetrics) -> None:
        super().__init__()
        self._metrics = metrics

    def _hooks(self, method: str, deserializer: Deserializer) -> Hooks | None:
        record = RpcRecord(self._metrics, method)

        async def enter(request: Any, context: grpc.aio.ServicerContext) -> tuple[Any, Any]:
            request_id = ""
            for key, value in context.invocation_metadata() or ():
                if key == "x-request-id":
                    request_id = str(value)
                    break
            token = begin_request(request_id, method)
            return request, (time.perf_counter(), token)

        async def leave(context: grpc.aio.ServicerContext, state: Any, exc: BaseException | None) -> bool:
            started, token = state
            code = _code_of(context, exc)
            elapsed = time.perf_counter() - started
            record.count(code, elapsed)
            record.log(code, elapsed)
            end_request(token)
            return False

        return Hooks(enter=enter, leave=leave)


def _caller_gone(context: grpc.aio.ServicerContext, exc: Exception) -> bool:
    """The call cannot be answered any more: it was cancelled (the caller left), or gRPC's transport
    failed to send on it (``grpc.aio.InternalError``: the connection went away, e.g. at shutdown).
    Writing to it or aborting it would fail again, and neither is a bug worth a traceback."""
    if not (context.cancelled() or isinstance(exc, grpc.aio.InternalError)):
        return False
    _log.debug("rpc ended after its caller left", error=type(exc).__name__)
    return True


def _marked(context: grpc.aio.ServicerContext) -> tuple[tuple[str, str | bytes], ...]:
    """The trailing metadata the handler set (a pool's "not sent", a shard's owners), plus the mark
    that says this status and its details come from a toolscout service, not from gRPC's transport."""
    return (*tuple(context.trailing_metadata() or ()), *SERVICE_STATUS_METADATA)


async def _abort_for(exc: Exception, context: grpc.aio.ServicerContext) -> None:
    code, details = reply_status(exc)
    await context.abort(code, details, trailing_metadata=_marked(context))


class ErrorInterceptor(Link):
    """Turns domain errors into their status code; anything else into a generic INTERNAL."""

    def _hooks(self, method: str, deserializer: Deserializer) -> Hooks | None:
        return Hooks(leave=_translate)


async def _translate(context: grpc.aio.ServicerContext, state: Any, exc: BaseException | None) -> bool:
    # Cancellation, GeneratorExit and aborts (already a status) pass through as they are.
    if not isinstance(exc, Exception) or isinstance(exc, grpc.aio.AbortError):
        return False
    if _caller_gone(context, exc):
        return True
    await _abort_for(exc, context)
    return False  # unreachable: abort raises


class AuthInterceptor(Link):
    """Requires ``authorization: Bearer <token>`` on every RPC except health's."""

    def __init__(self, token: str) -> None:
        super().__init__()
        self._expected = f"Bearer {token}".encode()

    def _authorized(self, context: grpc.aio.ServicerContext) -> bool:
        for key, value in context.invocation_metadata() or ():
            if key == "authorization":
                given = value.encode() if isinstance(value, str) else bytes(value)
                return hmac.compare_digest(given, self._expected)
        return False

    def _hooks(self, method: str, deserializer: Deserializer) -> Hooks | None:
        if method.startswith(TOKEN_FREE_PREFIXES):
            return None

        async def enter(request: Any, context: grpc.aio.ServicerContext) -> tuple[Any, Any]:
            if not self._authorized(context):
                await context.abort(
                    grpc.StatusCode.UNAUTHENTICATED,
                    "missing or invalid bearer token",
                    trailing_metadata=_marked(context),
                )
            return request, None

        return Hooks(enter=enter)


class DecodeInterceptor(Link):
    """Decodes unary requests itself: a malformed one gets INVALID_ARGUMENT with a fixed message.

    Installed innermost, so the interceptors outside it (auth above all) run before any byte of
    the request is parsed. Client-streaming methods (none in toolscout) keep gRPC's decoding.
    """

    decodes = True

    def _hooks(self, method: str, deserializer: Deserializer) -> Hooks | None:
        if deserializer is None:
            return None
        parse = deserializer

        async def enter(raw: Any, context: grpc.aio.ServicerContext) -> tuple[Any, Any]:
            try:
                return parse(raw), None
            except Exception:
                # Any parser error: the bytes are not this method's message. No traceback, no log
                # line of our own (the observability interceptor logs the RPC with its code).
                await context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    MALFORMED_REQUEST_MESSAGE,
                    trailing_metadata=_marked(context),
                )
                raise  # unreachable: abort raises

        return Hooks(enter=enter)


class ShutdownInterceptor(Link):
    """Ends server streams that never end on their own (watches) once ``shutdown`` is set.

    Graceful shutdown waits for RPCs in flight; a ``WatchCatalog`` or health ``Watch`` stream is
    always in flight, so without this every shutdown would wait out its whole grace. The stream
    ends with UNAVAILABLE, which tells the client to reconnect (to another replica, or later).
    """

    def __init__(self, shutdown: asyncio.Event, methods: frozenset[str]) -> None:
        super().__init__()
        self._shutdown = shutdown
        self._methods = methods

    def _hooks(self, method: str, deserializer: Deserializer) -> Hooks | None:
        if method not in self._methods:
            return None
        shutdown = self._shutdown

        async def until_shutdown(work: Awaitable[Any], context: grpc.aio.ServicerContext) -> Any:
            task = asyncio.ensure_future(work)
            stop = asyncio.ensure_future(shutdown.wait())
            try:
                await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                # Also when this RPC itself is cancelled (the caller left): nothing keeps running.
                stop.cancel()
                if not task.done():
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
                elif not task.cancelled():
                    # Read here too: when this RPC itself was cancelled, nothing below reads it.
                    task.exception()
            if not task.cancelled():
                return task.result()
            if context.cancelled():
                return None  # the caller is gone already: nobody to tell
            try:
                await context.abort(
                    grpc.StatusCode.UNAVAILABLE, SHUTDOWN_MESSAGE, trailing_metadata=_marked(context)
                )
            except grpc.aio.InternalError:
                return None  # the connection is gone: the status cannot be sent
            return None  # unreachable: abort raises

        # Each item of a stream (and a streaming method written with context.write, such as
        # grpc's health Watch, as a whole) stops at shutdown.
        return Hooks(step=until_shutdown)
