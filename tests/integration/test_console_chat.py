"""The console's chat turns through a real gRPC orchestrator (the fake servicer): the events the
page gets, the conversation kept between turns, the trace the orchestrator joins, failures."""

from __future__ import annotations

import json
from typing import Any

import grpc
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from toolscout.client import AsyncOrchestratorClient

from mcp_gateway_svc.console.chat import ChatRunner
from tests.support.fake_services import fake_stack
from toolscout_kit.tracing import NO_TRACING, Tracing


async def _turn(
    runner: ChatRunner, state: dict[str, Any], message: str, model: str = "gpt"
) -> list[dict[str, Any]]:
    return [
        json.loads(line.removeprefix("data: "))
        async for chunk in runner.turn(state, message=message, model=model, toolset="")
        for line in chunk.splitlines()
        if line.startswith("data: ")
    ]


async def test_a_turn_streams_its_calls_and_tokens_and_the_next_turn_carries_the_conversation() -> None:
    async with fake_stack() as stack, AsyncOrchestratorClient.connect(stack.target) as orchestrator:
        runner = ChatRunner(orchestrator, NO_TRACING, "")
        state: dict[str, Any] = {}
        events = await _turn(runner, state, "hello")
        kinds = [e["type"] for e in events]
        assert kinds[0] == "started"
        assert events[0]["trace_id"] == ""
        assert kinds[-1] == "finished"
        started = next(e for e in events if e["type"] == "call_started")
        assert (started["name"], started["arguments"]) == ("search_tools", '{"query":"weather"}')
        assert next(e for e in events if e["type"] == "call_finished")["preview"] == "Found 1 tool"
        assert next(e for e in events if e["type"] == "discovered")["tools"] == ["weather_forecast"]
        assert "".join(e["text"] for e in events if e["type"] == "text") == "echo: hello"
        finished = events[-1]
        assert finished["usage"] == {"input": 100, "output": 10, "cached": 0, "cache_write": 0}
        assert finished["definitions"]["saved"] == 360
        assert finished["loaded_tools"] == ["weather_forecast"]

        await _turn(runner, state, "again")
        sent = stack.state.last_requests["StreamChat"]
        assert [m.content for m in sent.messages] == ["hello", "echo: hello", "again"]
        assert list(sent.discovered_tools) == ["weather_forecast"]
        assert runner.savings.chats == 2
        assert runner.savings.tokens_saved == 720

        await _turn(runner, state, "fresh", model="other")  # another model: a new conversation
        assert [m.content for m in stack.state.last_requests["StreamChat"].messages] == ["fresh"]


async def test_with_tracing_on_the_orchestrator_joins_the_turns_trace_and_the_page_gets_its_link() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing = Tracing("toolscout-gateway", provider)
    async with fake_stack() as stack, AsyncOrchestratorClient.connect(stack.target) as orchestrator:
        runner = ChatRunner(orchestrator, tracing, "http://traces.example/trace/{trace_id}")
        events = await _turn(runner, {}, "hello")
    trace_id = events[0]["trace_id"]
    assert len(trace_id) == 32
    assert int(trace_id, 16) != 0
    assert events[0]["trace_url"] == f"http://traces.example/trace/{trace_id}"
    traceparent = stack.state.metadata["StreamChat"][-1]["traceparent"]
    assert traceparent.split("-")[1] == trace_id
    (span,) = exporter.get_finished_spans()
    assert span.name == "console chat"
    assert f"{span.context.trace_id:032x}" == trace_id
    provider.shutdown()


async def test_a_failed_turn_says_what_kind_of_failure_without_the_errors_own_text() -> None:
    async with fake_stack() as stack, AsyncOrchestratorClient.connect(stack.target) as orchestrator:
        stack.state.fail("StreamChat", grpc.StatusCode.UNAVAILABLE, details="upstream 10.1.2.3:50053 refused")
        state: dict[str, Any] = {}
        events = await _turn(ChatRunner(orchestrator, NO_TRACING, ""), state, "hello")
    assert events[-1]["type"] == "error"
    assert "not reachable" in events[-1]["message"]
    assert "10.1.2.3" not in json.dumps(events)
    assert state["history"] == []
