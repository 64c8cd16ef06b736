"""gRPC adapter for toolscout.discovery.v1.Discovery: messages in, domain calls, messages out.

Domain errors propagate to the kit's error interceptor, which maps them to status codes; their
messages (written for the LLM) become the status details unchanged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import grpc
from opentelemetry.trace import Span
from toolscout.common.v1 import common_pb2
from toolscout.discovery.v1 import discovery_pb2, discovery_pb2_grpc

from discovery_svc.catalog import Tool
from discovery_svc.engine import DiscoveryEngine, SearchRequest
from discovery_svc.partition import toolset_ref
from discovery_svc.planner import Plan
from discovery_svc.search_args import SearchMode
from discovery_svc.surface import Surface
from toolscout_kit.tracing import NO_TRACING, Tracing

__all__ = ["DiscoveryServicer", "tool_to_proto"]

_MODES = {
    SearchMode.TOOL_NAMES: discovery_pb2.SEARCH_MODE_TOOL_NAMES,
    SearchMode.SERVER: discovery_pb2.SEARCH_MODE_SERVER,
    SearchMode.SERVER_QUERY: discovery_pb2.SEARCH_MODE_SERVER_QUERY,
    SearchMode.QUERY: discovery_pb2.SEARCH_MODE_QUERY,
}
_SURFACES = {
    discovery_pb2.TOOL_SURFACE_UNSPECIFIED: Surface.APPEND,
    discovery_pb2.TOOL_SURFACE_APPEND: Surface.APPEND,
    discovery_pb2.TOOL_SURFACE_STABLE: Surface.STABLE,
}
_SURFACE_ENUMS = {
    Surface.APPEND: discovery_pb2.TOOL_SURFACE_APPEND,
    Surface.STABLE: discovery_pb2.TOOL_SURFACE_STABLE,
}
_PLACEMENTS = {
    "tool_description": discovery_pb2.MANIFEST_PLACEMENT_TOOL_DESCRIPTION,
    "system_message": discovery_pb2.MANIFEST_PLACEMENT_SYSTEM_MESSAGE,
}


def tool_to_proto(tool: Tool) -> common_pb2.Tool:
    return common_pb2.Tool(
        server=tool.server,
        name=tool.name,
        llm_name=tool.llm_name,
        title=tool.title,
        description=tool.description,
        input_schema_json=tool.input_schema_json,
        output_schema_json=tool.output_schema_json,
        annotations_json=tool.annotations_json,
        available=tool.available,
    )


class _ProtoCache:
    """Proto messages of the current catalog's tools, built once per tool and catalog version.

    Eager tool lists can be long and are the same on every PlanTools call; rebuilding their messages
    per request would cost more than the plan itself.
    """

    def __init__(self) -> None:
        self._version = ""
        self._messages: dict[str, common_pb2.Tool] = {}

    def convert(self, version: str, tools: Sequence[Tool]) -> list[common_pb2.Tool]:
        if version != self._version:
            self._version = version
            self._messages = {}
        out = []
        for tool in tools:
            message = self._messages.get(tool.llm_name)
            if message is None:
                message = self._messages[tool.llm_name] = tool_to_proto(tool)
            out.append(message)
        return out


def _toolset_label(request: discovery_pb2.PlanToolsRequest | discovery_pb2.SearchToolsRequest) -> str:
    return "inline" if request.toolset_json else request.toolset


class DiscoveryServicer(discovery_pb2_grpc.DiscoveryServicer):
    def __init__(self, service: DiscoveryEngine, tracing: Tracing = NO_TRACING) -> None:
        self._service = service
        self._protos = _ProtoCache()
        self._tracing = tracing

    def _plan_to_proto(self, plan: Plan) -> discovery_pb2.PlanToolsResponse:
        response = discovery_pb2.PlanToolsResponse(
            loaded_tools=self._protos.convert(plan.catalog_version, plan.loaded_tools),
            has_search_tool=plan.has_search_tool,
            manifest=plan.manifest,
            manifest_placement=_PLACEMENTS[plan.placement],
            manifest_system_message=plan.system_message,
            total_tools=plan.total_tools,
            loaded_count=plan.loaded_count,
            deferred_count=plan.deferred_count,
            catalog_version=plan.catalog_version,
            tokens=common_pb2.TokenAccounting(
                all_definitions_tokens=plan.tokens.all_definitions,
                sent_tokens=plan.tokens.sent,
                saved_tokens=plan.tokens.saved,
                encoding=plan.tokens.encoding,
                estimate=plan.tokens.estimate,
            ),
            deferred_tool_names=plan.deferred_tool_names,
            dropped_tools=plan.dropped_tools,
            discovered_tools=plan.discovered,
            deferred_tools=self._protos.convert(plan.catalog_version, plan.deferred_tools),
        )
        if plan.search_tool is not None:
            response.search_tool.CopyFrom(tool_to_proto(plan.search_tool))
        if plan.call_tool is not None:
            response.call_tool.CopyFrom(tool_to_proto(plan.call_tool))
        response.surface = _SURFACE_ENUMS[plan.surface]
        return response

    async def PlanTools(
        self, request: discovery_pb2.PlanToolsRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> discovery_pb2.PlanToolsResponse:
        with self._tracing.span("plan", attributes={"toolscout.toolset": _toolset_label(request)}) as span:
            plan = await self._service.plan_tools(
                toolset_ref(request.toolset, request.toolset_json),
                list(request.discovered_tools),
                request.provider,
                include_deferred_names=request.include_deferred_names,
                include_deferred_tools=request.include_deferred_tools,
                surface=_SURFACES.get(request.surface, Surface.APPEND),
            )
            span.set_attributes(
                {
                    "toolscout.plan.loaded": plan.loaded_count,
                    "toolscout.plan.deferred": plan.deferred_count,
                    "toolscout.plan.tokens_sent": plan.tokens.sent,
                }
            )
            return self._plan_to_proto(plan)

    async def WatchPlan(
        self, request: discovery_pb2.WatchPlanRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> AsyncIterator[discovery_pb2.WatchPlanResponse]:
        ask = request.plan
        plans = self._service.watch_plans(
            toolset_ref(ask.toolset, ask.toolset_json),
            list(ask.discovered_tools),
            ask.provider,
            include_deferred_names=ask.include_deferred_names,
            include_deferred_tools=ask.include_deferred_tools,
            surface=_SURFACES.get(ask.surface, Surface.APPEND),
            known_version=request.known_version,
        )
        async for plan in plans:
            yield discovery_pb2.WatchPlanResponse(plan=self._plan_to_proto(plan))

    async def SearchTools(
        self, request: discovery_pb2.SearchToolsRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> discovery_pb2.SearchToolsResponse:
        with self._tracing.span("search", attributes={"toolscout.toolset": _toolset_label(request)}) as span:
            self._tracing.content(span, "toolscout.search.arguments", request.arguments_json or request.query)
            return await self._search(request, context, span)

    async def _search(
        self,
        request: discovery_pb2.SearchToolsRequest,
        context: grpc.aio.ServicerContext[object, object],
        span: Span,
    ) -> discovery_pb2.SearchToolsResponse:
        result = await self._service.search_tools(
            SearchRequest(
                toolset=toolset_ref(request.toolset, request.toolset_json),
                query=request.query,
                server_name=request.server_name,
                tool_names=tuple(request.tool_names),
                arguments_json=request.arguments_json,
                loaded_tools=tuple(request.loaded_tools),
                max_results=request.max_results,
                offset=request.offset,
                include_plan=request.include_plan,
                discovered_tools=tuple(request.discovered_tools),
                provider=request.provider,
                compact_text=request.compact_text,
                time_limit=context.time_remaining(),
                surface=_SURFACES.get(request.surface, Surface.APPEND),
            )
        )
        matched = self._protos.convert(result.catalog_version, [m.tool for m in result.matches])
        by_name = {t.llm_name: t for t in matched}
        response = discovery_pb2.SearchToolsResponse(
            mode=_MODES[result.mode],
            matches=[
                discovery_pb2.ToolMatch(
                    tool=pb,
                    already_loaded=m.already_loaded,
                    score=m.score,
                    bm25_score=m.hit.bm25 if m.hit is not None else None,
                    similarity=m.hit.similarity if m.hit is not None else None,
                    exact_name=m.hit is not None and m.hit.exact,
                )
                for m, pb in zip(result.matches, matched, strict=True)
            ],
            newly_loaded=[by_name[t.llm_name] for t in result.newly_loaded],
            result_text=result.text,
            not_found=[
                discovery_pb2.NameSuggestion(name=s.name, closest=s.closest) for s in result.not_found
            ],
            total_matches=result.total_matches,
            catalog_version=result.catalog_version,
            structured_content_json=result.structured_json,
            ranking=result.ranking,
        )
        if result.plan is not None:
            response.plan.CopyFrom(self._plan_to_proto(result.plan))
        span.set_attributes(
            {
                "toolscout.search.mode": result.mode.value,
                "toolscout.search.ranking": result.ranking or "none",
                "toolscout.search.hits": len(result.matches),
                "toolscout.search.newly_loaded": len(result.newly_loaded),
            }
        )
        return response

    async def GetManifest(
        self, request: discovery_pb2.GetManifestRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> discovery_pb2.GetManifestResponse:
        info = await self._service.get_manifest(
            toolset_ref(request.toolset, request.toolset_json), request.provider
        )
        return discovery_pb2.GetManifestResponse(
            manifest=info.manifest,
            tokens=info.tokens,
            budget_tokens=info.budget_tokens,
            deferred_servers=info.deferred_servers,
            deferred_tools=info.deferred_tools,
            catalog_version=info.catalog_version,
            servers=[
                discovery_pb2.ServerTokens(
                    server=x.server,
                    tools=x.tools,
                    deferred_tools=x.deferred_tools,
                    all_tokens=x.all_tokens,
                    loaded_tokens=x.loaded_tokens,
                )
                for x in info.servers
            ],
            encoding=info.encoding,
            estimate=info.estimate,
        )
