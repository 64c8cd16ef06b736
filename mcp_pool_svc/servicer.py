"""gRPC adapter for :class:`mcp_pool_svc.pool.McpPool`: protobuf in, domain call, protobuf out.

Requests and answers are the shared values of the client library, read and written by
:mod:`toolscout.client.wire`. Domain errors propagate unchanged; the kit's error interceptor maps
them to status codes. A call the pool did not send (:class:`~mcp_pool_svc.errors.ServerUnavailableError`)
is marked so in the trailing metadata (``toolscout-not-sent: 1``): gRPC answers ``UNAVAILABLE`` by
itself when the connection dies mid-call, so the code alone cannot tell callers that nothing ran.
A :class:`~mcp_pool_svc.errors.NotOwnerError` (a call for a server another shard runs) also puts
the owners there, where the sharded client reads them to route the call. A ``per_user`` server
called by a principal without a usable token of their own
(:class:`~mcp_pool_svc.errors.UserAuthorizationRequiredError`, ``FAILED_PRECONDITION``) names the
server to sign in to (``toolscout-authorization-required: <server>``).

``CallToolStream`` (:class:`CallStreams`) carries many ``CallTool`` calls on one open stream, which
costs far less per call than a gRPC call (bench/README, "the call stream"). Each call runs as
``CallTool`` runs, in its own task, and is answered with the result, or the status, details and
trailing metadata ``CallTool`` would have ended with; it is counted and logged as a ``CallTool``.
A ``cancel`` message cancels its call. A stopping pool (:meth:`CallStreams.drain`) stops reading,
answers the calls it read and ends the stream with OK: what was not read was not sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Awaitable, Iterator
from typing import Any

import grpc
from toolscout.client import (
    AUTHORIZATION_REQUIRED_KEY,
    NOT_SENT_METADATA,
    SERVICE_STATUS_METADATA,
    SHARD_COUNT_KEY,
    SHARD_OWNERS_KEY,
    CallProgress,
    CallToolResult,
    FeatureKind,
    FeatureReply,
    RelayedLog,
    wire,
)
from toolscout.client.call_stream import METHOD as CALL_TOOL_METHOD
from toolscout.mcp_pool.v1 import mcp_pool_pb2, mcp_pool_pb2_grpc

from mcp_pool_svc.errors import (
    InvalidToolArgumentsError,
    NotOwnerError,
    ServerUnavailableError,
    UserAuthorizationRequiredError,
)
from mcp_pool_svc.pool import McpPool
from mcp_pool_svc.relay import QueuedRelay, RelayEvent, host_capabilities
from toolscout_kit.interceptors import RpcRecord
from toolscout_kit.logging import begin_request
from toolscout_kit.memory import release_soon
from toolscout_kit.metrics import GrpcServerMetrics
from toolscout_kit.status import reply_status

__all__ = ["CallStreams", "McpPoolServicer", "owner_metadata", "refusal_metadata"]


# Seconds a cancelled relayed call's server has to withdraw the requests it still has out to the
# gone caller before the pool answers them with an error.
_WITHDRAW_GRACE = 5.0


@contextlib.contextmanager
def _call_refusals(context: grpc.aio.ServicerContext[Any, Any]) -> Iterator[None]:
    """A call refused before it was sent says so in trailing metadata (not sent; and the server
    that needs the caller's authorization), besides its status."""
    try:
        yield
    except (ServerUnavailableError, UserAuthorizationRequiredError) as err:
        context.set_trailing_metadata(refusal_metadata(err))
        raise


def _within(remaining: float | None) -> float | None:
    """The seconds the pool gives a request whose caller has ``remaining`` seconds left (None: no
    deadline): a little less, so that the caller gets the pool's answer (and the MCP server its
    cancellation) rather than its own timeout."""
    return max(remaining - 0.05, 0.001) if remaining is not None else None


def _deadline(context: grpc.aio.ServicerContext[Any, Any]) -> float | None:
    return _within(context.time_remaining())


def _kind(value: int, what: str) -> FeatureKind:
    try:
        return wire.feature_kind(value)
    except ValueError:
        raise InvalidToolArgumentsError(f"{what}: resource, resource_template or prompt") from None


async def _feature_reply(
    context: grpc.aio.ServicerContext[Any, Any], reply: Awaitable[FeatureReply]
) -> mcp_pool_pb2.FeatureReply:
    with _call_refusals(context):
        return wire.feature_reply_pb(await reply)


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
        self._record = RpcRecord(metrics, CALL_TOOL_METHOD) if metrics is not None else None

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
        task.add_done_callback(_retrieved)  # a stream torn down leaves nobody to read its outcome

    async def _run(self, request: mcp_pool_pb2.CallToolStreamRequest, stream: _Stream) -> None:
        """One call, answered as CallTool would answer it; counted and logged as a CallTool."""
        started = time.perf_counter()
        # The task's own copy of the log context: this call's request id (made when a line needs
        # it), not the stream's.
        begin_request("", CALL_TOOL_METHOD)
        deadline = _within(request.deadline_seconds or None)
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
        # Counted before the answer goes out (as a unary call is counted before gRPC writes its
        # reply): whoever reads the metrics after the answer sees the call.
        elapsed = time.perf_counter() - started
        if self._record is not None:
            self._record.count(code, elapsed)
        await stream.answer(answer)
        if self._record is not None:
            self._record.log(code, elapsed, stream=True)


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
    return wire.call_stream_refusal_pb(call_id, code, details, (*metadata, *SERVICE_STATUS_METADATA))


class McpPoolServicer(mcp_pool_pb2_grpc.McpPoolServicer):
    """``toolscout.mcp_pool.v1.McpPool`` over an :class:`McpPool`."""

    def __init__(self, pool: McpPool, streams: CallStreams | None = None) -> None:
        self._pool = pool
        self._streams = streams if streams is not None else CallStreams(pool)

    async def ListServers(
        self, request: mcp_pool_pb2.ListServersRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> mcp_pool_pb2.ListServersResponse:
        return mcp_pool_pb2.ListServersResponse(
            servers=[wire.server_status_pb(s) for s in self._pool.list_servers()],
            shard=wire.shard_info_pb(self._pool.shard_info()),
        )

    async def ListTools(
        self, request: mcp_pool_pb2.ListToolsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> mcp_pool_pb2.ListToolsResponse:
        if request.principal:
            with _call_refusals(context):
                catalog = await self._pool.list_tools_as(
                    request.principal, list(request.servers), include_unavailable=request.include_unavailable
                )
            return wire.tool_catalog_pb(catalog)
        try:
            catalog = self._pool.list_tools(
                list(request.servers), include_unavailable=request.include_unavailable
            )
        except NotOwnerError as err:
            context.set_trailing_metadata(owner_metadata(err))
            raise
        release_soon(len(catalog.tools))  # once the answer's bytes have gone
        return wire.tool_catalog_pb(catalog)

    async def CallTool(
        self, request: mcp_pool_pb2.CallToolRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> mcp_pool_pb2.CallToolResponse:
        deadline = _deadline(context)
        try:
            result = await self._pool.call(wire.call_request(request), deadline=deadline)
        except (ServerUnavailableError, UserAuthorizationRequiredError) as err:
            # As _call_refusals says it (inline on this hot method: no generator per call).
            context.set_trailing_metadata(refusal_metadata(err))
            raise
        return wire.call_tool_result_pb(result)

    # grpc.aio serves a streaming method written as a coroutine that answers with context.write (its
    # answers are written by the calls' own tasks as they end); the generated stub types only the
    # generator form.
    async def CallToolStream(  # type: ignore[override]
        self,
        request_iterator: AsyncIterator[mcp_pool_pb2.CallToolStreamRequest],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> None:
        """Many CallTools on one stream (:class:`CallStreams`)."""
        await self._streams.serve(request_iterator, context)

    async def ReadResult(
        self, request: mcp_pool_pb2.ReadResultRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> mcp_pool_pb2.ReadResultResponse:
        return wire.result_read_pb(await self._pool.read_result(wire.read_request(request)))

    async def CallToolWithProgress(
        self, request: mcp_pool_pb2.CallToolRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[mcp_pool_pb2.CallToolEvent]:
        """CallTool, with the server's progress notifications streamed before the result."""
        deadline = _deadline(context)
        events: asyncio.Queue[RelayEvent] = asyncio.Queue()

        async def relay(progress: float, total: float | None, message: str | None) -> None:
            events.put_nowait(CallProgress(progress, total, message or ""))

        call = asyncio.create_task(
            self._pool.call(wire.call_request(request), deadline=deadline, progress=relay)
        )
        async for event in _events_then_result(call, events, context):
            yield event

    async def CallToolRelay(
        self,
        request_iterator: AsyncIterator[mcp_pool_pb2.CallToolRelayRequest],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> AsyncIterator[mcp_pool_pb2.CallToolEvent]:
        """CallTool with the server's requests, log messages and progress relayed to the caller
        and its answers back (:mod:`mcp_pool_svc.relay`); a caller that closes its side first
        cancels the call."""
        deadline = _deadline(context)
        first = await anext(aiter(request_iterator), None)
        if first is None or not first.HasField("start"):
            raise InvalidToolArgumentsError("CallToolRelay starts with a `start` message (the call)")
        relay = QueuedRelay(
            host_capabilities(first.start.host_capabilities_json), first.start.host_protocol_version
        )
        call = asyncio.create_task(
            self._pool.call(
                wire.call_request(first.start.call), deadline=deadline, progress=relay.progress, relay=relay
            )
        )

        async def answers() -> None:
            async for message in request_iterator:
                if message.HasField("answer"):
                    relay.answer(wire.relay_answer(message.answer))
            _cancel_once(call)  # the caller closed its side before the result: it wants none

        reading = asyncio.ensure_future(answers())
        try:
            async for event in _events_then_result(call, relay.events, context):
                yield event
        finally:
            # A cancelled call's server withdraws what it still asks (and gets notifications/cancelled
            # first); what it does not withdraw is refused after a grace.
            relay.close(grace=_WITHDRAW_GRACE if call.cancelled() else 0.0)
            reading.cancel()
            await asyncio.wait({reading})

    async def WatchCatalog(
        self, request: mcp_pool_pb2.WatchCatalogRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[mcp_pool_pb2.WatchCatalogResponse]:
        async for snapshot in self._pool.watch_catalog(request.known_version):
            yield wire.catalog_snapshot_pb(snapshot)
            release_soon(len(snapshot.tools))

    # --- resources, resource templates, prompts, completion, logging ------------------------

    async def ListFeatures(
        self, request: mcp_pool_pb2.ListFeaturesRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> mcp_pool_pb2.ListFeaturesResponse:
        kind = _kind(request.kind, "kind")
        with _call_refusals(context):
            page = await self._pool.features.list_page(
                kind, tuple(request.servers), request.cursor, request.page_size, request.principal
            )
        return wire.feature_list_pb(dataclasses.replace(page, shard=self._pool.shard_info()))

    async def WatchFeatures(
        self, request: mcp_pool_pb2.WatchFeaturesRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[mcp_pool_pb2.WatchFeaturesResponse]:
        async for snapshot in self._pool.feature_catalog.watch(request.known_version):
            yield wire.feature_snapshot_pb(dataclasses.replace(snapshot, shard=self._pool.shard_info()))

    async def ReadResource(
        self, request: mcp_pool_pb2.ReadResourceRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> mcp_pool_pb2.FeatureReply:
        read = wire.resource_read_request(request)
        return await _feature_reply(context, self._pool.features.read_resource(read, _deadline(context)))

    async def GetPrompt(
        self, request: mcp_pool_pb2.GetPromptRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> mcp_pool_pb2.FeatureReply:
        prompt = wire.prompt_request(request)
        return await _feature_reply(context, self._pool.features.get_prompt(prompt, _deadline(context)))

    async def Complete(
        self, request: mcp_pool_pb2.CompleteRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> mcp_pool_pb2.FeatureReply:
        _kind(request.ref_kind, "ref_kind")
        completion = wire.completion_request(request)
        return await _feature_reply(context, self._pool.features.complete(completion, _deadline(context)))

    async def SetLoggingLevel(
        self, request: mcp_pool_pb2.SetLoggingLevelRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> mcp_pool_pb2.SetLoggingLevelResponse:
        with _call_refusals(context):
            accepted = await self._pool.features.set_logging_level(request.level, tuple(request.servers))
        return mcp_pool_pb2.SetLoggingLevelResponse(servers=list(accepted))

    async def WatchResource(
        self, request: mcp_pool_pb2.WatchResourceRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[mcp_pool_pb2.WatchResourceResponse]:
        with _call_refusals(context):
            async with contextlib.aclosing(
                self._pool.features.watch_resource(request.uri, request.principal)
            ) as updates:
                async for uri, subscribed in updates:
                    yield mcp_pool_pb2.WatchResourceResponse(uri=uri, subscribed=subscribed)


def _event_pb(event: RelayEvent) -> mcp_pool_pb2.CallToolEvent:
    if isinstance(event, CallProgress):
        return mcp_pool_pb2.CallToolEvent(progress=wire.call_progress_pb(event))
    if isinstance(event, RelayedLog):
        return mcp_pool_pb2.CallToolEvent(log=wire.relayed_log_pb(event))
    return mcp_pool_pb2.CallToolEvent(request=wire.relayed_request_pb(event))


async def _events_then_result(
    call: asyncio.Task[CallToolResult],
    events: asyncio.Queue[RelayEvent],
    context: grpc.aio.ServicerContext[Any, Any],
) -> AsyncIterator[mcp_pool_pb2.CallToolEvent]:
    """The events of a running call as they come, then its result (errors as CallTool's); a
    caller that goes away cancels the call (and the server gets notifications/cancelled)."""
    try:
        while not call.done():
            waiting = asyncio.ensure_future(events.get())
            racing: set[asyncio.Future[Any]] = {call, waiting}
            await asyncio.wait(racing, return_when=asyncio.FIRST_COMPLETED)
            if waiting.done():
                yield _event_pb(waiting.result())
            else:
                waiting.cancel()
        while not events.empty():
            yield _event_pb(events.get_nowait())
        with _call_refusals(context):
            result = call.result()
        yield mcp_pool_pb2.CallToolEvent(result=wire.call_tool_result_pb(result))
    finally:
        if not call.done():
            _cancel_once(call)
            await asyncio.wait({call})


def _cancel_once(call: asyncio.Task[CallToolResult]) -> None:
    """Cancels a call that is not being cancelled already: a second cancellation would land in
    the SDK's shielded write of ``notifications/cancelled`` (a native cancel pierces anyio's shield)
    and the MCP server would never hear that its call was cancelled."""
    if not call.done() and not call.cancelling():
        call.cancel()
