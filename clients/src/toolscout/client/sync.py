"""Sync (blocking) clients for the three toolscout services: the same API as :mod:`toolscout.client.aio`.

Each client wraps a channel; ``connect(target, ...)`` opens one with :func:`create_channel` and
closes it with the client (``with``). Every method has a default deadline (see
``DEFAULT_DEADLINES``; ``deadline=`` seconds overrides it) and raises the :mod:`toolscout.client.errors`
tree instead of ``grpc.RpcError``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, Unpack

import grpc

from toolscout.client import types as t
from toolscout.client import wire
from toolscout.client._base import (
    CONNECT_WAIT,
    FIRST_CONNECT_WAIT,
    NOT_REACHABLE_MESSAGE,
    ClientBase,
    ConnectFields,
    channel_fields,
    connect_wait,
    no_connection,
)
from toolscout.client._calls import (
    Closes,
    DiscoveryCalls,
    FeatureRequests,
    Metadata,
    OrchestratorCalls,
    PoolCalls,
    ResultReads,
    ToolCalls,
)
from toolscout.client._trace_context import with_trace_context
from toolscout.client.channel import create_channel
from toolscout.client.errors import UnavailableError, call_outcome_error, not_sent_error, translate_rpc_error
from toolscout.client.relay import RelayRpc, SyncCallRelay, relay_call_sync
from toolscout.discovery.v1 import discovery_pb2_grpc
from toolscout.mcp_pool.v1 import mcp_pool_pb2, mcp_pool_pb2_grpc
from toolscout.orchestrator.v1 import orchestrator_pb2_grpc

if TYPE_CHECKING:
    from toolscout.client.sharded import ShardedPoolClient
    from toolscout.client.sharding import ServerPlacement

__all__ = ["DiscoveryClient", "OrchestratorClient", "PoolClient", "ToolscoutClient"]


T = TypeVar("T")


class _SyncClient(ClientBase[grpc.Channel], Closes):
    _aio = False

    def close(self) -> None:
        if self._owns_channel:
            self._channel.close()

    def _unary(
        self, method: str, request: Any, deadline: float | None, metadata: Metadata, *, resolved: bool = False
    ) -> Any:
        """Calls ``method`` (its default deadline unless ``deadline`` is given, or ``resolved``)."""
        timeout = deadline if resolved else self._deadlines.resolve(method, deadline)
        try:
            return getattr(self._stub, method)(
                request, timeout=timeout, metadata=with_trace_context(metadata)
            )
        except grpc.RpcError as err:
            raise translate_rpc_error(err, method=f"/{self._service}/{method}") from err

    def _call(
        self,
        method: str,
        request: Any,
        deadline: float | None,
        metadata: Metadata,
        convert: Callable[[Any], T],
    ) -> T:
        """``method``'s answer, converted by ``convert``."""
        return convert(self._unary(method, request, deadline, metadata))

    def _stream(
        self,
        method: str,
        request: Any,
        deadline: float | None,
        metadata: Metadata,
        convert: Callable[[Any], Any],
    ) -> Generator[Any, None, None]:
        call = getattr(self._stub, method)(
            request, timeout=self._deadlines.resolve(method, deadline), metadata=with_trace_context(metadata)
        )
        try:
            for message in call:
                item = convert(message)
                if item is not None:
                    yield item
        except grpc.RpcError as err:
            raise translate_rpc_error(err, method=f"/{self._service}/{method}") from err
        finally:
            # The consumer stopped early (break, aclose, cancellation): end the RPC on the server too.
            call.cancel()


# The server's overall health (an empty HealthCheckRequest), asked raw: no health-checking
# dependency for one probe.
_HEALTH_CHECK = "/grpc.health.v1.Health/Check"


def _connected(channel: grpc.Channel, within: float) -> bool:
    """Whether the channel is connected, or connects within ``within`` seconds.

    A blocking channel cannot tell its state without a subscription (whose polling thread fails
    when the channel closes under it), so a health check that waits for the connection asks.
    Any answer, UNIMPLEMENTED included, proves the connection.
    """
    check = channel.unary_unary(_HEALTH_CHECK, request_serializer=None, response_deserializer=None)
    try:
        check(b"", timeout=max(within, 0.001), wait_for_ready=True)
    except grpc.RpcError as err:
        code = err.code() if callable(getattr(err, "code", None)) else None
        return code not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
    return True


class PoolClient(
    _SyncClient,
    ToolCalls[t.CallToolResult],
    PoolCalls[tuple[t.ServerStatus, ...], Generator[t.CatalogSnapshot, None, None]],
    ResultReads[t.ResultRead],
    FeatureRequests[
        t.FeatureList,
        Generator[t.FeatureSnapshot, None, None],
        t.FeatureReply,
        tuple[str, ...],
        Generator[tuple[str, bool], None, None],
    ],
):
    """The MCP pool: server states, the tool catalog, tool calls, and the servers' resources,
    prompts, completion and logging."""

    _service = "toolscout.mcp_pool.v1.McpPool"

    _stub: mcp_pool_pb2_grpc.McpPoolStub
    _stub_type = mcp_pool_pb2_grpc.McpPoolStub
    # Whether the channel was ever connected: only then is a lost connection waited for long.
    _was_connected = False

    def list_tools(
        self,
        servers: Sequence[str] = (),
        *,
        include_unavailable: bool = False,
        deadline: float | None = None,
        metadata: Metadata = None,
        principal: str = "",
    ) -> t.ToolCatalog:
        """The catalog (all servers, or only ``servers``; as ``principal`` sees it, see
        :meth:`toolscout.client.aio.AsyncPoolClient.list_tools`). Raises NotFoundError for an
        unknown server."""
        req = mcp_pool_pb2.ListToolsRequest(
            servers=list(servers), include_unavailable=include_unavailable, principal=principal
        )
        resp = self._unary("ListTools", req, deadline, metadata)
        return wire.tool_catalog(resp)

    def call(
        self,
        request: t.CallRequest,
        *,
        server_hint: str = "",
        deadline: float | None = None,
        metadata: Metadata = None,
        relay: SyncCallRelay | None = None,
    ) -> t.CallToolResult:
        """Run one tool call (one pool: ``server_hint`` is not needed). ``relay``: the server's
        requests to the host, log messages and progress during the call are handed to it and its
        answers sent back (``CallToolRelay``). A tool that fails is a
        result with ``is_error``. Errors as for
        :meth:`toolscout.client.AsyncPoolClient.call`: ``UnavailableError`` only when the call
        was not sent, ``OutcomeUnknownError`` when it was and the pool or its server went away.
        """
        rpc_deadline = self._deadlines.call_tool(deadline, request.timeout_seconds)
        wait = connect_wait(rpc_deadline, CONNECT_WAIT if self._was_connected else FIRST_CONNECT_WAIT)
        started = time.monotonic()
        if not _connected(self._channel, wait):
            raise not_sent_error(
                NOT_REACHABLE_MESSAGE.format(why=no_connection(wait)), method=f"/{self._service}/CallTool"
            )
        self._was_connected = True
        timeout = None if rpc_deadline is None else max(rpc_deadline - (time.monotonic() - started), 0.001)
        try:
            if relay is not None:
                rpc = RelayRpc(
                    self._stub,
                    wire.call_request_pb(request),
                    timeout,
                    with_trace_context(metadata),
                    f"/{self._service}/CallToolRelay",
                )
                resp = relay_call_sync(rpc, relay)
            else:
                resp = self._unary(
                    "CallTool", wire.call_request_pb(request), timeout, metadata, resolved=True
                )
        except UnavailableError as err:
            raise call_outcome_error(err) from err
        return wire.call_tool_result(resp)


class DiscoveryClient(_SyncClient, DiscoveryCalls[t.ToolPlan, t.SearchResult, t.Manifest]):
    """Discovery: the loaded/deferred plan, the manifest and search_tools."""

    _service = "toolscout.discovery.v1.Discovery"

    _stub: discovery_pb2_grpc.DiscoveryStub
    _stub_type = discovery_pb2_grpc.DiscoveryStub


class OrchestratorClient(
    _SyncClient,
    OrchestratorCalls[
        t.ChatResult, Generator[t.ChatEvent, None, None], tuple[t.ModelInfo, ...], tuple[t.ToolsetInfo, ...]
    ],
):
    """The orchestrator: chat with tools (whole or streamed), models and toolsets."""

    _service = "toolscout.orchestrator.v1.Orchestrator"

    _stub: orchestrator_pb2_grpc.OrchestratorStub
    _stub_type = orchestrator_pb2_grpc.OrchestratorStub


class ToolscoutClient(Closes):
    """The three sync clients together: ``.pool``, ``.discovery``, ``.orchestrator``.

    Services at the same target share one channel. ``.pool`` is a :class:`ShardedPoolClient` when
    the pool is sharded (``pool`` given as one target per shard).
    """

    def __init__(
        self,
        pool: PoolClient | ShardedPoolClient,
        discovery: DiscoveryClient,
        orchestrator: OrchestratorClient,
    ) -> None:
        self.pool = pool
        self.discovery = discovery
        self.orchestrator = orchestrator
        self._channels: list[grpc.Channel] = []

    @classmethod
    def connect(
        cls,
        *,
        pool: str | Sequence[str],
        discovery: str,
        orchestrator: str,
        placement: Mapping[str, ServerPlacement] | None = None,
        **fields: Unpack[ConnectFields],
    ) -> ToolscoutClient:
        """Clients for the three services at these targets (``host:port`` or ``dns:///host:port``).

        ``pool`` is one target, or one per shard of a sharded pool (shard ``k`` at ``pool[k]``;
        ``placement`` of pinned and everywhere-servers as for :class:`ShardedPoolClient`);
        ``fields`` as for each client's ``connect``.
        """
        from toolscout.client.sharded import ShardedPoolClient  # noqa: PLC0415 - it imports this module

        settings = channel_fields(fields)
        deadlines = fields.get("deadlines")
        shard_targets = [pool] if isinstance(pool, str) else list(pool)
        if not shard_targets:
            raise ValueError("no pool target")
        channels: dict[str, grpc.Channel] = {}
        for target in (*shard_targets, discovery, orchestrator):
            if target not in channels:
                channels[target] = create_channel(target, aio=False, **settings)
        shards = [PoolClient(channels[target], deadlines=deadlines) for target in shard_targets]
        client = cls(
            shards[0] if len(shards) == 1 else ShardedPoolClient(shards, placement=placement),
            DiscoveryClient(channels[discovery], deadlines=deadlines),
            OrchestratorClient(channels[orchestrator], deadlines=deadlines),
        )
        client._channels = list(channels.values())
        return client

    def close(self) -> None:
        for channel in self._channels:
            channel.close()
