"""Fake toolscout services for client and CLI tests: the generated servicers with failure knobs.

One grpc.aio server on 127.0.0.1:0 serves all three; the pool is the client library's own
:class:`toolscout.client.testing.FakePool`. Each RPC first consumes a scripted failure for its
method (``fail(method, code, times)``), counts the attempt and records the request metadata, then
answers from plain fields the test sets (:class:`FakeState` is the fakes' shared
:class:`~toolscout.client.testing.Script`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import grpc
import grpc.aio
from grpc_health.v1 import health as grpc_health
from grpc_health.v1 import health_pb2_grpc
from toolscout.client import CatalogSnapshot, wire
from toolscout.client.testing import FakePool, Script
from toolscout.common.v1 import common_pb2
from toolscout.discovery.v1 import discovery_pb2, discovery_pb2_grpc
from toolscout.mcp_pool.v1 import mcp_pool_pb2, mcp_pool_pb2_grpc
from toolscout.orchestrator.v1 import orchestrator_pb2, orchestrator_pb2_grpc

__all__ = ["FakeStack", "FakeState", "fake_stack", "sample_tools"]


def sample_tools() -> list[common_pb2.Tool]:
    schema = '{"type":"object","properties":{"timezone":{"type":"string"}},"required":["timezone"]}'
    return [
        common_pb2.Tool(
            server="time",
            name="get_current_time",
            llm_name="time_get_current_time",
            description="Current time in a timezone",
            input_schema_json=schema,
            available=True,
        ),
        common_pb2.Tool(
            server="weather",
            name="forecast",
            llm_name="weather_forecast",
            description="Weather forecast for a city",
            input_schema_json='{"type":"object","properties":{"city":{"type":"string"}}}',
            available=True,
        ),
    ]


@dataclass
class FakeState(Script):
    """What the fakes answer and what they saw (the script of failures is the client library's)."""

    tools: list[common_pb2.Tool] = field(default_factory=sample_tools)
    servers: list[mcp_pool_pb2.ServerStatus] = field(
        default_factory=lambda: [
            mcp_pool_pb2.ServerStatus(
                name="time", transport="stdio", state=mcp_pool_pb2.SERVER_STATE_READY, tool_count=1
            ),
            mcp_pool_pb2.ServerStatus(
                name="weather",
                transport="streamable-http",
                state=mcp_pool_pb2.SERVER_STATE_RECONNECTING,
                tool_count=1,
                restarts=2,
                last_error="connection refused",
                defer_loading=True,
            ),
        ]
    )
    chat_events: list[orchestrator_pb2.ChatEvent] = field(default_factory=list)
    # StreamChat sends its events, then waits for this before its final answer (never set: the
    # chat never finishes).
    chat_gate: asyncio.Event | None = None


def _pool(state: FakeState) -> FakePool:
    """The pool of the fake stack: its catalog v1, and one change (v2, server ``time``) for watchers."""
    tools = [wire.tool(t) for t in state.tools]
    return FakePool(
        tools,
        servers=[wire.server_status(s) for s in state.servers],
        updates=[CatalogSnapshot("v2", tuple(tools), ("time",))],
        script=state,
    )


class _Discovery(discovery_pb2_grpc.DiscoveryServicer):
    def __init__(self, state: FakeState) -> None:
        self.s = state

    async def PlanTools(self, request: Any, context: Any) -> discovery_pb2.PlanToolsResponse:
        await self.s.enter("PlanTools", request, context)
        loaded = [t for t in self.s.tools if t.server == "time" or t.llm_name in request.discovered_tools]
        deferred = [t.llm_name for t in self.s.tools if t not in loaded]
        return discovery_pb2.PlanToolsResponse(
            loaded_tools=loaded,
            has_search_tool=bool(deferred),
            search_tool=common_pb2.Tool(llm_name="search_tools", name="search_tools") if deferred else None,
            manifest="weather: forecast",
            manifest_placement=discovery_pb2.MANIFEST_PLACEMENT_TOOL_DESCRIPTION,
            total_tools=len(self.s.tools),
            loaded_count=len(loaded),
            deferred_count=len(deferred),
            catalog_version="v1",
            tokens=common_pb2.TokenAccounting(
                all_definitions_tokens=300, sent_tokens=120, saved_tokens=180, encoding="o200k_base"
            ),
            deferred_tool_names=deferred if request.include_deferred_names else [],
        )

    async def SearchTools(self, request: Any, context: Any) -> discovery_pb2.SearchToolsResponse:
        await self.s.enter("SearchTools", request, context)
        hits = [
            t for t in self.s.tools if request.query and request.query.split()[0] in t.description.lower()
        ]
        return discovery_pb2.SearchToolsResponse(
            mode=discovery_pb2.SEARCH_MODE_QUERY,
            matches=[discovery_pb2.ToolMatch(tool=t, score=1.5) for t in hits],
            newly_loaded=hits,
            result_text="Found tools" if hits else "No tools found",
            total_matches=len(hits),
            catalog_version="v1",
        )

    async def GetManifest(self, request: Any, context: Any) -> discovery_pb2.GetManifestResponse:
        await self.s.enter("GetManifest", request, context)
        return discovery_pb2.GetManifestResponse(
            manifest="weather (1 tool): forecast",
            tokens=9,
            budget_tokens=2000,
            deferred_servers=1,
            deferred_tools=1,
            catalog_version="v1",
            # time is loaded, weather deferred; the plan's 120 sent = 100 + search_tools/manifest.
            servers=[
                discovery_pb2.ServerTokens(
                    server="time", tools=1, deferred_tools=0, all_tokens=100, loaded_tokens=100
                ),
                discovery_pb2.ServerTokens(
                    server="weather", tools=1, deferred_tools=1, all_tokens=200, loaded_tokens=0
                ),
            ],
            encoding="o200k_base",
        )


class _Orchestrator(orchestrator_pb2_grpc.OrchestratorServicer):
    def __init__(self, state: FakeState) -> None:
        self.s = state

    def _final(self, request: Any) -> orchestrator_pb2.ChatResponse:
        return orchestrator_pb2.ChatResponse(
            messages=[
                orchestrator_pb2.Message(role="assistant", content=f"echo: {request.messages[-1].content}")
            ],
            loaded_tools=[*request.discovered_tools, "weather_forecast"],
            stats=orchestrator_pb2.ChatStats(
                usage=orchestrator_pb2.TokenUsage(input_tokens=100, output_tokens=10),
                llm_calls=2,
                discovery=orchestrator_pb2.DiscoveryStats(
                    search_calls=1,
                    tools_discovered=1,
                    definition_tokens_sent=240,
                    definition_tokens_all=600,
                    tokens_saved=360,
                    encoding="o200k_base",
                ),
            ),
            stop_reason=orchestrator_pb2.STOP_REASON_COMPLETED,
            model=request.model,
        )

    async def Chat(self, request: Any, context: Any) -> orchestrator_pb2.ChatResponse:
        await self.s.enter("Chat", request, context)
        return self._final(request)

    async def StreamChat(self, request: Any, context: Any) -> AsyncIterator[orchestrator_pb2.ChatEvent]:
        await self.s.enter("StreamChat", request, context)
        events = self.s.chat_events or [
            orchestrator_pb2.ChatEvent(
                tool_call_started=orchestrator_pb2.ToolCallStarted(
                    call=orchestrator_pb2.ToolCall(
                        id="c1", name="search_tools", arguments_json='{"query":"weather"}'
                    )
                )
            ),
            orchestrator_pb2.ChatEvent(
                tools_discovered=orchestrator_pb2.ToolsDiscovered(tools=["weather_forecast"])
            ),
            orchestrator_pb2.ChatEvent(
                tool_call_finished=orchestrator_pb2.ToolCallFinished(
                    call=orchestrator_pb2.ToolCall(id="c1", name="search_tools"),
                    duration_seconds=0.01,
                    result_preview="Found 1 tool",
                )
            ),
            orchestrator_pb2.ChatEvent(text_delta=orchestrator_pb2.TextDelta(text="echo: ")),
            orchestrator_pb2.ChatEvent(
                text_delta=orchestrator_pb2.TextDelta(text=request.messages[-1].content)
            ),
            orchestrator_pb2.ChatEvent(usage=orchestrator_pb2.TokenUsage(input_tokens=100, output_tokens=10)),
        ]
        try:
            for i, event in enumerate(events):
                await self.s.step(i, context)
                yield event
            if self.s.chat_gate is not None:
                await self.s.chat_gate.wait()
            yield orchestrator_pb2.ChatEvent(final=self._final(request))
        except (asyncio.CancelledError, GeneratorExit):  # as FakePool.WatchCatalog: either way, gone
            self.s.cancelled.set()
            raise

    async def ListModels(self, request: Any, context: Any) -> orchestrator_pb2.ListModelsResponse:
        await self.s.enter("ListModels", request, context)
        return orchestrator_pb2.ListModelsResponse(
            models=[
                orchestrator_pb2.ModelInfo(name="gpt", client="openai", provider="openai", model="gpt-4.1")
            ]
        )

    async def ListToolsets(self, request: Any, context: Any) -> orchestrator_pb2.ListToolsetsResponse:
        await self.s.enter("ListToolsets", request, context)
        return orchestrator_pb2.ListToolsetsResponse(
            toolsets=[
                orchestrator_pb2.ToolsetInfo(
                    name="basic",
                    description="time only",
                    servers=[orchestrator_pb2.ToolsetServer(server="time", mode="all")],
                )
            ]
        )


@dataclass
class FakeStack:
    state: FakeState
    port: int
    health: Any = None

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"


@asynccontextmanager
async def fake_stack(
    state: FakeState | None = None, *, server_credentials: Any = None, health: bool = False
) -> AsyncIterator[FakeStack]:
    """The three fake services on one server at 127.0.0.1:<free port> (optionally with grpc.health.v1)."""
    state = state or FakeState()
    server = grpc.aio.server()
    health_servicer = None
    if health:
        health_servicer = grpc_health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    mcp_pool_pb2_grpc.add_McpPoolServicer_to_server(_pool(state), server)
    discovery_pb2_grpc.add_DiscoveryServicer_to_server(_Discovery(state), server)
    orchestrator_pb2_grpc.add_OrchestratorServicer_to_server(_Orchestrator(state), server)
    if server_credentials is not None:
        port = server.add_secure_port("127.0.0.1:0", server_credentials)
    else:
        port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield FakeStack(state, port, health_servicer)
    finally:
        await server.stop(0)
