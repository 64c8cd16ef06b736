"""gRPC adapters of the discovery and pool seams (the only domain-facing code that imports grpc).

Every AioRpcError is translated once, here, with the kit's ``error_from_rpc``; the deadline left
for the chat is passed down as the RPC timeout, and cancelling the awaiting task cancels the RPC
(the pool then sends ``notifications/cancelled`` to the MCP server).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import grpc
from toolscout.common.v1 import common_pb2
from toolscout.discovery.v1 import discovery_pb2, discovery_pb2_grpc
from toolscout.mcp_pool.v1 import mcp_pool_pb2, mcp_pool_pb2_grpc

from orchestrator_svc.messages import Attachment, ToolDef
from orchestrator_svc.seams import SearchOutcome, TokenCounts, ToolOutcome, ToolPlan
from toolscout_kit.status import error_from_rpc

__all__ = ["GrpcDiscovery", "GrpcPool", "tool_def"]

_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
_SCHEMA_CACHE_LIMIT = 20_000


class _Schemas:
    """Parsed input schemas by their JSON text: the same definitions come back on every plan."""

    def __init__(self) -> None:
        self._cache: dict[str, dict[str, Any]] = {}

    def parse(self, text: str) -> dict[str, Any]:
        cached = self._cache.get(text)
        if cached is not None:
            return cached
        try:
            value = json.loads(text) if text else _EMPTY_SCHEMA
        except json.JSONDecodeError:
            value = _EMPTY_SCHEMA
        schema = value if isinstance(value, dict) else _EMPTY_SCHEMA
        if len(self._cache) >= _SCHEMA_CACHE_LIMIT:
            self._cache.clear()
        self._cache[text] = schema
        return schema


_SCHEMAS = _Schemas()


def tool_def(tool: common_pb2.Tool) -> ToolDef:
    return ToolDef(
        llm_name=tool.llm_name,
        description=tool.description,
        input_schema=_SCHEMAS.parse(tool.input_schema_json),
        server=tool.server,
        name=tool.name,
    )


def attachment(block: common_pb2.ContentBlock) -> Attachment:
    return Attachment(
        type=block.type,
        text=block.text,
        data=block.data,
        mime_type=block.mime_type,
        uri=block.uri,
        name=block.name,
        raw_json=block.raw_json,
    )


class GrpcDiscovery:
    def __init__(self, channel: grpc.aio.Channel) -> None:
        self._stub = discovery_pb2_grpc.DiscoveryStub(channel)

    async def plan_tools(
        self,
        *,
        toolset: str,
        discovered: Sequence[str],
        provider: str,
        time_limit: float | None,
        with_deferred_names: bool = False,
    ) -> ToolPlan:
        request = discovery_pb2.PlanToolsRequest(
            toolset=toolset,
            discovered_tools=list(discovered),
            provider=provider,
            include_deferred_names=with_deferred_names,
        )
        try:
            resp = await self._stub.PlanTools(request, timeout=time_limit)
        except grpc.aio.AioRpcError as err:
            raise error_from_rpc(err, "discovery") from err
        tokens = resp.tokens
        return ToolPlan(
            loaded_tools=[tool_def(t) for t in resp.loaded_tools],
            search_tool=tool_def(resp.search_tool) if resp.has_search_tool else None,
            manifest_system_message=resp.manifest_system_message,
            deferred_names=frozenset(resp.deferred_tool_names),
            tokens=TokenCounts(
                tokens.all_definitions_tokens, tokens.sent_tokens, tokens.encoding, tokens.estimate
            ),
            dropped=list(resp.dropped_tools),
        )

    async def search_tools(
        self, *, toolset: str, arguments_json: str, loaded: Sequence[str], time_limit: float | None
    ) -> SearchOutcome:
        request = discovery_pb2.SearchToolsRequest(
            toolset=toolset, arguments_json=arguments_json or "{}", loaded_tools=list(loaded)
        )
        try:
            resp = await self._stub.SearchTools(request, timeout=time_limit)
        except grpc.aio.AioRpcError as err:
            raise error_from_rpc(err, "discovery") from err
        return SearchOutcome(resp.result_text, [tool_def(t) for t in resp.newly_loaded])


class GrpcPool:
    def __init__(self, channel: grpc.aio.Channel) -> None:
        self._stub = mcp_pool_pb2_grpc.McpPoolStub(channel)

    async def call_tool(
        self, *, llm_name: str, arguments_json: str, meta_json: str, time_limit: float | None
    ) -> ToolOutcome:
        request = mcp_pool_pb2.CallToolRequest(
            llm_name=llm_name, arguments_json=arguments_json, meta_json=meta_json
        )
        try:
            resp = await self._stub.CallTool(request, timeout=time_limit)
        except grpc.aio.AioRpcError as err:
            raise error_from_rpc(err, "pool") from err
        return ToolOutcome(
            content=[attachment(b) for b in resp.content],
            structured_content_json=resp.structured_content_json,
            is_error=resp.is_error,
            server=resp.server,
            truncated=resp.truncated,
        )
