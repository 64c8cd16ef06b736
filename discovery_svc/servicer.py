"""gRPC adapter for toolscout.discovery.v1.Discovery: messages in, domain calls, messages out.

Requests and answers are the shared values of the client library (``toolscout.client``), read and
written by :mod:`toolscout.client.wire`, so a new field never touches this module. Domain errors
propagate to the kit's error interceptor, which maps them to status codes; their messages
(written for the LLM) become the status details unchanged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractContextManager

import grpc
from opentelemetry.trace import Span
from toolscout.client import ToolsetRef, wire
from toolscout.discovery.v1 import discovery_pb2, discovery_pb2_grpc

from discovery_svc.engine import DiscoveryEngine
from toolscout_kit.tracing import NO_TRACING, Tracing

__all__ = ["DiscoveryServicer"]


def _toolset_label(toolset: ToolsetRef) -> str:
    return "inline" if toolset.filter_json else toolset.name


class DiscoveryServicer(discovery_pb2_grpc.DiscoveryServicer):
    def __init__(self, service: DiscoveryEngine, tracing: Tracing = NO_TRACING) -> None:
        self._service = service
        self._tracing = tracing

    def _span(self, name: str, toolset: ToolsetRef) -> AbstractContextManager[Span]:
        """The span of a plan or a search, labelled with its toolset (inline ones alike)."""
        return self._tracing.span(name, attributes={"toolscout.toolset": _toolset_label(toolset)})

    async def PlanTools(
        self, request: discovery_pb2.PlanToolsRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> discovery_pb2.PlanToolsResponse:
        plan_request = wire.plan_request(request)
        with self._span("plan", plan_request.toolset) as span:
            plan = await self._service.plan_tools(plan_request)
            span.set_attributes(
                {
                    "toolscout.plan.loaded": plan.loaded_count,
                    "toolscout.plan.deferred": plan.deferred_count,
                    "toolscout.plan.tokens_sent": plan.tokens.sent_tokens,
                }
            )
            return wire.tool_plan_pb(plan)

    async def WatchPlan(
        self, request: discovery_pb2.WatchPlanRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> AsyncIterator[discovery_pb2.WatchPlanResponse]:
        plans = self._service.watch_plans(wire.plan_request(request.plan), request.known_version)
        async for plan in plans:
            yield discovery_pb2.WatchPlanResponse(plan=wire.tool_plan_pb(plan))

    async def SearchTools(
        self, request: discovery_pb2.SearchToolsRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> discovery_pb2.SearchToolsResponse:
        search = wire.search_request(request)
        with self._span("search", search.toolset) as span:
            self._tracing.content(span, "toolscout.search.arguments", search.arguments_json or search.query)
            result = await self._service.search_tools(search, time_limit=context.time_remaining())
            span.set_attributes(
                {
                    "toolscout.search.mode": result.mode,
                    "toolscout.search.ranking": result.ranking or "none",
                    "toolscout.search.hits": len(result.matches),
                    "toolscout.search.newly_loaded": len(result.newly_loaded),
                }
            )
            return wire.search_result_pb(result)

    async def GetManifest(
        self, request: discovery_pb2.GetManifestRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> discovery_pb2.GetManifestResponse:
        manifest = await self._service.get_manifest(wire.toolset_of(request), request.provider)
        return wire.manifest_pb(manifest)
