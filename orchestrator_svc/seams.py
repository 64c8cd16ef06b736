"""What the loop needs from discovery and the pool, as plain-Python interfaces.

Each seam takes the request value the client library defines (``toolscout.client``:
:class:`PlanRequest`, :class:`SearchRequest`, :class:`CallRequest`) and returns its answer value,
so a new field is set where it is known and read where it is used, and nothing in between changes.
The adapters over the client library live in :mod:`orchestrator_svc.downstream`; unit tests use
in-memory fakes. Both raise toolscout_kit domain errors only.
"""

from __future__ import annotations

from typing import Protocol

from toolscout.client import (
    CallRequest,
    CallToolResult,
    PlanRequest,
    ReadRequest,
    ResultRead,
    SearchRequest,
    SearchResult,
    ToolPlan,
)

__all__ = ["DiscoverySeam", "PoolSeam"]


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
