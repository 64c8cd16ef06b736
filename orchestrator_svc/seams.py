"""What the loop needs from discovery and the pool: the seams and their adapters over the client library.

Each seam (:class:`DiscoverySeam`, :class:`PoolSeam`) is a plain-Python interface that takes the
request value the client library defines (``toolscout.client``: :class:`PlanRequest`,
:class:`SearchRequest`, :class:`CallRequest`) and returns its answer value, so a new field is set
where it is known and read where it is used, and nothing in between changes. Unit tests use
in-memory fakes; the service uses the adapters below (:class:`ClientDiscovery`,
:class:`ClientPool`). Both raise toolscout_kit domain errors only.

The orchestrator calls the other services the way any caller does: typed async clients, the
library's channel policy and deadlines. Client errors become domain errors in the adapters, once,
with the kit's :func:`~toolscout_kit.status.error_from_client`; the deadline left for the chat is
passed down as the call's deadline, and cancelling the awaiting task cancels the call (the pool then
sends ``notifications/cancelled`` to the MCP server).

Tool calls go through the sharded pool client, which sends each call to the shard that runs the
tool's server (one shard when the pool is not sharded). The tool loop passes the server it holds
for the tool (from the plan or the found tool's definition) as the call's ``server_hint``.
"""

from __future__ import annotations

from typing import Protocol

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

__all__ = ["ClientDiscovery", "ClientPool", "DiscoverySeam", "PoolSeam"]


class DiscoverySeam(Protocol):
    async def plan_tools(self, request: PlanRequest, *, deadline: float | None) -> ToolPlan:
        """``deferred_tool_names`` / ``deferred_tools`` are filled only when asked for (they can be large).

        Raises NotFoundError (unknown toolset), InvalidArgumentError (a malformed inline one),
        UnavailableError.
        """
        ...

    async def search_tools(self, request: SearchRequest, *, deadline: float | None) -> SearchResult:
        """One search; with ``include_plan`` the result carries the plan after it (one round trip).

        Raises InvalidArgumentError / NotFoundError with a message written for the LLM.
        """
        ...


class PoolSeam(Protocol):
    async def call_tool(
        self, request: CallRequest, *, server_hint: str = "", deadline: float | None
    ) -> CallToolResult:
        """A failing tool is data (``is_error``); raises NotFoundError, UnavailableError, ...

        ``server_hint``: the tool's server as the caller holds it (from the plan), so a sharded pool
        routes the call without guessing it from the name; "" when unknown."""
        ...

    async def read_result(self, request: ReadRequest, *, deadline: float | None) -> ResultRead:
        """A read of a result the pool kept behind a handle; raises NotFoundError (unknown,
        another caller's or expired: the message, written for the model, says so),
        InvalidArgumentError (a bad offset, pattern or path), UnavailableError."""
        ...


class ClientDiscovery:
    """:class:`DiscoverySeam` over an :class:`AsyncDiscoveryClient`."""

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
    """:class:`PoolSeam` over an :class:`AsyncShardedPoolClient`."""

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
