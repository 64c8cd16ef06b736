"""Server interceptors: observability (request context, logs, gRPC metrics), error translation, auth.

Each wraps the method handler's behaviour; all three handle unary and streaming responses alike.
"""

from __future__ import annotations

import abc
import asyncio
import hmac
import inspect
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from toolscout_kit.errors import ToolscoutError
from toolscout_kit.logging import bind_request_context, clear_request_context, get_logger, redact
from toolscout_kit.metrics import GrpcServerMetrics
from toolscout_kit.status import GENERIC_INTERNAL_MESSAGE, status_for

__all__ = ["OPEN_METHOD_PREFIXES", "AuthInterceptor", "ErrorInterceptor", "ObservabilityInterceptor"]

_log = get_logger(__name__)

# Health and reflection stay reachable without a token (probes and grpcurl-style discovery).
OPEN_METHOD_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")

Behavior = Callable[[Any, grpc.aio.ServicerContext], Any]
Around = Callable[[Behavior, str], Behavior]


def _rewrap(handler: grpc.RpcMethodHandler, around: Around, method: str) -> grpc.RpcMethodHandler:
    """Returns ``handler`` with its behaviour replaced by ``around(behaviour)``."""
    if handler.unary_unary:
        return grpc.unary_unary_rpc_method_handler(
            around(handler.unary_unary, method),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
    if handler.unary_stream:
        return grpc.unary_stream_rpc_method_handler(
            around(handler.unary_stream, method),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
    if handler.stream_unary:
        return grpc.stream_unary_rpc_method_handler(
            around(handler.stream_unary, method),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
    return grpc.stream_stream_rpc_method_handler(
        around(handler.stream_stream, method),
        request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer,
    )


def _split(method: str) -> tuple[str, str]:
    service, _, name = method.lstrip("/").rpartition("/")
    return service, name


class _WrappingInterceptor(grpc.aio.ServerInterceptor, abc.ABC):
    """Wraps each method's behaviour once; the wrapped handler is reused for every later call."""

    def __init__(self) -> None:
        # method -> (the handler gRPC gave us, our wrapped copy). Rewrapping per call cost more
        # than the interceptors' own work on hot RPCs (bench/pool_latency.py).
        self._wrapped: dict[str, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}

    @abc.abstractmethod
    def _around(self, behavior: Behavior, method: str) -> Behavior:
        """Returns ``behavior`` wrapped with this interceptor's work."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        method = handler_call_details.method
        cached = self._wrapped.get(method)
        if cached is not None and cached[0] is handler:
            return cached[1]
        wrapped = _rewrap(handler, self._around, method)
        self._wrapped[method] = (handler, wrapped)
        return wrapped


class ObservabilityInterceptor(_WrappingInterceptor):
    """Binds request id + method to the log context and records the gRPC server metrics."""

    def __init__(self, metrics: GrpcServerMetrics) -> None:
        super().__init__()
        self._metrics = metrics

    def _around(self, behavior: Behavior, method: str) -> Behavior:
        service, name = _split(method)

        def begin(context: grpc.aio.ServicerContext) -> float:
            request_id = next(
                (str(v) for k, v in context.invocation_metadata() or () if k == "x-request-id"), ""
            )
            request_id = request_id or uuid.uuid4().hex[:16]
            clear_request_context()
            bind_request_context(request_id=request_id, rpc=method)
            return time.perf_counter()

        def finish(context: grpc.aio.ServicerContext, started: float, code: grpc.StatusCode) -> None:
            elapsed = time.perf_counter() - started
            self._metrics.handled.labels(service, name, code.name).inc()
            self._metrics.handling_seconds.labels(service, name).observe(elapsed)
            if not method.startswith(OPEN_METHOD_PREFIXES):
                # Successful RPCs are counted in metrics; a log line each would cost more than the
                # RPC itself on hot paths (search, calls), so they are DEBUG. Failures are INFO.
                log = _log.debug if code == grpc.StatusCode.OK else _log.info
                log("rpc", code=code.name, duration_ms=round(elapsed * 1000, 3))
            clear_request_context()

        def code_of(context: grpc.aio.ServicerContext, exc: BaseException | None) -> grpc.StatusCode:
            if isinstance(exc, asyncio.CancelledError):
                return grpc.StatusCode.CANCELLED
            code = context.code()
            if isinstance(code, grpc.StatusCode):
                return code
            return grpc.StatusCode.UNKNOWN if exc is not None else grpc.StatusCode.OK

        if inspect.isasyncgenfunction(behavior):

            async def stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
                started = begin(context)
                exc: BaseException | None = None
                try:
                    async for item in behavior(request, context):
                        yield item
                except BaseException as err:
                    exc = err
                    raise
                finally:
                    finish(context, started, code_of(context, exc))

            return stream

        async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
            started = begin(context)
            exc: BaseException | None = None
            try:
                return await behavior(request, context)
            except BaseException as err:
                exc = err
                raise
            finally:
                finish(context, started, code_of(context, exc))

        return unary


async def _abort_for(exc: Exception, context: grpc.aio.ServicerContext) -> None:
    if isinstance(exc, ToolscoutError):
        code = status_for(exc)
        if code is not None:
            await context.abort(code, redact(exc.message))
    # Unmapped: a bug. Full detail goes to the log, never to the caller.
    _log.error("unhandled exception", exc_info=exc)
    await context.abort(grpc.StatusCode.INTERNAL, GENERIC_INTERNAL_MESSAGE)


class ErrorInterceptor(_WrappingInterceptor):
    """Turns domain errors into their status code; anything else into a generic INTERNAL."""

    def _around(self, behavior: Behavior, method: str) -> Behavior:
        if inspect.isasyncgenfunction(behavior):

            async def stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
                try:
                    async for item in behavior(request, context):
                        yield item
                except (grpc.aio.AbortError, asyncio.CancelledError):
                    raise
                except Exception as exc:
                    await _abort_for(exc, context)

            return stream

        async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
            try:
                return await behavior(request, context)
            except (grpc.aio.AbortError, asyncio.CancelledError):
                raise
            except Exception as exc:
                await _abort_for(exc, context)
                raise  # unreachable: abort raises; keeps type checkers honest

        return unary


class AuthInterceptor(_WrappingInterceptor):
    """Requires ``authorization: Bearer <token>`` on every RPC except health and reflection."""

    def __init__(self, token: str) -> None:
        super().__init__()
        self._expected = f"Bearer {token}".encode()

    def _authorized(self, context: grpc.aio.ServicerContext) -> bool:
        for key, value in context.invocation_metadata() or ():
            if key == "authorization":
                given = value.encode() if isinstance(value, str) else bytes(value)
                return hmac.compare_digest(given, self._expected)
        return False

    def _around(self, behavior: Behavior, method: str) -> Behavior:
        if method.startswith(OPEN_METHOD_PREFIXES):
            return behavior
        if inspect.isasyncgenfunction(behavior):

            async def stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
                if not self._authorized(context):
                    await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or invalid bearer token")
                async for item in behavior(request, context):
                    yield item

            return stream

        async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
            if not self._authorized(context):
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or invalid bearer token")
            return await behavior(request, context)

        return unary
