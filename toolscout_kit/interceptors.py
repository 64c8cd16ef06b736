"""Server interceptors: observability, error translation, auth, request decoding, stream shutdown.

Each wraps the method handler's behaviour; they handle unary and streaming responses alike. The
order in :func:`toolscout_kit.server.start_server` matters: requests are decoded by the innermost
one (:class:`DecodeInterceptor`), so a request without a valid token is refused before its bytes
are parsed, and a malformed one gets INVALID_ARGUMENT with a fixed message instead of gRPC's
UNKNOWN with a traceback.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
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

__all__ = [
    "MALFORMED_REQUEST_MESSAGE",
    "OPEN_METHOD_PREFIXES",
    "SHUTDOWN_MESSAGE",
    "AuthInterceptor",
    "DecodeInterceptor",
    "ErrorInterceptor",
    "ObservabilityInterceptor",
    "ShutdownInterceptor",
]

_log = get_logger(__name__)

# Health and reflection stay reachable without a token (probes and grpcurl-style discovery).
OPEN_METHOD_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")

# Fixed: the reply to a malformed request names no parser and no exception.
MALFORMED_REQUEST_MESSAGE = "malformed request: not a valid protobuf message for this method"
SHUTDOWN_MESSAGE = "the server is shutting down; reconnect to continue"

Behavior = Callable[[Any, grpc.aio.ServicerContext], Any]
Around = Callable[[Behavior, str], Behavior]
Deserializer = Callable[[bytes], Any] | None


def _rewrap(
    handler: grpc.RpcMethodHandler,
    around: Around,
    method: str,
    *,
    decode: Callable[[Behavior, Deserializer], Behavior] | None = None,
) -> grpc.RpcMethodHandler:
    """Returns ``handler`` with its behaviour replaced by ``around(behaviour)``.

    With ``decode``, a unary request reaches the behaviour as raw bytes (gRPC is given no
    deserializer) and ``decode(behaviour, deserializer)`` turns it into the message itself.
    """
    if decode is not None and (handler.unary_unary or handler.unary_stream):
        inner = handler.unary_unary or handler.unary_stream
        behavior = around(decode(inner, handler.request_deserializer), method)
        make = (
            grpc.unary_unary_rpc_method_handler
            if handler.unary_unary
            else grpc.unary_stream_rpc_method_handler
        )
        return make(behavior, request_deserializer=None, response_serializer=handler.response_serializer)
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


class DecodeInterceptor(_WrappingInterceptor):
    """Decodes unary requests itself: a malformed one gets INVALID_ARGUMENT with a fixed message.

    Installed innermost, so the interceptors outside it (auth above all) run before any byte of
    the request is parsed. Client-streaming methods (none in toolscout) keep gRPC's decoding.
    """

    def _around(self, behavior: Behavior, method: str) -> Behavior:
        return behavior

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
        wrapped = _rewrap(handler, self._around, method, decode=_decoding)
        self._wrapped[method] = (handler, wrapped)
        return wrapped


def _decoding(behavior: Behavior, deserializer: Deserializer) -> Behavior:
    if deserializer is None:
        return behavior

    async def decode(raw: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            return deserializer(raw)
        except Exception:
            # Any parser error: the bytes are not this method's message. No traceback, no log
            # line of our own (the observability interceptor logs the RPC with its code).
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, MALFORMED_REQUEST_MESSAGE)
            raise  # unreachable: abort raises

    if inspect.isasyncgenfunction(behavior):

        async def stream(raw: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            request = await decode(raw, context)
            async for item in behavior(request, context):
                yield item

        return stream

    async def unary(raw: Any, context: grpc.aio.ServicerContext) -> Any:
        return await behavior(await decode(raw, context), context)

    return unary


class ShutdownInterceptor(_WrappingInterceptor):
    """Ends server streams that never end on their own (watches) once ``shutdown`` is set.

    Graceful shutdown waits for RPCs in flight; a ``WatchCatalog`` or health ``Watch`` stream is
    always in flight, so without this every shutdown would wait out its whole grace. The stream
    ends with UNAVAILABLE, which tells the client to reconnect (to another replica, or later).
    """

    def __init__(self, shutdown: asyncio.Event, methods: frozenset[str]) -> None:
        super().__init__()
        self._shutdown = shutdown
        self._methods = methods

    def _around(self, behavior: Behavior, method: str) -> Behavior:
        if method not in self._methods:
            return behavior
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
                    # It failed as the caller left (a write to the ended stream): already answered,
                    # so only mark the error seen, or asyncio logs "exception never retrieved".
                    task.exception()
            if not task.cancelled():
                return task.result()
            if context.done():
                raise asyncio.CancelledError  # the caller already left: there is no one to tell
            try:
                await context.abort(grpc.StatusCode.UNAVAILABLE, SHUTDOWN_MESSAGE)
            except grpc.aio.AbortError:
                raise
            except Exception:  # grpc's ExecuteBatchError: the RPC ended meanwhile
                # The server's own stop ended the stream first: end quietly, as a cancelled RPC.
                raise asyncio.CancelledError from None
            return None  # unreachable: abort raises

        if inspect.isasyncgenfunction(behavior):

            async def stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
                items = behavior(request, context)
                try:
                    while True:
                        try:
                            item = await until_shutdown(anext(items), context)
                        except StopAsyncIteration:
                            return
                        yield item
                finally:
                    await items.aclose()

            return stream

        async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
            # A streaming method written with context.write (grpc's health Watch).
            return await until_shutdown(behavior(request, context), context)

        return unary
