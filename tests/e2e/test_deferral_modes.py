"""Deferral modes end to end: the real pool (our example MCP servers), discovery and orchestrator
over gRPC, the client library, and the real Anthropic / OpenAI SDKs against the fake provider,
which enforces the rules the providers document (strict models, tool_reference, tool_search)."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import pytest_asyncio
from toolscout.client import (
    AsyncOrchestratorClient,
    ChatFinished,
    ChatMessage,
    ChatResult,
    InvalidArgumentError,
    ResourceExhaustedError,
    ToolsDiscovered,
)

from tests.support.fake_provider import FakeProvider, RecordedRequest, Reply, ScriptedCall, ScriptedSearch
from tests.support.mcp_servers import example_server_config
from tests.support.protocol_servers import PROTOCOL_SERVER
from tests.support.stack import running_stack
from toolscout_kit.config import parse_config

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

WAIT = 60.0
FORECAST = "weather__get_forecast"
# model name -> (expected deferral, how the model searches)
MODES = {
    "claude-native": ("native", "tool_use"),
    "claude-strict": ("native", "tool_use"),
    "gpt-responses": ("native", "tool_search_call"),
    "gpt-chat": ("append", "tool_use"),
}


@dataclass
class Deferral:
    fake: FakeProvider
    client: AsyncOrchestratorClient


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def deferral(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Deferral]:
    base = tmp_path_factory.mktemp("deferral")
    async with FakeProvider() as fake:
        fake.strict_models = {"claude-fable-5-1"}
        config = parse_config(
            {
                "clients": {
                    "claude": {"provider": "anthropic", "base_url": fake.anthropic_base_url, "api_key": "ak"},
                    "chat": {"provider": "openai", "base_url": fake.openai_base_url, "api_key": "sk-chat"},
                    "responses": {
                        "provider": "openai",
                        "api": "responses",
                        "base_url": fake.openai_base_url,
                        "api_key": "sk-responses",
                    },
                },
                "models": {
                    "claude-native": {"client": "claude", "model": "claude-sonnet-4-6"},
                    "claude-strict": {"client": "claude", "model": "claude-fable-5-1"},
                    "gpt-responses": {"client": "responses", "model": "gpt-5.4"},
                    "gpt-chat": {"client": "chat", "model": "gpt-4.1"},
                    "claude-strict-append": {
                        "client": "claude",
                        "model": "claude-fable-5-1",
                        "deferral": "append",
                    },
                    "gpt-stable": {"client": "chat", "model": "gpt-4.1", "deferral": "stable"},
                    "claude-strict-stable": {
                        "client": "claude",
                        "model": "claude-fable-5-1",
                        "deferral": "stable",
                    },
                },
                "servers": {
                    "text": example_server_config("text"),
                    "weather": example_server_config("weather", defer_loading=True),
                    "huge": {
                        "command": sys.executable,
                        "args": [str(PROTOCOL_SERVER), "--era", "legacy", "--extra-tools", "10001"],
                        "defer_loading": True,
                        "connect_timeout": 60,
                    },
                },
                "tool_sets": {
                    "everyday": {"servers": {"text": True, "weather": True}},
                    "everything": {"servers": {"text": True, "weather": True, "huge": True}},
                },
                "tool_discovery": {"enabled": True},
            },
            base_dir=base,
        )
        async with running_stack(config) as stack:
            assert stack.orchestrator is not None
            async with AsyncOrchestratorClient.connect(stack.orchestrator.address) as client:
                yield Deferral(fake, client)


@pytest.fixture
def fake(deferral: Deferral) -> FakeProvider:
    deferral.fake.replies.clear()
    deferral.fake.requests.clear()
    deferral.fake.responder = None
    return deferral.fake


def search_reply(how: str, query: str) -> Reply:
    if how == "tool_search_call":
        return Reply(searches=[ScriptedSearch({"query": query}, call_id="call_search")])
    return Reply.calls(ScriptedCall("search_tools", {"query": query}, id="toolu_search"))


def forecast(city: str, call_id: str) -> Reply:
    return Reply.calls(ScriptedCall(FORECAST, {"location": {"city": city}, "days": 2}, id=call_id))


def tools_json(request: RecordedRequest) -> str:
    return json.dumps(request.body.get("tools"), sort_keys=True)


def tool_results(result: ChatResult) -> list[ChatMessage]:
    return [m for m in result.messages if m.role == "tool"]


@pytest.mark.parametrize("model", list(MODES))
async def test_one_search_one_call_and_a_second_turn_in_every_mode(
    deferral: Deferral, fake: FakeProvider, model: str
) -> None:
    mode, how = MODES[model]
    fake.script(search_reply(how, "weather forecast"), forecast("Berlin", "call_f1"), Reply.answer("Fine."))
    first = await deferral.client.chat("weather in Berlin?", model=model, toolset="everyday", deadline=WAIT)
    assert first.stop_reason == "completed", first.error
    search, result = tool_results(first)
    assert FORECAST in (search.loaded_tools or ())
    # Native mode loads whole definitions by reference: the text does not repeat parameters.
    assert ("Parameters:" in search.content) == (mode == "append")
    assert result.content.startswith("Berlin forecast")
    assert first.stats.discovery.deferral == mode
    assert first.stats.discovery.native_fallback_reason == ""
    assert [r.rejected for r in fake.requests] == ["", "", ""]

    turn_one = list(fake.requests)
    if mode == "native":
        # tools is byte-identical for the whole conversation: deferred ones flagged, never added.
        assert len({tools_json(r) for r in turn_one}) == 1
    else:
        assert len(tools_json(turn_one[1])) > len(tools_json(turn_one[0]))
    if model.startswith("claude") and mode == "native":
        blocks = [b for m in turn_one[1].body["messages"] for b in m["content"] if isinstance(b, dict)]
        result_blocks = [c for b in blocks if b.get("type") == "tool_result" for c in b["content"]]
        assert {"type": "tool_reference", "tool_name": FORECAST} in result_blocks
    if how == "tool_search_call":
        outputs = [i for i in turn_one[1].body["input"] if i.get("type") == "tool_search_output"]
        assert FORECAST in [f["name"] for o in outputs for ns in o["tools"] for f in ns["tools"]]

    # Turn 2 from the returned history: the tool is still loaded, no search needed.
    fake.requests.clear()
    fake.script(forecast("Tokyo", "call_f2"), Reply.answer("Rain."))
    history = [ChatMessage.user("weather in Berlin?"), *first.messages, ChatMessage.user("and Tokyo?")]
    second = await deferral.client.chat(history, model=model, toolset="everyday", deadline=WAIT)
    assert second.stop_reason == "completed", second.error
    assert tool_results(second)[0].content.startswith("Tokyo forecast")
    assert second.stats.discovery.search_calls == 0
    assert [r.rejected for r in fake.requests] == ["", ""]
    if mode == "native":
        assert {tools_json(r) for r in fake.requests} == {tools_json(turn_one[0])}


async def test_a_strict_model_in_append_mode_gets_the_providers_400(
    deferral: Deferral, fake: FakeProvider
) -> None:
    # The same strict model configured for append: adding the found tool to `tools` is refused by
    # the provider, which is exactly what native mode avoids.
    fake.script(search_reply("tool_use", "weather forecast"), Reply.answer("never sent"))
    with pytest.raises(InvalidArgumentError, match="tools"):
        await deferral.client.chat(
            "weather?", model="claude-strict-append", toolset="everyday", deadline=WAIT
        )
    assert fake.requests[-1].rejected


async def test_streamed_native_chat_reports_discovered_tools_and_finishes(
    deferral: Deferral, fake: FakeProvider
) -> None:
    fake.script(search_reply("tool_use", "weather forecast"), Reply.answer("Found it."))
    events = [
        e
        async for e in deferral.client.stream_chat(
            "find a forecast tool", model="claude-native", toolset="everyday", deadline=WAIT
        )
    ]
    discovered = [e for e in events if isinstance(e, ToolsDiscovered)]
    assert any(FORECAST in e.tools for e in discovered)
    final = events[-1]
    assert isinstance(final, ChatFinished)
    assert final.result.stats.discovery.deferral == "native"
    assert len({tools_json(r) for r in fake.requests}) == 1


async def test_past_ten_thousand_deferred_tools_a_native_model_falls_back_to_append(
    deferral: Deferral, fake: FakeProvider
) -> None:
    fake.script(search_reply("tool_use", "weather forecast"), Reply.answer("ok"))
    result = await deferral.client.chat(
        "weather?", model="claude-native", toolset="everything", deadline=WAIT
    )
    assert result.stop_reason == "completed", result.error
    disc = result.stats.discovery
    assert (disc.deferral, disc.native_fallback_reason) == ("append", "too_many_deferred")
    assert not any(t.get("defer_loading") for r in fake.requests for t in r.body["tools"])
    assert FORECAST in [t["name"] for t in fake.requests[1].body["tools"]]


async def test_a_strict_model_past_the_limits_stops_with_a_clear_error(
    deferral: Deferral, fake: FakeProvider
) -> None:
    with pytest.raises(ResourceExhaustedError, match="rejects changes to its tools") as err:
        await deferral.client.chat("weather?", model="claude-strict", toolset="everything", deadline=WAIT)
    assert "10001" in str(err.value) or "deferred tools" in str(err.value)
    assert fake.requests == []


@pytest.mark.parametrize("model", ["gpt-stable", "claude-strict-stable"])
async def test_stable_mode_keeps_tools_identical_and_runs_found_tools_through_call_tool(
    deferral: Deferral, fake: FakeProvider, model: str
) -> None:
    through = {"name": FORECAST, "arguments": {"location": {"city": "Berlin"}, "days": 2}}
    fake.script(
        search_reply("tool_use", "weather forecast"),
        Reply.calls(ScriptedCall("call_tool", through, id="call_f1")),
        Reply.answer("Fine."),
    )
    first = await deferral.client.chat("weather in Berlin?", model=model, toolset="everyday", deadline=WAIT)
    assert first.stop_reason == "completed", first.error
    search, result = tool_results(first)
    assert FORECAST in (search.loaded_tools or ())
    assert "Input schema:" in search.content
    assert result.content.startswith("Berlin forecast"), result.content
    assert first.stats.discovery.deferral == "stable"
    names = [t.get("name") or t["function"]["name"] for t in fake.requests[0].body["tools"]]
    # A strict model gets read_result from the start (its tools may not change later).
    read = ["read_result"] if model == "claude-strict-stable" else []
    assert names[-2 - len(read) :] == ["search_tools", "call_tool", *read]

    # Turn 2 from the returned history: the found tool still runs through call_tool, no search.
    fake.script(
        Reply.calls(
            ScriptedCall("call_tool", {"name": FORECAST, "arguments": {"days": "two"}}, id="call_f2")
        ),
        Reply.calls(
            ScriptedCall("call_tool", {**through, "arguments": {"location": {"city": "Tokyo"}}}, id="call_f3")
        ),
        Reply.answer("Rain."),
    )
    history = [ChatMessage.user("weather in Berlin?"), *first.messages, ChatMessage.user("and Tokyo?")]
    second = await deferral.client.chat(history, model=model, toolset="everyday", deadline=WAIT)
    assert second.stop_reason == "completed", second.error
    misfit, fixed = tool_results(second)
    assert misfit.is_error
    assert f"The arguments do not fit what {FORECAST} takes:" in misfit.content
    assert fixed.content.startswith("Tokyo forecast")
    assert second.stats.discovery.search_calls == 0
    # One tool list for both turns (the strict model accepted every request).
    assert [r.rejected for r in fake.requests] == [""] * 6
    assert len({tools_json(r) for r in fake.requests}) == 1


async def test_list_models_reports_each_models_api_and_deferral_mode(deferral: Deferral) -> None:
    models = {m.name: m for m in await deferral.client.list_models(deadline=WAIT)}
    assert (models["claude-native"].api, models["claude-native"].deferral) == ("messages", "native")
    assert models["claude-strict"].strict_tools
    assert not models["claude-native"].strict_tools
    assert (models["gpt-responses"].api, models["gpt-responses"].deferral) == ("responses", "native")
    assert (models["gpt-chat"].api, models["gpt-chat"].deferral) == ("chat_completions", "append")
    assert models["claude-strict-append"].deferral == "append"
    assert (models["gpt-stable"].api, models["gpt-stable"].deferral) == ("chat_completions", "stable")
