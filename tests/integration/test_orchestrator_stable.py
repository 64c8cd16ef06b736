"""``deferral: stable``: the real tool loop with discovery's real engine (its stable surface), the
real OpenAI and Anthropic SDKs against the wire-level fake provider, and a fake pool.

``tools`` must stay byte-identical for a whole conversation, whatever the searches find; found
tools are read as text and called through ``call_tool``, whose arguments are validated against the
tool's input schema; the loaded set is rebuilt from the history across turns.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from discovery_svc.engine import DiscoveryEngine
from discovery_svc.surface import CALL_TOOL_PARAMETERS
from orchestrator_svc.chat import ChatRequest
from orchestrator_svc.loop import ChatLoop
from orchestrator_svc.messages import Message
from tests.support.discovery_catalogs import catalog, make_tool
from tests.support.fake_provider import FakeProvider, RecordedRequest, Reply, ScriptedCall
from tests.support.local_discovery import LocalDiscovery
from tests.support.orchestrator_fakes import FakePool, make_loop
from toolscout_kit.config import parse_config

pytestmark = pytest.mark.asyncio

TOOLS = [
    make_tool(
        "weather",
        "forecast",
        "Weather forecast for a city.",
        {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
        ["city"],
    ),
    make_tool(
        "stocks",
        "quote",
        "Current stock price for a ticker symbol.",
        {"symbol": {"type": "string"}},
        ["symbol"],
    ),
    make_tool(
        "git", "status", "Git status of a repository.", {"repo_path": {"type": "string"}}, ["repo_path"]
    ),
    make_tool("mail", "send_email", "Send an email.", {"to": {"type": "string"}}, ["to"]),
    make_tool("time", "now", "Current time."),
]
# model name in the config -> the provider's model id
MODELS = {"gpt-stable": "gpt-4.1", "claude-stable": "claude-fable-5-1"}
STRICT = "claude-fable-5-1"


@dataclass
class Stack:
    fake: FakeProvider
    pool: FakePool
    loop: ChatLoop
    registry: CollectorRegistry
    discovery: LocalDiscovery

    async def turn(self, history: list[Message], model: str, discovered: list[str] | None = None) -> Any:
        outcome = await self.loop.run(
            ChatRequest(messages=list(history), model=model, discovered_tools=discovered or [])
        )
        assert outcome.stop_reason == "completed", outcome.error
        return outcome


@pytest.fixture
async def stack(tmp_path: Any) -> AsyncIterator[Stack]:
    async with FakeProvider() as fake:
        fake.strict_models.add(STRICT)
        config = parse_config(
            {
                "clients": {
                    "oai": {"provider": "openai", "base_url": fake.openai_base_url, "api_key": "sk-test"},
                    "claude": {"provider": "anthropic", "base_url": fake.anthropic_base_url, "api_key": "ak"},
                },
                "models": {
                    "gpt-stable": {"client": "oai", "model": MODELS["gpt-stable"], "deferral": "stable"},
                    "claude-stable": {"client": "claude", "model": STRICT, "deferral": "stable"},
                },
                "servers": {
                    "weather": {"command": "w", "defer_loading": True},
                    "stocks": {"command": "s", "defer_loading": True},
                    "git": {"command": "g", "defer_loading": True},
                    "mail": {"command": "m", "defer_loading": True},
                    "time": {"command": "t"},
                },
                "tool_discovery": {"enabled": True},
                "toolscout": {"orchestrator": {"templates_dir": str(tmp_path)}},
            },
            env={},
        )
        engine = DiscoveryEngine(config)
        engine.set_catalog(catalog(TOOLS, "v1"))
        pool = FakePool()
        registry = CollectorRegistry()
        discovery = LocalDiscovery(engine)
        loop = make_loop(config, discovery, pool, registry)  # type: ignore[arg-type]
        yield Stack(fake, pool, loop, registry, discovery)
        await loop.models.aclose()


def search(query: str, call_id: str) -> Reply:
    return Reply.calls(ScriptedCall("search_tools", {"query": query}, id=call_id))


def through(name: str, arguments: Any, call_id: str) -> Reply:
    return Reply.calls(ScriptedCall("call_tool", {"name": name, "arguments": arguments}, id=call_id))


def tools_of(request: RecordedRequest) -> list[str]:
    return [t.get("name") or t["function"]["name"] for t in request.body["tools"]]


def tools_bytes(request: RecordedRequest) -> str:
    return json.dumps(request.body["tools"], sort_keys=False)


def results(outcome: Any) -> list[Message]:
    return [m for m in outcome.messages if m.role == "tool"]


@pytest.mark.parametrize("model", list(MODELS))
async def test_tools_stay_byte_identical_across_three_searches_and_found_tools_run_through_call_tool(
    stack: Stack, model: str
) -> None:
    stack.fake.script(
        search("weather forecast", "s1"),
        through("weather_forecast", {"city": "Oslo", "days": 2}, "c1"),
        search("stock price", "s2"),
        through("stocks_quote", {"symbol": "AAPL"}, "c2"),
        search("git status", "s3"),
        through("git_status", {"repo_path": "/srv/repo"}, "c3"),
        Reply.answer("Done."),
    )
    outcome = await stack.turn([Message("user", "Weather, AAPL and the repo, please.")], model)
    requests = stack.fake.requests
    assert len(requests) == 7
    # One tool list, the same bytes on every call (the strict Claude model accepted every request).
    assert len({tools_bytes(r) for r in requests}) == 1
    # A strict model's tools may not change, so it gets read_result from the start (results are
    # shaped by default); any other model only while a result handle is live.
    read = ["read_result"] if MODELS[model] == STRICT else []
    assert tools_of(requests[0]) == ["time_now", "search_tools", "call_tool", *read]
    # search_tools and call_tool are discovery's stable surface, the pair the gateway's meta mode serves.
    call_tool = requests[0].body["tools"][2]
    assert (
        call_tool.get("input_schema", call_tool.get("function", {}).get("parameters")) == CALL_TOOL_PARAMETERS
    )
    assert "call them through call_tool" in json.dumps(requests[0].body["tools"][1])
    # Searches answer with each found tool's definition as text (its input schema included).
    found = results(outcome)[0::2]
    assert all("Input schema:" in m.content and "call_tool" in m.content for m in found)
    assert '"required":["city"]' in found[0].content
    assert [m.loaded_tools for m in found] == [["weather_forecast"], ["stocks_quote"], ["git_status"]]
    assert [(c.llm_name, json.loads(c.arguments_json)) for c in stack.pool.calls] == [
        ("weather_forecast", {"city": "Oslo", "days": 2}),
        ("stocks_quote", {"symbol": "AAPL"}),
        ("git_status", {"repo_path": "/srv/repo"}),
    ]
    assert outcome.stats.discovery.deferral == "stable"
    assert outcome.loaded_tools == ["weather_forecast", "stocks_quote", "git_status"]
    # Counted as the tools they ran, on their servers.
    assert ("weather_forecast", "weather") in outcome.stats.tool_calls


async def test_arguments_that_do_not_fit_the_schema_get_the_expected_shape_and_nothing_runs(
    stack: Stack,
) -> None:
    stack.fake.script(
        search("weather forecast", "s1"),
        through("weather_forecast", {"town": "Oslo", "days": "two"}, "c1"),
        through("weather_forecast", {"city": "Oslo", "days": 2}, "c2"),
        Reply.answer("Sunny."),
    )
    outcome = await stack.turn([Message("user", "Weather in Oslo?")], "gpt-stable")
    _, misfit, fixed = results(outcome)
    assert misfit.is_error
    assert misfit.content.startswith("Error: The arguments do not fit what weather_forecast takes:")
    assert "  city: required" in misfit.content
    assert "  days: expected integer, got string" in misfit.content
    assert "Example arguments: {" in misfit.content
    assert not fixed.is_error
    # Only the corrected call reached the pool.
    assert [json.loads(c.arguments_json) for c in stack.pool.calls] == [{"city": "Oslo", "days": 2}]


async def test_calling_a_tool_no_search_returned_gets_the_deferred_call_guards_error(stack: Stack) -> None:
    stack.fake.script(
        through("mail_send_email", {"to": "a@b.c"}, "c1"),
        through("mail_send_emial", {"to": "a@b.c"}, "c2"),
        Reply.calls(ScriptedCall("call_tool", '{"arguments": {}}', id="c3")),
        Reply.answer("I need to search first."),
    )
    outcome = await stack.turn([Message("user", "Mail a@b.c")], "gpt-stable")
    guarded, unknown, malformed = results(outcome)
    assert guarded.content == (
        "Error: Tool 'mail_send_email' is not yet loaded. "
        "Use the 'search_tools' tool to discover and load it first, then call it again."
    )
    assert guarded.not_loaded
    assert unknown.content.startswith("Error: Unknown tool 'mail_send_emial'")
    assert malformed.content.startswith('Error: call_tool takes {"name": "<a tool search_tools found>"')
    assert stack.pool.calls == []
    value = stack.registry.get_sample_value(
        "toolscout_orchestrator_deferred_call_rejections_total", {"model": "gpt-stable"}
    )
    assert value == 1.0


@pytest.mark.parametrize("recorded", [True, False], ids=["recorded", "another-client"])
async def test_the_next_turn_rebuilds_the_found_tools_from_the_history(stack: Stack, recorded: bool) -> None:
    stack.fake.script(
        search("weather forecast", "s1"),
        through("weather_forecast", {"city": "Oslo"}, "c1"),
        Reply.answer("Sunny in Oslo."),
    )
    history = [Message("user", "Weather in Oslo?")]
    first = await stack.turn(history, "claude-stable")
    history += first.messages
    if not recorded:
        # A history from a client that drops the record of what each search loaded: replayed.
        for m in history:
            m.loaded_tools = None
    history.append(Message("user", "And in Bergen for 3 days?"))
    stack.fake.script(through("weather_forecast", {"city": "Bergen", "days": 3}, "c2"), Reply.answer("Rain."))
    second = await stack.turn(history, "claude-stable")
    [result] = results(second)
    assert not result.is_error, result.content
    assert second.loaded_tools == ["weather_forecast"]
    assert [json.loads(c.arguments_json)["city"] for c in stack.pool.calls] == ["Oslo", "Bergen"]
    assert len({tools_bytes(r) for r in stack.fake.requests}) == 1
    # The found tool's definition came with the plan: no fetch of every deferred definition.
    assert not any(r.include_deferred_tools for r in stack.discovery.plan_requests)
