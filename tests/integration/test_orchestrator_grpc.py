"""The orchestrator server on 127.0.0.1:0 against fake downstream services (discovery's generated
servicer with a failure knob, the client library's fake pool) and the fake provider: error translation, cancellation and deadline
propagation as seen by the downstream side."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from toolscout import client as tc
from toolscout.client import wire
from toolscout.client.testing import FakePool
from toolscout.common.v1 import common_pb2
from toolscout.discovery.v1 import discovery_pb2, discovery_pb2_grpc
from toolscout.mcp_pool.v1 import mcp_pool_pb2_grpc
from toolscout.orchestrator.v1 import orchestrator_pb2 as pb
from toolscout.orchestrator.v1 import orchestrator_pb2_grpc

from orchestrator_svc.server import SERVICE_NAME, build_server
from tests.support.fake_provider import FakeProvider, Reply, ScriptedCall
from toolscout_kit.config import parse_config
from toolscout_kit.errors import ConfigError

WAIT = 10.0
SLOW = common_pb2.Tool(server="s", name="slow", llm_name="s__slow", input_schema_json='{"type":"object"}')
FAST = common_pb2.Tool(server="s", name="fast", llm_name="s__fast", input_schema_json='{"type":"object"}')


@dataclass
class Downstream(discovery_pb2_grpc.DiscoveryServicer):
    """Discovery with a failure knob, and the client library's fake pool whose ``s__slow`` tool
    waits until its call is cancelled."""

    plan_failure: grpc.StatusCode | None = None
    call_started: asyncio.Event = field(default_factory=asyncio.Event)
    call_cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    pool: FakePool = field(init=False)

    def __post_init__(self) -> None:
        self.pool = FakePool([wire.tool(FAST), wire.tool(SLOW)], answer=self._answer)

    @property
    def call_deadlines(self) -> list[float | None]:
        return [c.time_remaining for c in self.pool.calls]

    async def PlanTools(self, request: Any, context: Any) -> discovery_pb2.PlanToolsResponse:
        if self.plan_failure is not None:
            # As a real discovery answers: its error interceptor marks its own statuses.
            await context.abort(
                self.plan_failure, "catalog not ready", trailing_metadata=tc.SERVICE_STATUS_METADATA
            )
        return discovery_pb2.PlanToolsResponse(loaded_tools=[FAST, SLOW], total_tools=2, loaded_count=2)

    async def _answer(self, request: tc.CallRequest, tool: tc.Tool) -> tc.CallToolResult:
        if request.llm_name == "s__slow":
            self.call_started.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.call_cancelled.set()
                raise
        return tc.CallToolResult(
            (tc.ContentBlock("text", text="fast result"),), server="s", tool=request.llm_name
        )


@dataclass
class Running:
    fake: FakeProvider
    downstream: Downstream
    stub: orchestrator_pb2_grpc.OrchestratorStub
    channel: grpc.aio.Channel


@pytest.fixture
async def running(tmp_path: Path) -> AsyncIterator[Running]:
    downstream = Downstream()
    server = grpc.aio.server()
    discovery_pb2_grpc.add_DiscoveryServicer_to_server(downstream, server)
    mcp_pool_pb2_grpc.add_McpPoolServicer_to_server(downstream.pool, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    async with FakeProvider() as fake:
        config = parse_config(
            {
                "clients": {"oai": {"provider": "openai", "base_url": fake.openai_base_url, "api_key": "k"}},
                "models": {"gpt": {"client": "oai", "model": "gpt-test"}},
            },
            base_dir=tmp_path,
        )
        target = f"127.0.0.1:{port}"
        orch = await build_server(
            config, listen="127.0.0.1:0", metrics_port=-1, pool_target=target, discovery_target=target
        )
        try:
            async with grpc.aio.insecure_channel(orch.address) as channel:
                yield Running(fake, downstream, orchestrator_pb2_grpc.OrchestratorStub(channel), channel)
        finally:
            await orch.stop(0)
            await server.stop(0)


def chat() -> pb.ChatRequest:
    return pb.ChatRequest(messages=[pb.Message(role="user", content="go")], model="gpt")


async def test_health_reports_the_orchestrator_serving(running: Running) -> None:
    health = health_pb2_grpc.HealthStub(running.channel)
    reply = await health.Check(health_pb2.HealthCheckRequest(service=SERVICE_NAME), timeout=WAIT)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_discovery_unavailable_makes_the_chat_unavailable(running: Running) -> None:
    running.downstream.plan_failure = grpc.StatusCode.UNAVAILABLE
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await running.stub.Chat(chat(), timeout=WAIT)
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "discovery unavailable: catalog not ready" in (info.value.details() or "")
    assert running.fake.requests == []


async def test_chat_deadline_is_passed_down_to_tool_calls(running: Running) -> None:
    running.fake.script(Reply.calls(ScriptedCall("s__fast", {})), Reply.answer("ok"))
    response = await running.stub.Chat(chat(), timeout=5)
    assert response.messages[1].content == "fast result"
    [deadline] = running.downstream.call_deadlines
    assert deadline is not None
    # Bounded by the chat's 5 s deadline, not a tool default (60 s); gRPC's deadline encoding and
    # timers may round up by a few milliseconds.
    assert 0 < deadline <= 5.1


async def test_client_cancel_of_chat_cancels_the_in_flight_tool_call(running: Running) -> None:
    running.fake.script(Reply.calls(ScriptedCall("s__slow", {})))
    call = running.stub.Chat(chat(), timeout=WAIT)
    await asyncio.wait_for(running.downstream.call_started.wait(), WAIT)
    call.cancel()
    await asyncio.wait_for(running.downstream.call_cancelled.wait(), WAIT)


async def test_stream_reader_going_away_cancels_the_chat(running: Running) -> None:
    running.fake.script(Reply.calls(ScriptedCall("s__slow", {})))
    call = running.stub.StreamChat(chat(), timeout=WAIT)
    async for event in call:
        if event.HasField("tool_call_started"):
            break
    await asyncio.wait_for(running.downstream.call_started.wait(), WAIT)
    call.cancel()
    await asyncio.wait_for(running.downstream.call_cancelled.wait(), WAIT)


async def test_stream_chat_reports_errors_as_status_codes(running: Running) -> None:
    running.fake.responder = lambda req: Reply.error(429, "slow down")
    with pytest.raises(grpc.aio.AioRpcError) as info:
        async for _ in running.stub.StreamChat(chat(), timeout=WAIT):
            pass
    assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "slow down" in (info.value.details() or "")


async def test_bad_request_is_invalid_argument(running: Running) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await running.stub.Chat(pb.ChatRequest(model="gpt"), timeout=WAIT)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.details() == "messages must not be empty"


async def test_the_orchestrator_refuses_to_start_with_a_model_template_that_does_not_load(
    tmp_path: Path,
) -> None:
    config = parse_config(
        {
            "clients": {"oai": {"provider": "openai", "base_url": "http://127.0.0.1:9/v1", "api_key": "k"}},
            "models": {"gpt": {"client": "oai", "model": "m", "template": "missing"}},
            "toolscout": {"orchestrator": {"templates_dir": str(tmp_path)}},
        }
    )
    with pytest.raises(ConfigError, match=r"models\.gpt\.template"):
        await build_server(config, listen="127.0.0.1:0", metrics_port=-1)
