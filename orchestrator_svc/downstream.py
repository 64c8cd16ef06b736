"""The discovery and pool seams over the client library (``toolscout.client``).

The orchestrator calls the other services the way any caller does: typed async clients, the
library's channel policy and deadlines. Client errors become domain errors here, once, with the
kit's :func:`~toolscout_kit.status.error_from_client`; the deadline left for the chat is passed
down as the call's deadline, and cancelling the awaiting task cancels the call (the pool then
sends ``notifications/cancelled`` to the MCP server).

Tool calls go through the sharded pool client, which sends each call to the shard that runs the
tool's server (one shard when the pool is not sharded). The server of a tool comes from the plans
and search results discovery returned (:class:`Routes`): the tool loop only has the LLM-facing name.
"""

from __future__ import annotations

from collections.abc import Iterable

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
    Tool,
    ToolPlan,
    ToolscoutClientError,
)

from toolscout_kit.status import error_from_client

__all__ = ["ClientDiscovery", "ClientPool", "Routes"]

_ROUTE_LIMIT = 200_000


class Routes:
    """The server of every LLM-facing tool name discovery has handed out, for routing calls."""

    def __init__(self, limit: int = _ROUTE_LIMIT) -> None:
        self._servers: dict[str, str] = {}
        self._limit = limit

    def learn(self, tools: Iterable[Tool]) -> None:
        for tool in tools:
            if tool.server:
                if len(self._servers) >= self._limit and tool.llm_name not in self._servers:
                    self._servers.clear()
                self._servers[tool.llm_name] = tool.server

    def learn_plan(self, plan: ToolPlan) -> None:
        self.learn(plan.loaded_tools)
        self.learn(plan.deferred_tools)

    def server_of(self, llm_name: str) -> str:
        """The tool's server, or "" when no plan named it (the client then guesses the route)."""
        return self._servers.get(llm_name, "")


class ClientDiscovery:
    """:class:`~orchestrator_svc.seams.DiscoverySeam` over an :class:`AsyncDiscoveryClient`."""

    def __init__(self, client: AsyncDiscoveryClient, routes: Routes | None = None) -> None:
        self._client = client
        self._routes = routes if routes is not None else Routes()

    async def plan_tools(self, request: PlanRequest, *, deadline: float | None) -> ToolPlan:
        try:
            plan = await self._client.plan(request, deadline=deadline)
        except ToolscoutClientError as err:
            raise error_from_client(err, "discovery") from err
        self._routes.learn_plan(plan)
        return plan

    async def search_tools(self, request: SearchRequest, *, deadline: float | None) -> SearchResult:
        try:
            result = await self._client.search(request, deadline=deadline)
        except ToolscoutClientError as err:
            raise error_from_client(err, "discovery") from err
        self._routes.learn(result.newly_loaded)
        if result.plan is not None:
            self._routes.learn_plan(result.plan)
        return result


class ClientPool:
    """:class:`~orchestrator_svc.seams.PoolSeam` over an :class:`AsyncShardedPoolClient`."""

    def __init__(self, client: AsyncShardedPoolClient, routes: Routes | None = None) -> None:
        self._client = client
        self._routes = routes if routes is not None else Routes()

    async def call_tool(self, request: CallRequest, *, deadline: float | None) -> CallToolResult:
        try:
            return await self._client.call(
                request, server_hint=self._routes.server_of(request.name), deadline=deadline
            )
        except ToolscoutClientError as err:
            raise error_from_client(err, "pool") from err

    async def read_result(self, request: ReadRequest, *, deadline: float | None) -> ResultRead:
        try:
            return await self._client.read_result(request, deadline=deadline)
        except ToolscoutClientError as err:
            raise error_from_client(err, "pool") from err
