"""``CallToolStream``: many ``CallTool`` calls on one long-lived gRPC stream.

A unary gRPC call costs its caller and the pool far more than a message on a stream that is open
already: a call object, its deadline timer and metadata on the caller's side, a handler found
through every interceptor and a task on the pool's (bench/README, "the call stream"). The client
library sends a call that relays nothing this way when the pool offers it. Each ``call`` message is
run as :meth:`McpPoolServicer.CallTool` runs its request, in a task of its own, and answered with
one message of the same id when it ends: the result, or the status, details and trailing metadata
``CallTool`` would have ended with (the error interceptor's table and redaction, the "not sent"
and authorization marks of the servicer). A ``cancel`` message cancels its call as a cancelled
``CallTool`` is cancelled (the MCP server gets ``notifications/cancelled``). Each call is counted
in the gRPC server metrics as a ``CallTool`` and logged as one, so that dashboards and the
error-ratio alert see calls, not streams.

When the pool stops (:meth:`CallStreams.drain`), every stream stops reading: the calls it has read
are answered (the pool's own drain gives them its grace, and refuses new ones as not sent), then the
stream ends with OK. A call its caller wrote after that was never read, so never sent: the client
library says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
from toolscout.client import (
    AUTHORIZATION_REQUIRED_KEY,
    NOT_SENT_METADATA,
    SERVICE_STATUS_METADATA,
    SHARD_COUNT_KEY,
    SHARD_OWNERS_KEY,
    wire,
)
from toolscout.mcp_pool.v1 import mcp_pool_pb2

from mcp_pool_svc.errors import NotOwnerError, ServerUnavailableError, UserAuthorizationRequiredError
from mcp_pool_svc.pool import McpPool
from toolscout_kit.logging import bind_request_context, get_logger
from toolscout_kit.metrics import GrpcServerMetrics
from toolscout_kit.status import reply_status

__all__ = ["CALL_TOOL_METHOD", "CallStreams", "owner_metadata", "refusal_metadata"]

log = get_logger(__name__)

SERVICE = "toolscout.mcp_pool.v1.McpPool"
CALL_TOOL_METHOD = f"/{SERVICE}/CallTool"
# As CallTool: finish (and cancel on the MCP server) a little before the caller's deadline, so that
# the caller gets the pool's answer rather than its own timeout.
_DEADLINE_MARGIN = 0.05
_DUPLICATE_ID = "a call with this id is already in flight on this stream"


def owner_metadata(err: NotOwnerError) -> tuple[tuple[str, str], ...]:
    """Where a request for a server another shard runs belongs (the sharded client reads it)."""
    return ((SHARD_OWNERS_KEY, ",".join(map(str, err.owners))), (SHARD_COUNT_KEY, str(err.count)))


def refusal_metadata(err: BaseException) -> tuple[tuple[str, str], ...]:
    """The trailing metadata a refused call carries besides its status: "not sent" (and the shard
    owners of a call another shard runs), or the server a caller must sign in to first."""
    if isinstance(err, UserAuthorizationRequiredError):
        return ((AUTHORIZATION_REQUIRED_KEY, err.server), *NOT_SENT_METADATA)
    if isinstance(err, ServerUnavailableError):
        owners = owner_metadata(err) if isinstance(err, NotOwnerError) else ()
        return (*NOT_SENT_METADATA, *owners)
    return ()


class _Stream:
    """One open stream: its context, its calls in flight, its reader and its writes' turn."""

    def __init__(self, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        self.context = context
        self.calls: dict[int, asyncio.Task[None]] = {}
        self.reader: asyncio.Task[None] | None = None
        self.ended = asyncio.Event()
        self._turn = asyncio.Lock()

    async def answer(self, message: mcp_pool_pb2.CallToolStreamResponse) -> None:
        """Writes one answer (one at a time: gRPC takes one write per call at once); a caller who
        left gets nothing, and that is no error."""
        async with self._turn:
            with contextlib.suppress(grpc.aio.InternalError, grpc.aio.AbortError, asyncio.InvalidStateError):
                await self.context.write(message)


class CallStreams:
    """The pool's ``CallToolStream`` streams: serves each, and ends them all when the pool stops."""

    def __init__(self, pool: McpPool, metrics: GrpcServerMetrics | None = None) -> None:
        self._pool = pool
        self._stopping = False
        self._streams: set[_Stream] = set()
        self._ids = itertools.count()
        self._prefix = os.urandom(4).hex()
        self._handled = metrics.handled if metrics is not None else None
        self._seconds = metrics.handling_seconds.labels(SERVICE, "CallTool") if metrics is not None else None

    async def drain(self, within: float) -> None:
        """Stops every stream reading new calls; waits (up to ``within`` seconds) for them to answer
        the calls they have and end. The pool's own drain bounds the calls themselves."""
        self._stopping = True
        streams = list(self._streams)
        for stream in streams:
            if stream.reader is not None:
                stream.reader.cancel()  # a message not read yet was not sent
        if streams:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(within, 0.0)):
                    await asyncio.gather(*(stream.ended.wait() for stream in streams))

    async def serve(
        self,
        requests: AsyncIterator[mcp_pool_pb2.CallToolStreamRequest],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> None:
        """One stream: reads calls until the caller closes its side or the pool stops, runs them
        concurrently, writes each answer as its call ends, and ends once every call read is
        answered. Cancelled (the caller left), it cancels its calls."""
        stream = _Stream(context)
        self._streams.add(stream)
        try:
            # The caller writes no call before this: it tells a pool that takes the stream from one
            # without it (UNIMPLEMENTED) without a call in the balance.
            await context.send_initial_metadata(())
            if not self._stopping:
                stream.reader = asyncio.create_task(self._read(requests, stream))
                await asyncio.wait({stream.reader})
            while stream.calls:
                await asyncio.wait(set(stream.calls.values()))
        finally:
            reader = stream.reader
            if reader is not None:
                reader.cancel()
                reader.add_done_callback(_retrieved)
            for task in list(stream.calls.values()):
                task.cancel()
            self._streams.discard(stream)
            stream.ended.set()

    async def _read(
        self, requests: AsyncIterator[mcp_pool_pb2.CallToolStreamRequest], stream: _Stream
    ) -> None:
        async for request in requests:
            self._take(request, stream)

    def _take(self, request: mcp_pool_pb2.CallToolStreamRequest, stream: _Stream) -> None:
        call_id, calls = request.id, stream.calls
        if request.cancel:
            running = calls.get(call_id)
            if running is not None:
                running.cancel()
            return
        if call_id in calls:
            refused = _refused(call_id, grpc.StatusCode.INVALID_ARGUMENT, _DUPLICATE_ID, ())
            _keep(asyncio.ensure_future(stream.answer(refused)))
            return
        task = asyncio.create_task(self._run(request, stream))
        calls[call_id] = task
        task.add_done_callback(lambda _: calls.pop(call_id, None))

    async def _run(self, request: mcp_pool_pb2.CallToolStreamRequest, stream: _Stream) -> None:
        """One call, answered as CallTool would answer it; counted and logged as a CallTool."""
        started = time.perf_counter()
        # The task's own copy of the log context: this call's request id, not the stream's.
        bind_request_context(request_id=f"{self._prefix}{next(self._ids):08x}", rpc=CALL_TOOL_METHOD)
        remaining = request.deadline_seconds
        deadline = max(remaining - _DEADLINE_MARGIN, 0.001) if remaining > 0 else None
        code = grpc.StatusCode.OK
        try:
            result = await self._pool.call(wire.call_request(request.call), deadline=deadline)
            answer = mcp_pool_pb2.CallToolStreamResponse(
                id=request.id, result=wire.call_tool_result_pb(result)
            )
        except asyncio.CancelledError:
            code = grpc.StatusCode.CANCELLED
            answer = _refused(request.id, code, "cancelled by the caller", ())
        except Exception as err:
            code, details = reply_status(err)
            answer = _refused(request.id, code, details, refusal_metadata(err))
        await stream.answer(answer)
        elapsed = time.perf_counter() - started
        if self._handled is not None and self._seconds is not None:
            self._handled.labels(SERVICE, "CallTool", code.name).inc()
            self._seconds.observe(elapsed)
        # As the observability interceptor logs an RPC: successes at DEBUG, failures at INFO.
        (log.debug if code is grpc.StatusCode.OK else log.info)(
            "rpc", code=code.name, duration_ms=round(elapsed * 1000, 3), stream=True
        )


_CHORES: set[asyncio.Future[Any]] = set()


def _keep(future: asyncio.Future[Any]) -> None:
    """Holds a write nobody awaits until it is done."""
    _CHORES.add(future)
    future.add_done_callback(_CHORES.discard)
    future.add_done_callback(_retrieved)


def _retrieved(future: asyncio.Future[Any]) -> None:
    """Reads a read's outcome that nobody waits for any more (the stream's end, or cancelled)."""
    if not future.cancelled():
        future.exception()


def _refused(
    call_id: int, code: grpc.StatusCode, details: str, metadata: tuple[tuple[str, str], ...]
) -> mcp_pool_pb2.CallToolStreamResponse:
    entries = [
        mcp_pool_pb2.MetadataEntry(key=key, value=value)
        for key, value in (*metadata, *SERVICE_STATUS_METADATA)
    ]
    return mcp_pool_pb2.CallToolStreamResponse(
        id=call_id, code=code.value[0], details=details, trailing_metadata=entries
    )
