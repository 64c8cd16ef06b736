"""The orchestrator end to end over gRPC: real pool and discovery services, our example MCP servers
(stdio subprocesses), and the real OpenAI / Anthropic SDKs talking to the local fake provider."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
import pytest_asyncio
from grpc_health.v1 import health_pb2, health_pb2_grpc
from toolscout.orchestrator.v1 import orchestrator_pb2 as pb
from toolscout.orchestrator.v1 import orchestrator_pb2_grpc

from discovery_svc.server import SERVICE_NAME as DISCOVERY_SERVICE
from discovery_svc.server import build_server as build_discovery
from mcp_pool_svc.server import build_server as build_pool
from orchestrator_svc.server import build_server as build_orchestrator
from tests.support.fake_provider import FakeProvider, Reply, ScriptedCall
from tests.support.mcp_servers import example_server_config
from toolscout_kit.config import parse_config
from toolscout_kit.server import RunningServer

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

WAIT = 30.0
MODELS = ["gpt", "sonnet"]
NOT_LOADED = (
    "Error: Tool 'weather__get_forecast' is not yet loaded. "
    "Use the 'search_tools' tool to discover and load it first, then call it again."
)


@dataclass
class Stack:
    fake: FakeProvider
    stub: orchestrator_pb2_grpc.OrchestratorStub
    servers: list[RunningServer]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    base = tmp_path_factory.mktemp("orchestrator")
    async with FakeProvider() as fake:
        config = parse_config(
            {
                "clients": {
                    "oai": fake.openai_client(),
                    "claude": {
                        "provider": "anthropic",
                        "base_url": fake.anthropic_base_url,
                        "api_key": "ak-e2e",
                    },
                },
                "models": {
                    "gpt": {"client": "oai", "model": "gpt-e2e"},
                    "gpt-vision": {"client": "oai", "model": "gpt-e2e-vision", "vision": True},
                    "sonnet": {"client": "claude", "model": "c"},
                },
                "servers": {
                    "text": example_server_config("text"),
                    "weather": example_server_config("weather", defer_loading=True),
                    "media": example_server_config("media", defer_loading=True),
                },
                "tool_sets": {
                    "words": {"description": "Text only", "servers": {"text": ["reverse", "slugify"]}}
                },
                "tool_discovery": {"enabled": True},
                "toolscout": {"orchestrator": {"max_iterations": 4}},
            },
            base_dir=Path(base),
        )
        pool = await build_pool(config, listen="127.0.0.1:0", metrics_port=-1)
        servers = [pool]
        try:
            discovery = await build_discovery(
                config, listen="127.0.0.1:0", metrics_port=-1, pool_target=pool.address
            )
            servers.append(discovery)
            await _until_serving(discovery.address, DISCOVERY_SERVICE)
            orchestrator = await build_orchestrator(
                config,
                listen="127.0.0.1:0",
                metrics_port=-1,
                pool_target=pool.address,
                discovery_target=discovery.address,
            )
            servers.append(orchestrator)
            async with grpc.aio.insecure_channel(orchestrator.address) as channel:
                yield Stack(fake, orchestrator_pb2_grpc.OrchestratorStub(channel), servers)
        finally:
            for server in reversed(servers):
                await server.stop(0.5)


async def _until_serving(address: str, service: str) -> None:
    async with grpc.aio.insecure_channel(address) as channel:
        watch = health_pb2_grpc.HealthStub(channel).Watch(
            health_pb2.HealthCheckRequest(service=service), timeout=WAIT
        )
        async for reply in watch:
            if reply.status == health_pb2.HealthCheckResponse.SERVING:
                watch.cancel()
                return


@pytest.fixture
def fake(stack: Stack) -> FakeProvider:
    stack.fake.replies.clear()
    stack.fake.requests.clear()
    stack.fake.responder = None
    return stack.fake


def chat(text: str, model: str = "gpt", **kw: Any) -> pb.ChatRequest:
    return pb.ChatRequest(messages=[pb.Message(role="user", content=text)], model=model, **kw)


def forecast_call(city: str = "Berlin") -> ScriptedCall:
    return ScriptedCall("weather__get_forecast", {"location": {"city": city}, "days": 2})


def _writes_started(pool: RunningServer) -> float:
    # ``text__wait`` is not annotated read-only: the pool takes the server's write turn right
    # before it sends the call, and counts the wait.
    labels = {"server": "text"}
    return pool.registry.get_sample_value("toolscout_pool_write_lock_wait_seconds_count", labels) or 0.0


def _calls_cancelled(pool: RunningServer) -> float:
    # The pool's own count of calls that ended cancelled: a call goes on the call stream or as a
    # unary CallTool (with a trace context to carry), and both end there.
    labels = {"server": "text", "outcome": "cancelled"}
    return pool.registry.get_sample_value("toolscout_pool_tool_calls_total", labels) or 0.0


async def _until(predicate: Any) -> None:
    # The pool records the cancelled RPC on its own task after the client side has returned.
    async with asyncio.timeout(WAIT):
        while not predicate():  # noqa: ASYNC110 - a metric has no event to wait on
            await asyncio.sleep(0.02)


@pytest.mark.parametrize("model", MODELS)
async def test_plain_answer(stack: Stack, fake: FakeProvider, model: str) -> None:
    fake.script(Reply.answer("Hello there.", input_tokens=20, output_tokens=4))
    response = await stack.stub.Chat(chat("hi", model), timeout=WAIT)
    assert response.stop_reason == pb.STOP_REASON_COMPLETED
    assert [(m.role, m.content) for m in response.messages] == [("assistant", "Hello there.")]
    assert (response.stats.usage.input_tokens, response.stats.llm_calls, response.model) == (20, 1, model)
    tools = fake.requests[0].tool_names
    assert tools[-1] == "search_tools"
    assert "text__reverse" in tools
    assert not any(t.startswith("weather__") for t in tools)


@pytest.mark.parametrize("model", MODELS)
async def test_search_then_call_a_discovered_tool(stack: Stack, fake: FakeProvider, model: str) -> None:
    fake.script(
        Reply.calls(ScriptedCall("search_tools", {"query": "weather forecast"})),
        Reply.calls(forecast_call()),
        Reply.answer("Berlin looks fine."),
    )
    response = await stack.stub.Chat(chat("weather in Berlin?", model), timeout=WAIT)
    assert response.stop_reason == pb.STOP_REASON_COMPLETED
    search_result, forecast = (m for m in response.messages if m.role == "tool")
    assert "weather__get_forecast" in search_result.content
    assert forecast.content.startswith("Berlin forecast\nday 1:")
    assert not forecast.is_error
    assert "weather__get_forecast" in fake.requests[1].tool_names
    assert fake.requests[1].tool_names[: len(fake.requests[0].tool_names)] == fake.requests[0].tool_names
    assert "weather__get_forecast" in response.loaded_tools
    disc = response.stats.discovery
    assert disc.search_calls == 1
    assert disc.tools_discovered >= 1
    assert 0 < disc.definition_tokens_sent < disc.definition_tokens_all
    assert disc.tokens_saved == disc.definition_tokens_all - disc.definition_tokens_sent
    counts = {(c.tool, c.server): c.calls for c in response.stats.tool_calls}
    assert counts[("weather__get_forecast", "weather")] == 1
    assert counts[("search_tools", "")] == 1


async def test_turn_two_calls_a_tool_found_in_turn_one_without_a_new_search(
    stack: Stack, fake: FakeProvider
) -> None:
    fake.script(
        Reply.calls(ScriptedCall("search_tools", {"query": "forecast"})), Reply.answer("I can do forecasts.")
    )
    first = await stack.stub.Chat(chat("what can you do?"), timeout=WAIT)
    history = [pb.Message(role="user", content="what can you do?"), *first.messages]
    history.append(pb.Message(role="user", content="forecast for Tokyo"))
    fake.script(Reply.calls(forecast_call("Tokyo")), Reply.answer("Tokyo: see above."))
    # Neither discovered_tools nor any server-side state: the history alone carries the discovery.
    second = await stack.stub.Chat(pb.ChatRequest(messages=history, model="gpt"), timeout=WAIT)
    assert second.stop_reason == pb.STOP_REASON_COMPLETED
    assert "weather__get_forecast" in fake.requests[2].tool_names
    assert second.messages[1].content.startswith("Tokyo forecast")
    assert second.stats.discovery.search_calls == 0
    assert second.stats.discovery.deferred_call_rejections == 0


@pytest.mark.parametrize("model", MODELS)
async def test_deferred_call_is_rejected_until_searched(stack: Stack, fake: FakeProvider, model: str) -> None:
    fake.script(
        Reply.calls(ScriptedCall("search_tools", {"tool_names": ["weather__get_forecast"]}), forecast_call()),
        Reply.calls(forecast_call()),
        Reply.answer("done"),
    )
    response = await stack.stub.Chat(chat("weather?", model), timeout=WAIT)
    tools = [m for m in response.messages if m.role == "tool"]
    assert tools[1].content == NOT_LOADED
    assert tools[1].is_error
    assert tools[2].content.startswith("Berlin forecast")
    assert response.stats.discovery.deferred_call_rejections == 1


async def test_parallel_tool_calls_run_concurrently(stack: Stack, fake: FakeProvider) -> None:
    fake.script(
        Reply.calls(
            ScriptedCall("text__wait", {"seconds": 0.3}, id="a"),
            ScriptedCall("text__reverse", {"text": "abc"}, id="b"),
            ScriptedCall("text__wait", {"seconds": 0.2}, id="c"),
        ),
        Reply.answer("all done"),
    )
    events = [e async for e in stack.stub.StreamChat(chat("go"), timeout=WAIT)]
    kinds = [e.WhichOneof("event") for e in events]
    # All three started before the first one finished.
    assert kinds.index("tool_call_finished") > max(i for i, k in enumerate(kinds) if k == "tool_call_started")
    final = events[-1].final
    tool_messages = [(m.tool_call_id, m.content) for m in final.messages if m.role == "tool"]
    assert tool_messages == [("a", "waited 0.3s"), ("b", "cba"), ("c", "waited 0.2s")]


async def test_tool_error_reaches_the_llm_with_the_servers_text(stack: Stack, fake: FakeProvider) -> None:
    fake.script(Reply.calls(forecast_call("Atlantis")), Reply.answer("Unknown city."))
    response = await stack.stub.Chat(
        chat("weather in Atlantis", discovered_tools=["weather__get_forecast"]), timeout=WAIT
    )
    error = response.messages[1]
    assert error.is_error
    assert "unknown city 'Atlantis'" in error.content
    assert "unknown city 'Atlantis'" in fake.requests[1].body["messages"][-1]["content"]
    [count] = [c for c in response.stats.tool_calls if c.tool == "weather__get_forecast"]
    assert (count.calls, count.errors) == (1, 1)


async def test_iteration_limit_returns_messages_and_stats(stack: Stack, fake: FakeProvider) -> None:
    fake.responder = lambda req: Reply.calls(ScriptedCall("text__reverse", {"text": "loop"}))
    response = await stack.stub.Chat(chat("loop forever", max_iterations=2), timeout=WAIT)
    assert response.stop_reason == pb.STOP_REASON_ITERATION_LIMIT
    assert "iteration limit" in response.error
    assert [m.role for m in response.messages] == ["assistant", "tool", "assistant", "tool"]
    assert response.stats.iterations == 2


@pytest.mark.parametrize("model", MODELS)
async def test_rate_limit_then_success(stack: Stack, fake: FakeProvider, model: str) -> None:
    fake.script(Reply.error(429, "too many requests"), Reply.answer("ok now"))
    response = await stack.stub.Chat(chat("hi", model), timeout=WAIT)
    assert response.messages[0].content == "ok now"
    assert len(fake.requests) == 2


@pytest.mark.parametrize("model", MODELS)
async def test_provider_500_exhausted_is_unavailable_with_the_reason(
    stack: Stack, fake: FakeProvider, model: str
) -> None:
    fake.responder = lambda req: Reply.error(500, "upstream model crashed")
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stack.stub.Chat(chat("hi", model), timeout=WAIT)
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "upstream model crashed" in (info.value.details() or "")
    assert len(fake.requests) == 3


async def test_rate_limit_exhausted_is_resource_exhausted(stack: Stack, fake: FakeProvider) -> None:
    fake.responder = lambda req: Reply.error(429, "daily quota used up")
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stack.stub.Chat(chat("hi"), timeout=WAIT)
    assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "daily quota used up" in (info.value.details() or "")


async def test_tools_rejected_falls_back_to_no_tools_and_says_so(stack: Stack, fake: FakeProvider) -> None:
    fake.script(Reply.tools_not_supported(), Reply.answer("Plain answer."))
    response = await stack.stub.Chat(chat("hi"), timeout=WAIT)
    assert response.tools_disabled_fallback
    assert response.messages[0].content == "Plain answer."
    assert "tools" not in fake.requests[1].body


async def test_cancel_during_a_slow_tool_cancels_the_pool_call(stack: Stack, fake: FakeProvider) -> None:
    fake.script(Reply.calls(ScriptedCall("text__wait", {"seconds": 30})))
    before = _calls_cancelled(stack.servers[0])
    started = _writes_started(stack.servers[0])
    call = stack.stub.StreamChat(chat("wait"), timeout=WAIT)
    async for event in call:
        if event.WhichOneof("event") == "tool_call_started":
            break
    # Cancelled once the pool runs the call (on a fresh stack the orchestrator's first call may
    # still be on its way to the pool when the event arrives).
    await _until(lambda: _writes_started(stack.servers[0]) > started)
    call.cancel()
    await _until(lambda: _calls_cancelled(stack.servers[0]) > before)
    assert len(fake.requests) == 1


async def test_deadline_bounds_the_whole_chat(stack: Stack, fake: FakeProvider) -> None:
    fake.script(Reply.calls(ScriptedCall("text__wait", {"seconds": 30})), Reply.answer("late"))
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stack.stub.Chat(chat("wait"), timeout=1.5)
    assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert len(fake.requests) == 1


async def test_deadline_during_a_slow_llm_reply(stack: Stack, fake: FakeProvider) -> None:
    fake.script(Reply.answer("late", hold=asyncio.Event()))
    before = fake.disconnects
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stack.stub.Chat(chat("hi"), timeout=1.0)
    assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    # The in-flight provider request was abandoned, not left running.
    await fake.wait_for_disconnects(before + 1)


@pytest.mark.parametrize("model", MODELS)
async def test_stream_chat_emits_deltas_tool_events_discovery_usage_and_final(
    stack: Stack, fake: FakeProvider, model: str
) -> None:
    fake.script(
        Reply.calls(
            ScriptedCall("search_tools", {"query": "forecast"}), text="<think>need a tool</think>Searching"
        ),
        Reply.calls(forecast_call()),
        Reply.answer("It will be fine.", reasoning="read the forecast"),
    )
    events = [e async for e in stack.stub.StreamChat(chat("weather?", model), timeout=WAIT)]
    kinds = [e.WhichOneof("event") for e in events]
    assert kinds[-1] == "final"
    assert {
        "text_delta",
        "reasoning_delta",
        "assistant_message",
        "tool_call_started",
        "tool_call_finished",
    } <= set(kinds)
    assert {"tools_discovered", "usage"} <= set(kinds)
    text = "".join(e.text_delta.text for e in events if e.HasField("text_delta"))
    reasoning = "".join(e.reasoning_delta.text for e in events if e.HasField("reasoning_delta"))
    assert text == "SearchingIt will be fine."
    assert reasoning == "need a toolread the forecast"
    discovered = next(e.tools_discovered.tools for e in events if e.HasField("tools_discovered"))
    assert "weather__get_forecast" in discovered
    finished = [e.tool_call_finished for e in events if e.HasField("tool_call_finished")]
    assert [(f.call.name, f.server, f.is_error) for f in finished] == [
        ("search_tools", "", False),
        ("weather__get_forecast", "weather", False),
    ]
    final = events[-1].final
    assert final.messages[-1].content == "It will be fine."
    assert final.messages[-1].reasoning == "read the forecast"
    assert final.stats.llm_calls == 3


async def test_images_from_tools_reach_anthropic_as_image_blocks(stack: Stack, fake: FakeProvider) -> None:
    fake.script(
        Reply.calls(ScriptedCall("media__swatch_image", {"color": "#ff0000", "size": 4})),
        Reply.answer("A red square."),
    )
    response = await stack.stub.Chat(
        chat("show red", "sonnet", discovered_tools=["media__swatch_image"]), timeout=WAIT
    )
    tool_message = response.messages[1]
    assert tool_message.attachments[0].mime_type == "image/png"
    blocks = fake.requests[1].body["messages"][-1]["content"][0]["content"]
    assert [b["type"] for b in blocks] == ["text", "image"]
    assert blocks[1]["source"]["media_type"] == "image/png"


async def test_images_from_tools_reach_openai_vision_models_in_a_user_message_after_the_results(
    stack: Stack, fake: FakeProvider
) -> None:
    fake.script(
        Reply.calls(ScriptedCall("media__swatch_image", {"color": "#00ff00", "size": 4})),
        Reply.answer("A green square."),
    )
    await stack.stub.Chat(
        chat("show green", "gpt-vision", discovered_tools=["media__swatch_image"]), timeout=WAIT
    )
    messages = fake.requests[1].body["messages"]
    assert [m["role"] for m in messages[-3:]] == ["assistant", "tool", "user"]
    assert "follows in the next message" in messages[-2]["content"]
    parts = messages[-1]["content"]
    assert [p["type"] for p in parts] == ["text", "image_url"]
    assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,")


async def test_images_from_tools_are_named_not_sent_to_models_without_vision(
    stack: Stack, fake: FakeProvider
) -> None:
    fake.script(
        Reply.calls(ScriptedCall("media__swatch_image", {"color": "#0000ff", "size": 4})),
        Reply.answer("A blue square."),
    )
    await stack.stub.Chat(chat("show blue", "gpt", discovered_tools=["media__swatch_image"]), timeout=WAIT)
    messages = fake.requests[1].body["messages"]
    assert messages[-1]["role"] == "tool"
    assert "image attachment (image/png" in messages[-1]["content"]
    assert "not shown" in messages[-1]["content"]


async def test_unknown_model_and_toolset_are_not_found_listing_what_exists(
    stack: Stack, fake: FakeProvider
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stack.stub.Chat(chat("hi", "gpt-9"), timeout=WAIT)
    assert info.value.code() == grpc.StatusCode.NOT_FOUND
    assert "gpt, gpt-vision, sonnet" in (info.value.details() or "")
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stack.stub.Chat(chat("hi", toolset="nope"), timeout=WAIT)
    assert info.value.code() == grpc.StatusCode.NOT_FOUND


async def test_toolset_limits_the_tools_sent(stack: Stack, fake: FakeProvider) -> None:
    fake.script(Reply.answer("ok"))
    await stack.stub.Chat(chat("hi", toolset="words"), timeout=WAIT)
    assert fake.requests[0].tool_names == ["text__reverse", "text__slugify"]


async def test_list_models_and_toolsets(stack: Stack, fake: FakeProvider) -> None:
    models = await stack.stub.ListModels(pb.ListModelsRequest(), timeout=WAIT)
    assert [(m.name, m.provider, m.model) for m in models.models] == [
        ("gpt", "openai", "gpt-e2e"),
        ("gpt-vision", "openai", "gpt-e2e-vision"),
        ("sonnet", "anthropic", "c"),
    ]
    assert models.models[0].base_url == fake.openai_base_url
    toolsets = await stack.stub.ListToolsets(pb.ListToolsetsRequest(), timeout=WAIT)
    [words] = toolsets.toolsets
    assert (words.name, words.description) == ("words", "Text only")
    assert [(s.server, s.mode, list(s.tools)) for s in words.servers] == [
        ("text", "include", ["reverse", "slugify"])
    ]


async def test_api_keys_never_reach_responses_or_errors(stack: Stack, fake: FakeProvider) -> None:
    fake.responder = lambda req: Reply.error(400, "bad key sk-e2e-0123456789abc for this model")
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stack.stub.Chat(chat("hi"), timeout=WAIT)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "sk-e2e-0123456789abc" not in (info.value.details() or "")
    assert json.dumps(fake.requests[0].body).find("sk-e2e") == -1


def _discovery_rpcs(stack: Stack) -> int:
    """PlanTools + SearchTools calls discovery has answered so far (its own metrics)."""
    registry = stack.servers[1].registry
    total = 0.0
    for method in ("PlanTools", "SearchTools", "GetManifest"):
        for code in ("OK", "NOT_FOUND", "INVALID_ARGUMENT", "UNAVAILABLE"):
            labels = {"grpc_service": DISCOVERY_SERVICE, "grpc_method": method, "grpc_code": code}
            total += registry.get_sample_value("grpc_server_handled_total", labels) or 0.0
    return int(total)


async def test_one_discovery_round_trip_per_search_and_one_per_later_turn(
    stack: Stack, fake: FakeProvider
) -> None:
    # Turn 1: plan, one search (which answers with the next plan), one call, the answer.
    fake.script(
        Reply.calls(ScriptedCall("search_tools", {"query": "weather forecast"})),
        Reply.calls(forecast_call()),
        Reply.answer("Berlin looks fine."),
    )
    before = _discovery_rpcs(stack)
    first = await stack.stub.Chat(chat("weather in Berlin?"), timeout=WAIT)
    turn_one = _discovery_rpcs(stack) - before
    assert first.stop_reason == pb.STOP_REASON_COMPLETED
    search_result = next(m for m in first.messages if m.role == "tool" and m.name == "search_tools")
    assert "weather__get_forecast" in search_result.loaded_tools.names

    # Turn 2: the history and discovered_tools sent back, no tool use.
    history = [pb.Message(role="user", content="weather in Berlin?"), *first.messages]
    history.append(pb.Message(role="user", content="thanks"))
    fake.script(Reply.answer("You're welcome."))
    before = _discovery_rpcs(stack)
    second = await stack.stub.Chat(
        pb.ChatRequest(messages=history, model="gpt", discovered_tools=first.loaded_tools), timeout=WAIT
    )
    turn_two = _discovery_rpcs(stack) - before
    assert list(second.loaded_tools) == list(first.loaded_tools)

    # A turn whose history holds three earlier searches (recorded, so never replayed).
    searches = [ScriptedCall("search_tools", {"query": q}) for q in ("weather forecast", "alerts", "reverse")]
    fake.script(*(Reply.calls(s) for s in searches), Reply.answer("ok"))
    third = await stack.stub.Chat(chat("find things"), timeout=WAIT)
    history = [pb.Message(role="user", content="find things"), *third.messages]
    history.append(pb.Message(role="user", content="and now?"))
    fake.script(Reply.answer("done"))
    before = _discovery_rpcs(stack)
    fourth = await stack.stub.Chat(pb.ChatRequest(messages=history, model="gpt"), timeout=WAIT)
    turn_with_three_searches = _discovery_rpcs(stack) - before
    assert list(fourth.loaded_tools) == list(third.loaded_tools)

    assert (turn_one, turn_two, turn_with_three_searches) == (2, 1, 1)
