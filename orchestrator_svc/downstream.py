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

import json
from collections.abc import Iterable, Sequence
from typing import Any

from toolscout.client import (
    EMPTY_INPUT_SCHEMA_JSON,
    AsyncDiscoveryClient,
    AsyncShardedPoolClient,
    ToolscoutClientError,
    ToolsetRef,
)
from toolscout.client import Tool as ClientTool
from toolscout.client import ToolPlan as ClientPlan

from orchestrator_svc.messages import ToolDef
from orchestrator_svc.seams import SearchOutcome, TokenCounts, ToolOutcome, ToolPlan
from toolscout_kit.json_text import json_object_or_none
from toolscout_kit.status import error_from_client

__all__ = ["ClientDiscovery", "ClientPool", "Routes", "tool_def"]

_SCHEMA_CACHE_LIMIT = 20_000
_ROUTE_LIMIT = 200_000


class Routes:
    """The server of every LLM-facing tool name discovery has handed out, for routing calls."""

    def __init__(self, limit: int = _ROUTE_LIMIT) -> None:
        self._servers: dict[str, str] = {}
        self._limit = limit

    def learn(self, tools: Iterable[ClientTool]) -> None:
        for tool in tools:
            if tool.server:
                if len(self._servers) >= self._limit and tool.llm_name not in self._servers:
                    self._servers.clear()
                self._servers[tool.llm_name] = tool.server

    def learn_plan(self, plan: ClientPlan) -> None:
        self.learn(plan.loaded_tools)
        self.learn(plan.deferred_tools)

    def server_of(self, llm_name: str) -> str:
        """The tool's server, or "" when no plan named it (the client then guesses the route)."""
        return self._servers.get(llm_name, "")


class _Schemas:
    """Parsed input schemas by their JSON text: the same definitions come back on every plan."""

    def __init__(self) -> None:
        self._cache: dict[str, dict[str, Any]] = {}
        self._empty: dict[str, Any] = json.loads(EMPTY_INPUT_SCHEMA_JSON)

    def parse(self, text: str) -> dict[str, Any]:
        cached = self._cache.get(text)
        if cached is not None:
            return cached
        schema = json_object_or_none(text) or self._empty
        if len(self._cache) >= _SCHEMA_CACHE_LIMIT:
            self._cache.clear()
        self._cache[text] = schema
        return schema


_SCHEMAS = _Schemas()


def tool_def(tool: ClientTool, *, deferred: bool = False) -> ToolDef:
    return ToolDef(
        llm_name=tool.llm_name,
        description=tool.description,
        input_schema=_SCHEMAS.parse(tool.input_schema_json),
        server=tool.server,
        name=tool.name,
        deferred=deferred,
    )


def _plan(plan: ClientPlan) -> ToolPlan:
    tokens = plan.tokens
    return ToolPlan(
        loaded_tools=[tool_def(t) for t in plan.loaded_tools],
        search_tool=tool_def(plan.search_tool) if plan.search_tool is not None else None,
        manifest_system_message=plan.manifest_system_message,
        deferred_names=frozenset(plan.deferred_tool_names),
        tokens=TokenCounts(
            tokens.all_definitions_tokens, tokens.sent_tokens, tokens.encoding, tokens.estimate
        ),
        dropped=list(plan.dropped_tools),
        discovered=list(plan.discovered_tools),
        catalog_version=plan.catalog_version,
        deferred_tools=[tool_def(t, deferred=True) for t in plan.deferred_tools],
        deferred_count=plan.deferred_count,
    )


class ClientDiscovery:
    """:class:`~orchestrator_svc.seams.DiscoverySeam` over an :class:`AsyncDiscoveryClient`."""

    def __init__(self, client: AsyncDiscoveryClient, routes: Routes | None = None) -> None:
        self._client = client
        self._routes = routes if routes is not None else Routes()

    async def plan_tools(
        self,
        *,
        toolset: str,
        discovered: Sequence[str],
        provider: str,
        time_limit: float | None,
        with_deferred_names: bool = False,
        with_deferred_tools: bool = False,
        toolset_json: str = "",
    ) -> ToolPlan:
        try:
            plan = await self._client.plan_tools(
                ToolsetRef(name=toolset, filter_json=toolset_json),
                discovered_tools=discovered,
                provider=provider,
                include_deferred_names=with_deferred_names,
                include_deferred_tools=with_deferred_tools,
                deadline=time_limit,
            )
        except ToolscoutClientError as err:
            raise error_from_client(err, "discovery") from err
        self._routes.learn_plan(plan)
        return _plan(plan)

    async def search_tools(
        self,
        *,
        toolset: str,
        arguments_json: str,
        loaded: Sequence[str],
        time_limit: float | None,
        discovered: Sequence[str] = (),
        provider: str = "",
        compact_text: bool = False,
        toolset_json: str = "",
    ) -> SearchOutcome:
        try:
            result = await self._client.search_tools(
                toolset=ToolsetRef(name=toolset, filter_json=toolset_json),
                arguments_json=arguments_json or "{}",
                loaded_tools=loaded,
                include_plan=bool(provider),
                discovered_tools=discovered,
                provider=provider,
                compact_text=compact_text,
                deadline=time_limit,
            )
        except ToolscoutClientError as err:
            raise error_from_client(err, "discovery") from err
        self._routes.learn(result.newly_loaded)
        if result.plan is not None:
            self._routes.learn_plan(result.plan)
        return SearchOutcome(
            result.result_text,
            [tool_def(t) for t in result.newly_loaded],
            _plan(result.plan) if result.plan is not None else None,
        )


class ClientPool:
    """:class:`~orchestrator_svc.seams.PoolSeam` over an :class:`AsyncShardedPoolClient`."""

    def __init__(self, client: AsyncShardedPoolClient, routes: Routes | None = None) -> None:
        self._client = client
        self._routes = routes if routes is not None else Routes()

    async def call_tool(
        self, *, llm_name: str, arguments_json: str, meta_json: str, time_limit: float | None
    ) -> ToolOutcome:
        try:
            result = await self._client.call_tool(
                llm_name,
                arguments_json,
                server_hint=self._routes.server_of(llm_name),
                meta=meta_json or None,
                deadline=time_limit,
            )
        except ToolscoutClientError as err:
            raise error_from_client(err, "pool") from err
        return ToolOutcome(
            content=list(result.content),
            structured_content_json=result.structured_content_json,
            is_error=result.is_error,
            server=result.server,
            truncated=result.truncated,
        )
