"""gRPC adapter for toolscout.discovery.v1.Discovery: messages in, domain calls, messages out.

Requests and answers are the shared values of the client library (``toolscout.client``), read and
written by :mod:`toolscout.client.wire`, so a new field never touches this module. Domain errors
propagate to the kit's error interceptor, which maps them to status codes; their messages
(written for the LLM) become the status details unchanged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
from toolscout.client import wire
from toolscout.discovery.v1 import discovery_pb2, discovery_pb2_grpc

from discovery_svc.engine import DiscoveryEngine

__all__ = ["DiscoveryServicer"]


class DiscoveryServicer(discovery_pb2_grpc.DiscoveryServicer):
    def __init__(self, service: DiscoveryEngine) -> None:
        self._service = service

    async def PlanTools(
        self, request: discovery_pb2.PlanToolsRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> discovery_pb2.PlanToolsResponse:
        return wire.tool_plan_pb(await self._service.plan_tools(wire.plan_request(request)))

    async def WatchPlan(
        self, request: discovery_pb2.WatchPlanRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> AsyncIterator[discovery_pb2.WatchPlanResponse]:
        plans = self._service.watch_plans(wire.plan_request(request.plan), request.known_version)
        async for plan in plans:
            yield discovery_pb2.WatchPlanResponse(plan=wire.tool_plan_pb(plan))

    async def SearchTools(
        self, request: discovery_pb2.SearchToolsRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> discovery_pb2.SearchToolsResponse:
        result = await self._service.search_tools(
            wire.search_request(request), time_limit=context.time_remaining()
        )
        return wire.search_result_pb(result)

    async def GetManifest(
        self, request: discovery_pb2.GetManifestRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> discovery_pb2.GetManifestResponse:
        manifest = await self._service.get_manifest(wire.toolset_of(request), request.provider)
        return wire.manifest_pb(manifest)
