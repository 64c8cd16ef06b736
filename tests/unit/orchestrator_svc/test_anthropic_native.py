"""Anthropic native deferral and prompt caching, through the real SDK against the fake Messages API.

Each documented rule the fake enforces has a test that our adapter obeys it, and one that the
fake rejects a request breaking it (sent through the same SDK)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import pytest
from anthropic import AsyncAnthropic
from toolscout.client import Deferral

from orchestrator_svc.errors import ProviderRejectedError
from orchestrator_svc.messages import Message, NativeItem, ToolCall
from orchestrator_svc.providers.anthropic_provider import AnthropicProvider
from orchestrator_svc.providers.deferral import NativeDeferralLimitError
from tests.support.fake_provider import FakeProvider, Reply, ScriptedCall, ServerSearch
from tests.support.native_requests import TOOLS, collect, eager, request, search_turn

STRICT = "claude-fable-5-1"


@pytest.fixture
async def fake() -> AsyncIterator[FakeProvider]:
    async with FakeProvider() as fake:
        yield fake


@pytest.fixture
async def sdk(fake: FakeProvider) -> AsyncIterator[AsyncAnthropic]:
    client = AsyncAnthropic(api_key="k", base_url=fake.anthropic_base_url, max_retries=0)
    yield client
    await client.close()


@pytest.fixture
def provider(sdk: AsyncAnthropic) -> AnthropicProvider:
    return AnthropicProvider(sdk, client_name="claude", max_retries=0, request_timeout=10)


def _tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for m in body["messages"] for b in m["content"] if b.get("type") == "tool_result"]


def _breakpoints(body: dict[str, Any]) -> list[str]:
    """Where cache_control sits: tool names, "system", or "message <i>"."""
    where = [t["name"] for t in body.get("tools", []) if "cache_control" in t]
    system = body.get("system")
    if isinstance(system, list):
        where += ["system" for b in system if "cache_control" in b]
    for i, m in enumerate(body["messages"]):
        where += [f"message {i}" for b in m["content"] if "cache_control" in b]
    return where


async def _raw(
    sdk: AsyncAnthropic, tools: list[dict[str, Any]], messages: Any, *, model: str = "claude-opus-4-7"
) -> None:
    """A hand-written request through the SDK (the rules are about bodies our adapter never builds)."""
    await sdk.messages.create(model=model, max_tokens=10, messages=messages, extra_body={"tools": tools})


# --- the native request --------------------------------------------------------------------


async def test_native_request_declares_every_tool_in_order_with_deferred_ones_marked(
    fake: FakeProvider, provider: AnthropicProvider
) -> None:
    fake.script(Reply.answer("hi"))
    await provider.complete(request([Message("user", "hi")]))
    tools = fake.requests[0].body["tools"]
    assert [(t["name"], t.get("defer_loading", False)) for t in tools] == [
        ("clock_now", False),
        ("search_tools", False),
        ("weather_forecast", True),
        ("weather_alerts", True),
        ("files_read", True),
    ]
    assert all("cache_control" not in t for t in tools)


@pytest.mark.parametrize("stream", [False, True])
async def test_search_result_carries_tool_references_after_its_text(
    fake: FakeProvider, provider: AnthropicProvider, stream: bool
) -> None:
    fake.script(Reply.calls(ScriptedCall("weather_forecast", {"city": "Paris"})))
    result, _ = await collect(provider, request(search_turn(["weather_forecast"])), stream=stream)
    assert [c.name for c in result.tool_calls] == ["weather_forecast"]
    [tool_result] = _tool_results(fake.requests[0].body)
    assert tool_result["content"] == [
        {"type": "text", "text": "Found 1 tools."},
        {"type": "tool_reference", "tool_name": "weather_forecast"},
    ]


async def test_append_mode_sends_loaded_tools_plainly_without_references(
    fake: FakeProvider, provider: AnthropicProvider
) -> None:
    fake.script(Reply.answer("ok"))
    loaded = [*eager(), TOOLS[2]]
    await provider.complete(request(search_turn(["weather_forecast"]), mode="append", tools=loaded))
    body = fake.requests[0].body
    assert [t["name"] for t in body["tools"]] == ["clock_now", "search_tools", "weather_forecast"]
    assert all("defer_loading" not in t for t in body["tools"])
    assert _tool_results(body)[0]["content"] == [{"type": "text", "text": "Found 1 tools."}]


async def test_cache_breakpoints_mark_the_stable_prefix_and_never_a_deferred_tool(
    fake: FakeProvider, provider: AnthropicProvider
) -> None:
    history = [
        *search_turn(["weather_forecast"]),
        Message("assistant", "", [ToolCall("toolu_f", "weather_forecast", '{"city": "Paris"}')]),
        Message("tool", "Sunny", tool_call_id="toolu_f"),
    ]
    fake.script(Reply.answer("Sunny in Paris."))
    await provider.complete(request(history, prompt_cache=True))
    body = fake.requests[0].body
    assert not fake.requests[0].rejected
    # The last tool not deferred, the system prompt, the previous user turn, the last message.
    assert _breakpoints(body) == ["search_tools", "system", "message 2", "message 4"]
    assert body["system"][0]["text"] == "You are helpful."


async def test_breakpoints_stay_within_four_on_a_long_conversation(
    fake: FakeProvider, provider: AnthropicProvider
) -> None:
    history = [Message("user", "hi")]
    for i in range(6):
        history += [
            Message("assistant", "", [ToolCall(f"toolu_{i}", "clock_now", "{}")]),
            Message("tool", "12:00", tool_call_id=f"toolu_{i}"),
        ]
    fake.script(Reply.answer("noon"))
    await provider.complete(request(history, prompt_cache=True))
    assert len(_breakpoints(fake.requests[0].body)) == 4


# --- strict models ---------------------------------------------------------------------------


async def _conversation(provider: AnthropicProvider, fake: FakeProvider, *, native: bool) -> None:
    """search -> call -> answer, with the tool list each mode sends at each step."""
    fake.script(
        Reply.calls(ScriptedCall("search_tools", {"query": "weather"}, id="toolu_s1")),
        Reply.calls(ScriptedCall("weather_forecast", {"city": "Paris"}, id="toolu_f")),
        Reply.answer("Sunny."),
    )
    mode = Deferral.NATIVE if native else Deferral.APPEND
    before = eager()
    after = [*eager(), TOOLS[2]]
    messages = [Message("user", "weather in Paris?")]
    first = await provider.complete(
        request(messages, mode=mode, tools=None if native else before, model=STRICT)
    )
    messages += [
        Message("assistant", "", first.tool_calls),
        Message("tool", "Found 1 tools.", tool_call_id="toolu_s1", loaded_tools=["weather_forecast"]),
    ]
    second = await provider.complete(
        request(messages, mode=mode, tools=None if native else after, model=STRICT)
    )
    messages += [
        Message("assistant", "", second.tool_calls),
        Message("tool", "Sunny", tool_call_id="toolu_f"),
    ]
    await provider.complete(request(messages, mode=mode, tools=None if native else after, model=STRICT))


async def test_strict_model_accepts_a_native_conversation_because_tools_never_change(
    fake: FakeProvider, provider: AnthropicProvider
) -> None:
    fake.strict_models.add(STRICT)
    await _conversation(provider, fake, native=True)
    assert [r.rejected for r in fake.requests] == ["", "", ""]
    tools = [json.dumps(r.body["tools"]) for r in fake.requests]
    assert len(set(tools)) == 1


async def test_strict_model_rejects_append_mode_adding_a_found_tool(
    fake: FakeProvider, provider: AnthropicProvider
) -> None:
    fake.strict_models.add(STRICT)
    with pytest.raises(ProviderRejectedError, match="does not allow adding tool 'weather_forecast'"):
        await _conversation(provider, fake, native=False)


async def test_strict_fake_allows_adding_a_deferred_tool_nothing_references_yet(
    fake: FakeProvider, sdk: AsyncAnthropic
) -> None:
    fake.strict_models.add(STRICT)
    base = [{"name": "a", "description": "", "input_schema": {"type": "object"}}]
    extra = {"name": "b", "description": "", "input_schema": {"type": "object"}, "defer_loading": True}
    fake.script(Reply.answer("1"), Reply.answer("2"))
    first = [{"role": "user", "content": "go"}]
    later = [*first, {"role": "assistant", "content": "1"}, {"role": "user", "content": "more"}]
    await _raw(sdk, base, first, model=STRICT)
    await _raw(sdk, [*base, extra], later, model=STRICT)
    other = {**base[0], "name": "c"}
    with pytest.raises(anthropic.BadRequestError, match="removed, edited or reordered"):
        await _raw(sdk, [other, extra], later, model=STRICT)


# --- each documented rule: our adapter obeys it, the fake rejects a request breaking it -------


_TOOL = {"name": "t", "description": "", "input_schema": {"type": "object"}}
_HI = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("tools", "messages", "error"),
    [
        ([{**_TOOL, "defer_loading": True}], _HI, "at least one tool must not have defer_loading"),
        (
            [_TOOL, {**_TOOL, "name": "d", "defer_loading": True, "cache_control": {"type": "ephemeral"}}],
            _HI,
            "a tool with defer_loading cannot have cache_control",
        ),
        (
            [_TOOL],
            [
                *_HI,
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "toolu_1", "name": "t", "input": {}}],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_1",
                            "content": [{"type": "tool_reference", "tool_name": "nope"}],
                        }
                    ],
                },
            ],
            "tool 'nope' is not defined in tools",
        ),
        (
            [_TOOL],
            [
                *_HI,
                {"role": "assistant", "content": [{"type": "text", "text": "x"}]},
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "srvtoolu_1", "content": "x"}],
                },
            ],
            "is a server tool use",
        ),
        (
            [{**_TOOL, "name": f"t{i}", "cache_control": {"type": "ephemeral"}} for i in range(5)],
            _HI,
            "A maximum of 4 blocks with cache_control",
        ),
    ],
    ids=[
        "all-deferred",
        "deferred-with-cache-control",
        "unknown-reference",
        "answers-server-tool",
        "five-breakpoints",
    ],
)
async def test_fake_rejects_requests_breaking_a_documented_rule(
    fake: FakeProvider,
    sdk: AsyncAnthropic,
    tools: list[dict[str, Any]],
    messages: list[dict[str, Any]],
    error: str,
) -> None:
    fake.script(Reply.answer("never sent"))
    with pytest.raises(anthropic.BadRequestError, match=error):
        await _raw(sdk, tools, messages)
    assert fake.replies  # a rejected request consumes no scripted reply


async def test_a_reference_to_an_undeclared_tool_fails_locally_before_sending(
    fake: FakeProvider, provider: AnthropicProvider
) -> None:
    with pytest.raises(NativeDeferralLimitError, match="not in tools: gone"):
        await provider.complete(request(search_turn(["gone"])))
    assert fake.requests == []


async def test_every_tool_deferred_fails_locally_before_sending(
    fake: FakeProvider, provider: AnthropicProvider
) -> None:
    with pytest.raises(NativeDeferralLimitError, match="every tool is deferred"):
        await provider.complete(request([Message("user", "hi")], tools=TOOLS[2:]))
    assert fake.requests == []


async def test_a_result_for_a_server_tool_id_is_never_sent(
    fake: FakeProvider, provider: AnthropicProvider
) -> None:
    history = [
        Message("user", "hi"),
        Message("assistant", "", [ToolCall("toolu_1", "clock_now", "{}")]),
        Message("tool", "12:00", tool_call_id="toolu_1"),
        Message("tool", "stray", tool_call_id="srvtoolu_9"),
    ]
    fake.script(Reply.answer("ok"))
    await provider.complete(request(history))
    assert [r["tool_use_id"] for r in _tool_results(fake.requests[0].body)] == ["toolu_1"]


async def test_native_mode_never_retries_without_tools_on_a_400_about_tools(
    fake: FakeProvider, provider: AnthropicProvider
) -> None:
    fake.script(Reply.error(400, "tools.3: invalid tool definition"), Reply.answer("unused"))
    with pytest.raises(ProviderRejectedError, match="invalid tool definition"):
        await provider.complete(request([Message("user", "hi")]))
    assert len(fake.requests) == 1


# --- Anthropic's own search (search: provider) -----------------------------------------------


async def test_provider_search_declares_anthropics_tool_and_moves_the_manifest_to_system(
    fake: FakeProvider, provider: AnthropicProvider
) -> None:
    fake.script(Reply.answer("hi"))
    await provider.complete(request([Message("user", "hi")], search="provider"))
    body = fake.requests[0].body
    assert body["tools"][1] == {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}
    assert body["system"] == "You are helpful.\n\n" + TOOLS[1].description


@pytest.mark.parametrize("stream", [False, True])
async def test_server_search_blocks_load_tools_and_come_back_unchanged(
    fake: FakeProvider, provider: AnthropicProvider, stream: bool
) -> None:
    fake.script(
        Reply.calls(
            ScriptedCall("weather_forecast", {"city": "Paris"}, id="toolu_f"),
            text="Searching.",
            server_searches=[ServerSearch("weather forecast", ["weather_forecast"], id="srvtoolu_1")],
        ),
        Reply.answer("Sunny."),
    )
    history = [Message("user", "weather in Paris?")]
    first, _ = await collect(provider, request(history, search="provider"), stream=stream)
    # The server's search is not ours to answer: only the client tool call surfaces.
    assert [c.id for c in first.tool_calls] == ["toolu_f"]
    assert first.loaded_tools == ["weather_forecast"]
    assert [i.type for i in first.native_items] == [
        "text",
        "server_tool_use",
        "tool_search_tool_result",
        "tool_use",
    ]
    # Over gRPC the items travel as JSON strings.
    items = [NativeItem.from_json(i.to_json()) for i in first.native_items]
    history += [
        Message("assistant", first.text, first.tool_calls, native_items=items),
        Message("tool", "Sunny", tool_call_id="toolu_f"),
    ]
    await provider.complete(request(history, search="provider"))
    second = fake.requests[1]
    assert not second.rejected
    assert second.body["messages"][1]["content"] == [i.data for i in items]
    assert second.body["messages"][1]["content"][1]["input"] == {"query": "weather forecast"}


# --- usage -----------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_usage_counts_cache_reads_and_writes_within_input_tokens(
    fake: FakeProvider, provider: AnthropicProvider, stream: bool
) -> None:
    fake.script(
        Reply.answer("hi", input_tokens=10, cached_tokens=100, cache_write_tokens=50, output_tokens=3)
    )
    result, _ = await collect(provider, request([Message("user", "hi")]), stream=stream)
    usage = result.usage
    assert (usage.input_tokens, usage.cached_input_tokens, usage.cache_write_tokens) == (160, 100, 50)
    assert usage.output_tokens == 3


async def test_only_deferred_tools_get_a_reference(fake: FakeProvider, provider: AnthropicProvider) -> None:
    fake.script(Reply.answer("ok"))
    await provider.complete(request(search_turn(["clock_now", "files_read"])))
    [tool_result] = _tool_results(fake.requests[0].body)
    assert [b.get("tool_name") for b in tool_result["content"]] == [None, "files_read"]
