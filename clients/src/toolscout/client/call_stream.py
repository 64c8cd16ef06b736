"""Plain tool calls on the pool's ``CallToolStream``: one open stream per client, many calls on it.

A unary ``CallTool`` is a new gRPC call each time: a call object, its deadline and metadata here, a
handler looked up through the pool's interceptors and a task there. On a stream that is open
already a call is one message each way (bench/README, "the call stream"). :class:`CallStream` is
what :meth:`toolscout.client.AsyncPoolClient.call` uses for a call that relays nothing and carries
no metadata of its own; everything else, and a pool that does not offer the stream (an older
version: ``UNIMPLEMENTED``, found once), stays on ``CallTool``.

What a caller sees is what ``CallTool`` gives: the same result, the same exceptions for the same
statuses and trailing metadata (the pool answers each call with them), the deadline (the pool bounds
the call by it; here the wait ends at it with DEADLINE_EXCEEDED and the call is cancelled on the
pool), cancellation (a cancelled caller cancels its call on the pool, whose MCP server gets
``notifications/cancelled``). The stream's own end decides the calls still unanswered on it: the
pool ended it while stopping (it answers every call it read, so the rest were never sent: not-sent
UNAVAILABLE), or the stream failed (the connection died: an outcome-unknown call, as a unary call
that lost its connection, after :func:`~toolscout.client.errors.call_outcome_error`). The next call
opens a new stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from typing import Any

import grpc
import grpc.aio

from toolscout.client._base import NOT_REACHABLE_MESSAGE
from toolscout.client.errors import error_for_code, not_sent_error, translate_rpc_error
from toolscout.mcp_pool.v1 import mcp_pool_pb2

__all__ = ["CallStream", "StreamUnsupported"]

# The method every call here stands for, on both sides (the pool counts and logs its calls as it).
METHOD = "/toolscout.mcp_pool.v1.McpPool/CallTool"
# The client's one sentence for a pool it could not reach (toolscout.client._base).
_NOT_OPENED = NOT_REACHABLE_MESSAGE.format(why="its call stream could not be opened")
_STOPPED = "the pool stopped taking calls on its call stream; the call was not sent"
_CODES = {code.value[0]: code for code in grpc.StatusCode}


class StreamUnsupported(Exception):
    """The pool has no ``CallToolStream`` (it answered UNIMPLEMENTED): the call was not sent."""


class _Open:
    """One open stream: its gRPC call, the calls waiting for their answers, and its reader."""

    def __init__(self, call: Any) -> None:
        self.call = call
        self.pending: dict[int, asyncio.Future[mcp_pool_pb2.CallToolResponse]] = {}
        self.ended = False
        self.write_lock = asyncio.Lock()
        self.reader: asyncio.Task[None] | None = None

    async def write(self, message: mcp_pool_pb2.CallToolStreamRequest) -> None:
        async with self.write_lock:
            await self.call.write(message)


class CallStream:
    """The calls of one :class:`~toolscout.client.AsyncPoolClient` on its pool's call stream."""

    def __init__(self, stub: Any) -> None:
        self._stub = stub
        self._open: _Open | None = None
        self._ids = itertools.count(1)
        # Set once the pool answered UNIMPLEMENTED: every call goes unary from then on.
        self.unsupported = False
        self._chores: set[asyncio.Task[Any]] = set()
        self._opening: asyncio.Future[_Open] | None = None

    async def call(self, request: mcp_pool_pb2.CallToolRequest, rpc_timeout: float | None) -> Any:
        """The pool's ``CallToolResponse`` for ``request``, waited for at most ``rpc_timeout`` seconds.

        Raises:
            StreamUnsupported: the pool has no call stream; nothing was sent.
            ToolscoutClientError: what ``CallTool`` would have raised (before
                :func:`~toolscout.client.errors.call_outcome_error`).
        """
        stream = await self._stream()
        while stream.ended:  # it ended while this call waited for it to open
            stream = await self._stream()
        call_id = next(self._ids)
        answer = asyncio.get_running_loop().create_future()
        stream.pending[call_id] = answer
        message = mcp_pool_pb2.CallToolStreamRequest(
            id=call_id, call=request, deadline_seconds=rpc_timeout or 0.0
        )
        try:
            await stream.write(message)
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError, grpc.aio.UsageError):
            # The stream ended before the call went out: its answer says why (read below).
            pass
        except asyncio.CancelledError:
            stream.pending.pop(call_id, None)
            self._cancel_on_pool(stream, call_id)
            raise
        try:
            async with asyncio.timeout(rpc_timeout):
                return await answer
        except TimeoutError:
            self._cancel_on_pool(stream, call_id)
            raise error_for_code(
                grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded", method=METHOD
            ) from None
        except asyncio.CancelledError:
            self._cancel_on_pool(stream, call_id)
            raise
        finally:
            stream.pending.pop(call_id, None)

    async def close(self) -> None:
        """Ends the open stream (its calls fail as after a lost connection)."""
        stream, self._open = self._open, None
        if stream is not None:
            stream.call.cancel()
            if stream.reader is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await stream.reader

    async def _stream(self) -> _Open:
        """The open stream, or a new one (one opening at a time, shared by the calls waiting)."""
        stream = self._open
        if stream is not None and not stream.ended and not stream.call.done():
            return stream
        # None yet, or its end not read yet (the connection it was on is gone): a new one.
        if self._opening is None or self._opening.done():
            self._opening = asyncio.ensure_future(self._start())
        # Shielded: a caller that gives up does not stop the opening the others wait for.
        return await asyncio.shield(self._opening)

    async def _start(self) -> _Open:
        """Opens a stream and waits for the pool to take it (its initial metadata) before anything
        is written on it, so that a pool without it (UNIMPLEMENTED), or one not reachable, is told
        apart from a call that was sent.

        Raises:
            StreamUnsupported: the pool has no call stream.
            UnavailableError: not reachable (not sent); or the error the pool refused the stream with.
        """
        call = self._stub.CallToolStream()
        await call.initial_metadata()
        if call.done():
            code = await call.code()
            if code is grpc.StatusCode.UNIMPLEMENTED:
                self.unsupported = True
                raise StreamUnsupported
            if code is grpc.StatusCode.UNAVAILABLE:
                raise not_sent_error(_NOT_OPENED, method=METHOD)
            raise error_for_code(code, await call.details(), method=METHOD)
        stream = _Open(call)
        stream.reader = asyncio.create_task(self._read(stream))
        self._open = stream
        return stream

    async def _read(self, stream: _Open) -> None:
        """Hands each answer to its caller; at the stream's end, fails the calls left."""
        failure: Exception = not_sent_error(_STOPPED, method=METHOD)
        try:
            while True:
                message = await stream.call.read()
                if message is grpc.aio.EOF:
                    break
                _deliver(stream.pending.get(message.id), message)
        except grpc.aio.AioRpcError as err:
            if err.code() is grpc.StatusCode.UNIMPLEMENTED:
                self.unsupported = True
                failure = StreamUnsupported()
            else:
                failure = translate_rpc_error(err, method=METHOD)
        except asyncio.CancelledError:
            # Closed by this client: what was not answered is cancelled, as a closed channel's calls.
            failure = error_for_code(grpc.StatusCode.CANCELLED, "the client was closed", method=METHOD)
        finally:
            stream.ended = True
            if self._open is stream:
                self._open = None
        for waiting in stream.pending.values():
            if not waiting.done():
                waiting.set_exception(failure)

    def _cancel_on_pool(self, stream: _Open, call_id: int) -> None:
        """Tells the pool to cancel ``call_id`` (best effort: a stream that ended has no call left)."""
        if stream.ended:
            return
        task = asyncio.ensure_future(
            stream.write(mcp_pool_pb2.CallToolStreamRequest(id=call_id, cancel=True))
        )
        self._chores.add(task)
        task.add_done_callback(_finished_chore(self._chores))


def _finished_chore(chores: set[asyncio.Task[Any]]) -> Any:
    def done(task: asyncio.Task[Any]) -> None:
        chores.discard(task)
        if not task.cancelled():
            task.exception()  # read: a failed write on an ending stream is not an error

    return done


def _deliver(waiting: asyncio.Future[Any] | None, message: mcp_pool_pb2.CallToolStreamResponse) -> None:
    """Gives an answer to the caller waiting for it (if it still waits: a deadline or a
    cancellation may have ended its wait)."""
    if waiting is None or waiting.done():
        return
    if message.code:
        waiting.set_exception(_error(message))
    else:
        waiting.set_result(message.result)


def _error(message: mcp_pool_pb2.CallToolStreamResponse) -> Exception:
    """The exception the status of an answer stands for, as ``CallTool`` ending with it raises."""
    code = _CODES.get(message.code, grpc.StatusCode.UNKNOWN)
    metadata = tuple((entry.key, entry.value) for entry in message.trailing_metadata)
    return error_for_code(code, message.details, method=METHOD, trailing_metadata=metadata)
