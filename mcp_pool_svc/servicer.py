"""gRPC adapter for :class:`mcp_pool_svc.pool.McpPool`: protobuf in, domain call, protobuf out.

Domain errors propagate unchanged; the kit's error interceptor maps them to status codes. A call
the pool did not send (:class:`~mcp_pool_svc.errors.ServerUnavailableError`) is marked so in the
trailing metadata (``toolscout-not-sent: 1``): gRPC answers ``UNAVAILABLE`` by itself when the
connection dies mid-call, so the code alone cannot tell callers that nothing ran. A
:class:`~mcp_pool_svc.errors.NotOwnerError` (a call for a server another shard runs) also puts
the owners there, where the sharded client reads them to route the call.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
from toolscout.client import NOT_SENT_METADATA, SHARD_COUNT_KEY, SHARD_OWNERS_KEY
from toolscout.common.v1 import common_pb2
from toolscout.mcp_pool.v1 import mcp_pool_pb2, mcp_pool_pb2_grpc

from mcp_pool_svc.catalog import CatalogSnapshot, CatalogTool
from mcp_pool_svc.errors import NotOwnerError, ServerUnavailableError
from mcp_pool_svc.pool import McpPool
from mcp_pool_svc.results import ContentItem, ToolResult
from mcp_pool_svc.supervisor import ServerState, ServerStatus

__all__ = ["McpPoolServicer", "content_to_proto", "tool_to_proto"]

_STATES = {
    ServerState.STARTING: mcp_pool_pb2.SERVER_STATE_STARTING,
    ServerState.READY: mcp_pool_pb2.SERVER_STATE_READY,
    ServerState.RECONNECTING: mcp_pool_pb2.SERVER_STATE_RECONNECTING,
    ServerState.FAILED: mcp_pool_pb2.SERVER_STATE_FAILED,
    ServerState.IDLE: mcp_pool_pb2.SERVER_STATE_IDLE,
    ServerState.STOPPED: mcp_pool_pb2.SERVER_STATE_STOPPED,
}


def tool_to_proto(tool: CatalogTool) -> common_pb2.Tool:
    d = tool.tool
    return common_pb2.Tool(
        server=tool.server,
        name=d.name,
        llm_name=tool.llm_name,
        title=d.title,
        description=d.description,
        input_schema_json=d.input_schema_json,
        output_schema_json=d.output_schema_json,
        annotations_json=d.annotations_json,
        available=tool.available,
    )


def content_to_proto(item: ContentItem) -> common_pb2.ContentBlock:
    return common_pb2.ContentBlock(
        type=item.type,
        text=item.text,
        data=item.data,
        mime_type=item.mime_type,
        uri=item.uri,
        name=item.name,
        raw_json=item.raw_json,
    )


def _status_to_proto(status: ServerStatus) -> mcp_pool_pb2.ServerStatus:
    return mcp_pool_pb2.ServerStatus(
        name=status.name,
        transport=status.transport,
        state=_STATES[status.state],
        tool_count=status.tool_count,
        restarts=status.restarts,
        last_error=status.last_error,
        state_since_unix=status.state_since_unix,
        defer_loading=status.defer_loading,
        health_service=status.health_service,
        server_info=status.server_info,
        next_retry_unix=status.next_retry_unix,
        protocol_version=status.protocol_version,
        shards=list(status.shards),
        placement=status.placement,
        tool_cache_ttl_seconds=status.tool_cache_ttl_seconds,
        change_notifications=status.change_notifications,
        serialize_writes=status.serialize_writes,
        serialized_tools=status.serialized_tools,
        unannotated_tools=status.unannotated_tools,
    )


def _tools(snapshot: CatalogSnapshot) -> list[common_pb2.Tool]:
    return [tool_to_proto(t) for t in snapshot.tools]


def _result_to_proto(result: ToolResult) -> mcp_pool_pb2.CallToolResponse:
    return mcp_pool_pb2.CallToolResponse(
        content=[content_to_proto(c) for c in result.content],
        structured_content_json=result.structured_content_json,
        is_error=result.is_error,
        truncated=result.truncated,
        server=result.server,
        tool=result.tool,
        duration_seconds=result.duration_seconds,
    )


def _refusal_metadata(err: NotOwnerError) -> tuple[tuple[str, str], ...]:
    return ((SHARD_OWNERS_KEY, ",".join(map(str, err.owners))), (SHARD_COUNT_KEY, str(err.count)))


def _not_sent_metadata(err: ServerUnavailableError) -> tuple[tuple[str, str], ...]:
    refusal = _refusal_metadata(err) if isinstance(err, NotOwnerError) else ()
    return (*NOT_SENT_METADATA, *refusal)


class McpPoolServicer(mcp_pool_pb2_grpc.McpPoolServicer):
    """``toolscout.mcp_pool.v1.McpPool`` over an :class:`McpPool`."""

    def __init__(self, pool: McpPool) -> None:
        self._pool = pool

    def _shard(self) -> mcp_pool_pb2.ShardInfo:
        return mcp_pool_pb2.ShardInfo(index=self._pool.shard_index, count=self._pool.shard_count)

    async def ListServers(
        self, request: mcp_pool_pb2.ListServersRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> mcp_pool_pb2.ListServersResponse:
        return mcp_pool_pb2.ListServersResponse(
            servers=[_status_to_proto(s) for s in self._pool.list_servers()], shard=self._shard()
        )

    async def ListTools(
        self, request: mcp_pool_pb2.ListToolsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> mcp_pool_pb2.ListToolsResponse:
        try:
            snapshot = self._pool.list_tools(
                list(request.servers), include_unavailable=request.include_unavailable
            )
        except NotOwnerError as err:
            context.set_trailing_metadata(_refusal_metadata(err))
            raise
        return mcp_pool_pb2.ListToolsResponse(
            tools=_tools(snapshot), catalog_version=snapshot.version, shard=self._shard()
        )

    async def CallTool(
        self, request: mcp_pool_pb2.CallToolRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> mcp_pool_pb2.CallToolResponse:
        remaining = context.time_remaining()
        # Finish (and cancel on the MCP server) a little before the caller's deadline so the
        # caller gets our DEADLINE_EXCEEDED rather than its own.
        deadline = max(remaining - 0.05, 0.001) if remaining is not None else None
        try:
            result = await self._pool.call_tool(
                server=request.server,
                tool=request.tool,
                llm_name=request.llm_name,
                arguments=request.arguments_json,
                meta=request.meta_json,
                timeout_seconds=request.timeout_seconds,
                deadline=deadline,
            )
        except ServerUnavailableError as err:
            context.set_trailing_metadata(_not_sent_metadata(err))
            raise
        return _result_to_proto(result)

    async def WatchCatalog(
        self, request: mcp_pool_pb2.WatchCatalogRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[mcp_pool_pb2.WatchCatalogResponse]:
        async for update in self._pool.watch_catalog(request.known_version):
            yield mcp_pool_pb2.WatchCatalogResponse(
                catalog_version=update.snapshot.version,
                tools=_tools(update.snapshot),
                changed_servers=list(update.changed_servers),
                shard=self._shard(),
            )
