"""Async clients for the three toolscout services (``grpc.aio``).

Each client wraps a channel; ``connect(target, ...)`` opens one with :func:`create_channel` and
closes it with the client (``async with``). Every method has a default deadline (see
``DEFAULT_DEADLINES``; ``deadline=`` seconds overrides it) and raises the :mod:`toolscout.client.errors`
tree instead of ``grpc.aio.AioRpcError``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeVar, Unpack, cast

import grpc
import grpc.aio

from toolscout.client import types as t
from toolscout.client import wire
from toolscout.client._base import (
    NOT_REACHABLE_MESSAGE,
    ClientBase,
    ConnectFields,
    channel_fields,
    connect_wait,
    no_connection,
)
from toolscout.client._calls import (
    AsyncCloses,
    DiscoveryCalls,
    FeatureRequests,
    Metadata,
    OrchestratorCalls,
    PoolCalls,
    ResultReads,
    ToolCalls,
)
from toolscout.client._requests import plan_request
from toolscout.client._trace_context import with_trace_context
from toolscout.client.call_stream import CallStream, StreamUnsupported
from toolscout.client.channel import create_channel
from toolscout.client.errors import (
    OutcomeUnknownError,
    UnavailableError,
    call_outcome_error,
    not_sent_error,
    translate_rpc_error,
)
from toolscout.client.relay import CallRelay, RelayRpc, relay_call
from toolscout.discovery.v1 import discovery_pb2, discovery_pb2_grpc
from toolscout.mcp_pool.v1 import mcp_pool_pb2, mcp_pool_pb2_grpc
from toolscout.orchestrator.v1 import orchestrator_pb2_grpc

# Awaited with each progress notification of a call's MCP server (``call(..., progress=...)``).
ProgressCallback = Callable[[t.CallProgress], Awaitable[None]]

__all__ = ["AsyncDiscoveryClient", "AsyncOrchestratorClient", "AsyncPoolClient", "AsyncToolscoutClient"]


T = TypeVar("T")


class _AsyncClient(ClientBase[grpc.aio.Channel], AsyncCloses):
    _aio = True

    async def close(self) -> None:
        if self._owns_channel:
            await self._channel.close()

    async def _unary(
        self,
        method: str,
        request: Any,
        deadline: float | None,
        metadata: Metadata,
        wait_for_ready: bool | None = None,
        *,
        resolved: bool = False,
    ) -> Any:
        """Calls ``method`` (its default deadline unless ``deadline`` is given, or ``resolved``)."""
        timeout = deadline if resolved else self._deadlines.resolve(method, deadline)
        rpc = getattr(self._stub, method)
        try:
            return await rpc(
                request, timeout=timeout, metadata=with_trace_context(metadata), wait_for_ready=wait_for_ready
            )
        except grpc.aio.AioRpcError as err:
            raise translate_rpc_error(err, method=f"/{self._service}/{method}") from err

    async def _call(
        self,
        method: str,
        request: Any,
        deadline: float | None,
        metadata: Metadata,
        convert: Callable[[Any], T],
    ) -> T:
        """``method``'s answer, converted by ``convert``."""
        return convert(await self._unary(method, request, deadline, metadata))

    async def _stream(
        self,
        method: str,
        request: Any,
        deadline: float | None,
        metadata: Metadata,
        convert: Callable[[Any], Any],
    ) -> AsyncGenerator[Any, None]:
        call = getattr(self._stub, method)(
            request, timeout=self._deadlines.resolve(method, deadline), metadata=with_trace_context(metadata)
        )
        try:
            async for message in call:
                item = convert(message)
                if item is not None:
                    yield item
        except grpc.aio.AioRpcError as err:
            raise translate_rpc_error(err, method=f"/{self._service}/{method}") from err
        finally:
            # The consumer stopped early (break, aclose, cancellation): end the RPC on the server too.
            call.cancel()


class AsyncPoolClient(
    _AsyncClient,
    ToolCalls[Coroutine[Any, Any, t.CallToolResult]],
    PoolCalls[Coroutine[Any, Any, tuple[t.ServerStatus, ...]], AsyncGenerator[t.CatalogSnapshot, None]],
    ResultReads[Coroutine[Any, Any, t.ResultRead]],
    FeatureRequests[
        Coroutine[Any, Any, t.FeatureList],
        AsyncGenerator[t.FeatureSnapshot, None],
        Coroutine[Any, Any, t.FeatureReply],
        Coroutine[Any, Any, tuple[str, ...]],
        AsyncGenerator[tuple[str, bool], None],
    ],
):
    """The MCP pool: server states, the tool catalog, tool calls, and the servers' resources,
    prompts, completion and logging."""

    _service = "toolscout.mcp_pool.v1.McpPool"

    _stub: mcp_pool_pb2_grpc.McpPoolStub
    _stub_type = mcp_pool_pb2_grpc.McpPoolStub
    # Whether the channel was ever connected: only then is a lost connection waited for.
    _was_connected = False
    # Plain calls' stream to the pool (made with the first).
    _call_stream: CallStream | None = None

    async def list_tools(
        self,
        servers: Sequence[str] = (),
        *,
        include_unavailable: bool = False,
        wait_for_ready: bool | None = None,
        deadline: float | None = None,
        metadata: Metadata = None,
        principal: str = "",
    ) -> t.ToolCatalog:
        """The catalog (all servers, or only ``servers``). Raises NotFoundError for an unknown server.

        ``wait_for_ready`` waits (within the deadline) for the pool to be reachable instead of
        failing at once while it starts. ``principal``: a ``per_user`` server's tools are those
        it lists to that principal (FailedPreconditionError, with :func:`authorization_required`
        naming the server, when they have not signed in to it).
        """
        req = mcp_pool_pb2.ListToolsRequest(
            servers=list(servers), include_unavailable=include_unavailable, principal=principal
        )
        resp = await self._unary("ListTools", req, deadline, metadata, wait_for_ready)
        return wire.tool_catalog(resp)

    async def call(
        self,
        request: t.CallRequest,
        *,
        server_hint: str = "",
        deadline: float | None = None,
        metadata: Metadata = None,
        progress: ProgressCallback | None = None,
        relay: CallRelay | None = None,
    ) -> t.CallToolResult:
        """Run one tool call (one pool: ``server_hint`` is not needed).

        ``progress``: awaited with each progress notification of the MCP server, as it comes
        (``CallToolWithProgress``); without it the call is one unary ``CallTool``. ``relay``
        (instead): the server's requests to the host, its log messages and progress during the
        call go to the host and the host's answers back (``CallToolRelay``, :mod:`toolscout.client.relay`).

        A tool that fails is a result with ``is_error``. A channel that lost its connection is
        given a few seconds (``CONNECT_WAIT``, within the deadline) to reconnect before anything is
        sent; one that never connected, its first attempt.

        Raises:
            InvalidArgumentError: arguments not a JSON object.
            NotFoundError: no such server or tool.
            UnavailableError: not sent (server down or starting, pool stopping or not reachable);
                safe to retry. Its ``not_sent`` is always true.
            OutcomeUnknownError: sent, and then its server or the pool itself went away (the pool
                process was killed, the connection died) before answering: the tool may or may not
                have run. Never retried.
            DeadlineExceededError, ResourceExhaustedError (result too large).
        """
        rpc_deadline = self._deadlines.call_tool(deadline, request.timeout_seconds)
        wait = connect_wait(rpc_deadline)
        loop = asyncio.get_running_loop()
        started = loop.time()
        why = await self._unreachable(wait)
        if why is not None:
            raise not_sent_error(NOT_REACHABLE_MESSAGE.format(why=why), method=f"/{self._service}/CallTool")
        timeout = None if rpc_deadline is None else max(rpc_deadline - (loop.time() - started), 0.001)
        try:
            if relay is not None:
                rpc = RelayRpc(
                    self._stub,
                    wire.call_request_pb(request),
                    timeout,
                    with_trace_context(metadata),
                    f"/{self._service}/CallToolRelay",
                )
                resp = await relay_call(rpc, relay)
            elif progress is None:
                resp = await self._plain_call(wire.call_request_pb(request), timeout, metadata)
            else:
                resp = await self._call_with_progress(
                    wire.call_request_pb(request), timeout, metadata, progress
                )
        except UnavailableError as err:
            raise call_outcome_error(err) from err
        return wire.call_tool_result(resp)

    async def close(self) -> None:
        """Ends the call stream, then closes the channel if this client opened it."""
        if self._call_stream is not None:
            await self._call_stream.close()
        await super().close()

    async def _plain_call(
        self, request: mcp_pool_pb2.CallToolRequest, rpc_timeout: float | None, metadata: Metadata
    ) -> mcp_pool_pb2.CallToolResponse:
        """A call with nothing to relay: on the pool's call stream (:mod:`toolscout.client.call_stream`)
        unless it carries metadata (the caller's own, or a trace context) or the pool has no stream."""
        stream = self._call_stream
        if stream is None:
            stream = self._call_stream = CallStream(self._stub)
        if not stream.unsupported and not with_trace_context(metadata):
            try:
                return cast(mcp_pool_pb2.CallToolResponse, await stream.call(request, rpc_timeout))
            except StreamUnsupported:
                pass  # an older pool: nothing was sent
        return cast(
            mcp_pool_pb2.CallToolResponse,
            await self._unary("CallTool", request, rpc_timeout, metadata, resolved=True),
        )

    async def _call_with_progress(
        self,
        request: mcp_pool_pb2.CallToolRequest,
        rpc_timeout: float | None,
        metadata: Metadata,
        progress: ProgressCallback,
    ) -> mcp_pool_pb2.CallToolResponse:
        """``CallToolWithProgress``: each progress event handed to ``progress``, then the result."""
        method = f"/{self._service}/CallToolWithProgress"
        call = self._stub.CallToolWithProgress(
            request, timeout=rpc_timeout, metadata=with_trace_context(metadata)
        )
        try:
            async for event in call:
                if event.HasField("result"):
                    result: mcp_pool_pb2.CallToolResponse = event.result
                    return result
                await progress(wire.call_progress(event.progress))
        except grpc.aio.AioRpcError as err:
            raise translate_rpc_error(err, method=method) from err
        finally:
            # Ended early (cancelled, or the progress callback failed): end the call on the pool too.
            call.cancel()
        raise OutcomeUnknownError(
            "the pool ended the call without a result: the tool may or may not have run. It was not sent again.",
            code=grpc.StatusCode.ABORTED,
            method=method,
        )

    async def _unreachable(self, within: float) -> str | None:
        """None once the channel is connected (waiting up to ``within`` seconds), else why not.

        A channel this client never saw connected is given one connection attempt of its own: a
        failure seen before that attempt started (gRPC shares connections between channels to the
        same address, with their reconnect backoff) waits for the next one; a failed attempt is
        final. A channel that was connected waits for the reconnect.
        """
        channel = self._channel
        state = channel.get_state(try_to_connect=True)
        if state is grpc.ChannelConnectivity.READY:
            # The common case, on every call: no timeout scope to set up.
            self._was_connected = True
            return None
        attempted = state is grpc.ChannelConnectivity.CONNECTING
        try:
            async with asyncio.timeout(within):
                while state is not grpc.ChannelConnectivity.READY:
                    failed = state is grpc.ChannelConnectivity.TRANSIENT_FAILURE
                    if failed and attempted and not self._was_connected:
                        return "its connection attempt failed"
                    await channel.wait_for_state_change(state)
                    state = channel.get_state(try_to_connect=True)
                    attempted = attempted or state is grpc.ChannelConnectivity.CONNECTING
        except TimeoutError:
            return no_connection(within)
        self._was_connected = True
        return None


class AsyncDiscoveryClient(
    _AsyncClient,
    DiscoveryCalls[
        Coroutine[Any, Any, t.ToolPlan], Coroutine[Any, Any, t.SearchResult], Coroutine[Any, Any, t.Manifest]
    ],
):
    """Discovery: the loaded/deferred plan, the manifest and search_tools."""

    _service = "toolscout.discovery.v1.Discovery"

    _stub: discovery_pb2_grpc.DiscoveryStub
    _stub_type = discovery_pb2_grpc.DiscoveryStub

    def watch_plan(
        self,
        toolset: t.ToolsetLike = "",
        *,
        known_version: str = "",
        deadline: float | None = None,
        metadata: Metadata = None,
        **fields: Unpack[t.PlanFields],
    ) -> AsyncGenerator[t.ToolPlan, None]:
        """The plan for ``toolset`` (as :meth:`plan_tools`) once the catalog differs from
        ``known_version``, then again after every catalog change, until the caller stops iterating.

        Raises (while iterating) NotFoundError for an unknown toolset, UnavailableError when
        discovery goes away: follow again with the last plan's ``catalog_version``.
        """
        request = plan_request(toolset, fields)
        return self.watch(request, known_version=known_version, deadline=deadline, metadata=metadata)

    def watch(
        self,
        request: t.PlanRequest,
        *,
        known_version: str = "",
        deadline: float | None = None,
        metadata: Metadata = None,
    ) -> AsyncGenerator[t.ToolPlan, None]:
        """``WatchPlan`` for ``request`` (see :meth:`watch_plan`)."""
        req = discovery_pb2.WatchPlanRequest(plan=wire.plan_request_pb(request), known_version=known_version)
        return self._stream("WatchPlan", req, deadline, metadata, wire.watch_plan)


class AsyncOrchestratorClient(
    _AsyncClient,
    OrchestratorCalls[
        Coroutine[Any, Any, t.ChatResult],
        AsyncGenerator[t.ChatEvent, None],
        Coroutine[Any, Any, tuple[t.ModelInfo, ...]],
        Coroutine[Any, Any, tuple[t.ToolsetInfo, ...]],
    ],
):
    """The orchestrator: chat with tools (whole or streamed), models and toolsets."""

    _service = "toolscout.orchestrator.v1.Orchestrator"

    _stub: orchestrator_pb2_grpc.OrchestratorStub
    _stub_type = orchestrator_pb2_grpc.OrchestratorStub


class AsyncToolscoutClient(AsyncCloses):
    """The three async clients together: ``.pool``, ``.discovery``, ``.orchestrator``.

    Services at the same target share one channel.
    """

    def __init__(
        self, pool: AsyncPoolClient, discovery: AsyncDiscoveryClient, orchestrator: AsyncOrchestratorClient
    ) -> None:
        self.pool = pool
        self.discovery = discovery
        self.orchestrator = orchestrator
        self._channels: list[grpc.aio.Channel] = []

    @classmethod
    def connect(
        cls, *, pool: str, discovery: str, orchestrator: str, **fields: Unpack[ConnectFields]
    ) -> AsyncToolscoutClient:
        """Clients for the three services at these targets (``host:port`` or ``dns:///host:port``);
        ``fields`` as for each client's ``connect``."""
        settings = channel_fields(fields)
        deadlines = fields.get("deadlines")
        channels: dict[str, grpc.aio.Channel] = {}
        for target in (pool, discovery, orchestrator):
            if target not in channels:
                channels[target] = create_channel(target, aio=True, **settings)
        client = cls(
            AsyncPoolClient(channels[pool], deadlines=deadlines),
            AsyncDiscoveryClient(channels[discovery], deadlines=deadlines),
            AsyncOrchestratorClient(channels[orchestrator], deadlines=deadlines),
        )
        client._channels = list(channels.values())
        return client

    async def close(self) -> None:
        for channel in self._channels:
            await channel.close()
