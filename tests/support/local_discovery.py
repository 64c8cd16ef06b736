"""The real discovery engine behind the orchestrator's discovery seam, in process (no gRPC).

Tests and benchmarks of the tool loop use it where discovery's own behaviour matters (its plans,
search texts and the stable surface's search_tools / call_tool definitions).
"""

from __future__ import annotations

from toolscout.client import PlanRequest, SearchRequest, SearchResult, ToolPlan

from discovery_svc.engine import DiscoveryEngine

__all__ = ["LocalDiscovery"]


class LocalDiscovery:
    """The real discovery domain service behind the orchestrator's seam, in process."""

    def __init__(self, service: DiscoveryEngine) -> None:
        self.service = service
        # Every PlanTools request, in order (what a caller asked for, e.g. deferred definitions).
        self.plan_requests: list[PlanRequest] = []

    async def plan_tools(self, request: PlanRequest, *, deadline: float | None) -> ToolPlan:
        self.plan_requests.append(request)
        return await self.service.plan_tools(request)

    async def search_tools(self, request: SearchRequest, *, deadline: float | None) -> SearchResult:
        return await self.service.search_tools(request, time_limit=deadline)
