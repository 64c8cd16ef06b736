"""The discovery and pool seams over the client library (``toolscout.client``).

The orchestrator calls the other services the way any caller does: typed async clients, the
library's channel policy and deadlines. Client errors become domain errors here, once, with the
kit's :func:`~toolscout_kit.status.error_from_client`; the deadline left for the chat is passed
down as the call's deadline, and cancelling the awaiting task cancels the call (the pool then
sends ``notifications/cancelled`` to the MCP server).

Tool calls go through the sharded pool client, which sends each call to the shard that runs the
tool's server (one shard when the pool is not sharded). The tool loop passes the server it holds
for the tool (from the plan or the found tool's definition) as the call's ``server_hint``.
"""

from __future__ import annotations

from toolscout.client import (
    AsyncDiscoveryClient,
    AsyncShardedPoolClient,
    CallRequest,
    CallToolResult,
    PlanRequest,
    ReadRequest,
    ResultRead,
    SearchRequest,
    SearchResult,
    ToolPlan,
    ToolscoutClientError,
)

from toolscout_kit.status import error_from_client

__all__ = ["ClientDiscovery", "ClientPool"]


class ClientDiscovery:
    """:class:`~orchestrator_svc.seams.DiscoverySeam` over an :class:`AsyncDiscoveryClient`."""

    def __init__(self, client: AsyncDiscoveryClient) -> None:
        self._client = client

    async def plan_tools(self, request: PlanRequest, *, deadline: float | None) -> ToolPlan:
        try:
            return await self._client.plan(request, deadline=deadline)
        except ToolscoutClientError as err:
            raise error_from_client(err, "discovery") from err

    async def search_tools(self, request: SearchRequest, *, deadline: float | None) -> SearchResult:
        try:
            return await self._client.search(request, deadline=deadline)
        except ToolscoutClientError as err:
            raise error_from_client(err, "discovery") from err


class ClientPool:
    """:class:`~orchestrator_svc.seams.PoolSeam` over an :class:`AsyncShardedPoolClient`."""

    def __init__(self, client: AsyncShardedPoolClient) -> None:
        self._client = client

    async def call_tool(
        self, request: CallRequest, *, server_hint: str = "", deadline: float | None
    ) -> CallToolResult:
        try:
            return await self._client.call(request, server_hint=server_hint, deadline=deadline)
        except ToolscoutClientError as err:
            raise error_from_client(err, "pool") from err

    async def read_result(self, request: ReadRequest, *, deadline: float | None) -> ResultRead:
        try:
            return await self._client.read_result(request, deadline=deadline)
        except ToolscoutClientError as err:
            raise error_from_client(err, "pool") from err
