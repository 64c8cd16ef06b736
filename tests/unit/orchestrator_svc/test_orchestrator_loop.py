"""The tool loop against in-memory discovery/pool fakes and the real OpenAI/Anthropic SDKs."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from toolscout.client import CallToolResult, ToolsetRef

from orchestrator_svc.errors import (
    ChatDeadlineError,
    InvalidChatError,
    ProviderRateLimitedError,
    ProviderUnavailableError,
    UnknownModelError,
)
from orchestrator_svc.loop import (
    AssistantMessageEvent,
    ChatEvent,
    ChatRequest,
    ReasoningDeltaEvent,
    TextDeltaEvent,
    ToolCallFinishedEvent,
    ToolsDiscoveredEvent,
)
from orchestrator_svc.messages import Message, ToolCall
from tests.support.fake_provider import Reply, ScriptedCall
from tests.support.orchestrator_fakes import Harness, text_result
from toolscout_kit.errors import NotFoundError

NOT_LOADED = (
    "Error: Tool 'weather_forecast' is not yet loaded. "
    "Use the 'search_tools' tool to discover and load it first, then call it again."
)


def ask(text: str = "weather in Paris?", model: str = "gpt", **kw: object) -> ChatRequest:
    return ChatRequest(messages=[Message("user", text)], model=model, **kw)  # type: ignore[arg-type]


async def test_plain_answer_completes_with_usage_and_one_llm_call(harness: Harness) -> None:
    harness.fake.script(Reply.answer("Hello!", input_tokens=12, output_tokens=3, cached_tokens=4))
    result = await harness.loop.run(ask())
    assert result.stop_reason == "completed"
    assert [(m.role, m.content) for m in result.messages] == [("assistant", "Hello!")]
    assert result.stats.llm_calls == 1
    assert result.stats.iterations == 0
    assert (result.stats.usage.input_tokens, result.stats.usage.output_tokens) == (12, 3)
    assert result.stats.usage.cached_input_tokens == 4
    sent = harness.fake.requests[0]
    assert sent.tool_names == ["clock_now", "search_tools"]
    assert sent.body["messages"][0]["role"] == "system"
    assert harness.metric("toolscout_llm_tokens_total", provider="openai", model="gpt", type="input") == 12
    assert harness.metric("toolscout_chats_total", model="gpt", outcome="completed") == 1


async def test_search_then_call_appends_the_discovered_tool_after_search_tools(harness: Harness) -> None:
    harness.fake.script(
        Reply.calls(ScriptedCall("search_tools", {"query": "forecast"})),
        Reply.calls(ScriptedCall("weather_forecast", {"city": "Paris"})),
        Reply.answer("Sunny."),
    )
    result = await harness.loop.run(ask())
    assert result.stop_reason == "completed"
    assert [r.tool_names for r in harness.fake.requests] == [
        ["clock_now", "search_tools"],
        ["clock_now", "search_tools", "weather_forecast"],
        ["clock_now", "search_tools", "weather_forecast"],
    ]
    assert [c.llm_name for c in harness.pool.calls] == ["weather_forecast"]
    assert json.loads(harness.pool.calls[0].arguments_json) == {"city": "Paris"}
    assert result.loaded_tools == ["weather_forecast"]
    disc = result.stats.discovery
    assert (disc.search_calls, disc.tools_discovered, disc.deferred_call_rejections) == (1, 1, 0)
    assert disc.definition_tokens_all == 3 * 400
    assert disc.definition_tokens_sent == 200 + 300 + 300
    assert disc.tokens_saved == 1200 - 800
    assert harness.metric("toolscout_discovered_tool_calls_total", model="gpt") == 1
    assert harness.metric("toolscout_search_calls_total", model="gpt") == 1
    assert harness.metric("toolscout_tokens_saved_total", model="gpt", toolset="_all") == 400


async def test_turn_two_calls_a_tool_found_in_turn_one_without_searching_again(harness: Harness) -> None:
    harness.fake.script(
        Reply.calls(ScriptedCall("search_tools", {"query": "forecast"}, id="s1")),
        Reply.answer("Found a forecast tool."),
    )
    first = await harness.loop.run(ask())
    # The caller sends the history back but not loaded_tools: the loop rebuilds them from it.
    history = [Message("user", "weather in Paris?"), *first.messages, Message("user", "and tomorrow?")]
    harness.fake.script(
        Reply.calls(ScriptedCall("weather_forecast", {"city": "Paris"})), Reply.answer("Rain.")
    )
    second = await harness.loop.run(ChatRequest(messages=history, model="gpt"))
    assert second.stop_reason == "completed"
    assert harness.fake.requests[2].tool_names == ["clock_now", "search_tools", "weather_forecast"]
    assert [c.llm_name for c in harness.pool.calls] == ["weather_forecast"]
    assert second.stats.discovery.search_calls == 0
    assert second.stats.discovery.deferred_call_rejections == 0
    assert second.loaded_tools == ["weather_forecast"]


async def test_discovered_tools_passed_by_the_caller_are_loaded_in_their_order(harness: Harness) -> None:
    harness.fake.script(Reply.answer("ok"))
    result = await harness.loop.run(
        ask(discovered_tools=["files_read", "nope", "weather_alerts", "clock_now"])
    )
    assert harness.fake.requests[0].tool_names == [
        "clock_now",
        "search_tools",
        "files_read",
        "weather_alerts",
    ]
    assert result.loaded_tools == ["files_read", "weather_alerts"]


async def test_deferred_tool_called_before_loading_is_rejected_even_after_a_search_in_the_same_message(
    harness: Harness,
) -> None:
    harness.fake.script(
        Reply.calls(
            ScriptedCall("search_tools", {"tool_names": ["weather_forecast"]}),
            ScriptedCall("weather_forecast", {"city": "Paris"}),
        ),
        Reply.calls(
            ScriptedCall("weather_forecast", {"city": "Paris"}), ScriptedCall("files_read", {"path": "/"})
        ),
        Reply.answer("done"),
    )
    result = await harness.loop.run(ask())
    tool_messages = [m for m in result.messages if m.role == "tool"]
    assert tool_messages[1].content == NOT_LOADED
    assert tool_messages[1].is_error
    assert tool_messages[3].content == NOT_LOADED.replace("weather_forecast", "files_read")
    assert [c.llm_name for c in harness.pool.calls] == ["weather_forecast"]
    assert result.stats.discovery.deferred_call_rejections == 2
    assert harness.metric("toolscout_deferred_call_rejections_total", model="gpt") == 2


async def test_rejected_calls_in_the_history_do_not_count_as_loaded(harness: Harness) -> None:
    history = [
        Message("user", "hi"),
        Message("assistant", "", [ToolCall("c1", "weather_forecast", "{}")]),
        Message(
            "tool", NOT_LOADED, tool_call_id="c1", name="weather_forecast", is_error=True, not_loaded=True
        ),
        Message("assistant", "I need to search."),
        Message("user", "go on"),
    ]
    harness.fake.script(Reply.answer("ok"))
    result = await harness.loop.run(ChatRequest(messages=history, model="gpt"))
    assert harness.fake.requests[0].tool_names == ["clock_now", "search_tools"]
    assert result.loaded_tools == []


async def test_a_refusal_is_marked_and_its_history_sent_back_does_not_load_the_tool(harness: Harness) -> None:
    harness.fake.script(
        Reply.calls(ScriptedCall("weather_forecast", {"city": "Paris"})), Reply.answer("search?")
    )
    first = await harness.loop.run(ask())
    refusal = first.messages[1]
    assert (refusal.content, refusal.is_error, refusal.not_loaded) == (NOT_LOADED, True, True)
    harness.fake.script(Reply.answer("ok"))
    history = [Message("user", "weather in Paris?"), *first.messages, Message("user", "go on")]
    second = await harness.loop.run(ChatRequest(messages=history, model="gpt"))
    assert harness.fake.requests[2].tool_names == ["clock_now", "search_tools"]
    assert second.loaded_tools == []


async def test_unknown_tool_gets_an_error_listing_the_loaded_tools(harness: Harness) -> None:
    harness.fake.script(Reply.calls(ScriptedCall("launch_rockets", {})), Reply.answer("sorry"))
    result = await harness.loop.run(ask())
    error = result.messages[1]
    assert error.is_error
    assert error.content == (
        "Error: Unknown tool 'launch_rockets'. Available tools: clock_now. Use 'search_tools' to find other tools."
    )


async def test_parallel_tool_calls_run_concurrently_and_results_keep_call_order(harness: Harness) -> None:
    both_started = asyncio.Event()
    running: list[str] = []

    def handler(name: str) -> Callable[[dict[str, Any]], Awaitable[CallToolResult]]:
        async def run(args: dict[str, Any]) -> CallToolResult:
            # Each call waits until both are running: sequential execution would time out here.
            running.append(name)
            if len(running) == 2:
                both_started.set()
            await asyncio.wait_for(both_started.wait(), 5)
            return text_result(f"{name} done", server="weather")

        return run

    harness.pool.handlers["weather_forecast"] = handler("forecast")
    harness.pool.handlers["weather_alerts"] = handler("alerts")
    harness.fake.script(
        Reply.calls(
            ScriptedCall("weather_forecast", {"city": "A"}, id="a"),
            ScriptedCall("weather_alerts", {}, id="b"),
        ),
        Reply.answer("ok"),
    )
    result = await harness.loop.run(ask(discovered_tools=["weather_forecast", "weather_alerts"]))
    tools = [m for m in result.messages if m.role == "tool"]
    assert [(m.tool_call_id, m.content) for m in tools] == [("a", "forecast done"), ("b", "alerts done")]
    assert {c.tool: c.calls for c in result.stats.tool_calls.values()} == {
        "weather_forecast": 1,
        "weather_alerts": 1,
    }


async def test_tool_error_reaches_the_llm_with_the_servers_text(harness: Harness) -> None:
    async def failing(args: dict[str, object]) -> CallToolResult:
        return text_result("city 'Atlantis' not found", is_error=True, server="weather")

    harness.pool.handlers["weather_forecast"] = failing
    harness.fake.script(
        Reply.calls(ScriptedCall("weather_forecast", {"city": "Atlantis"})), Reply.answer("no")
    )
    result = await harness.loop.run(ask(discovered_tools=["weather_forecast"]))
    sent_back = harness.fake.requests[1].body["messages"][-1]
    assert sent_back == {
        "role": "tool",
        "tool_call_id": sent_back["tool_call_id"],
        "content": "city 'Atlantis' not found",
    }
    assert result.messages[1].is_error
    [count] = result.stats.tool_calls.values()
    assert (count.tool, count.server, count.calls, count.errors) == ("weather_forecast", "weather", 1, 1)


async def test_pool_failure_becomes_an_error_result_not_a_failed_chat(harness: Harness) -> None:
    async def down(args: dict[str, object]) -> CallToolResult:
        raise NotFoundError("unknown tool 'weather_forecast' (server restarting)")

    harness.pool.handlers["weather_forecast"] = down
    harness.fake.script(Reply.calls(ScriptedCall("weather_forecast", {"city": "x"})), Reply.answer("sorry"))
    result = await harness.loop.run(ask(discovered_tools=["weather_forecast"]))
    assert result.messages[1].content == "Error: unknown tool 'weather_forecast' (server restarting)"
    assert result.stop_reason == "completed"


async def test_malformed_tool_arguments_give_the_llm_an_error_and_skip_the_pool(harness: Harness) -> None:
    harness.fake.script(Reply.calls(ScriptedCall("clock_now", '{"tz": ')), Reply.answer("retrying"))
    result = await harness.loop.run(ask())
    assert result.messages[1].is_error
    assert result.messages[1].content.startswith(
        "Error: invalid arguments for tool 'clock_now': the arguments are not valid JSON"
    )
    assert harness.pool.calls == []


async def test_malformed_search_arguments_return_discoverys_message_to_the_llm(harness: Harness) -> None:
    harness.fake.script(
        Reply.calls(ScriptedCall("search_tools", {"tool_names": "weather_forecast"})), Reply.answer("x")
    )
    result = await harness.loop.run(ask())
    assert result.messages[1].content == "Error: tool_names must be a list of strings"
    assert result.messages[1].is_error


async def test_iteration_limit_returns_messages_so_far_with_stats(harness: Harness) -> None:
    harness.fake.responder = lambda req: Reply.calls(ScriptedCall("clock_now", {}))
    result = await harness.loop.run(ask(max_iterations=3))
    assert result.stop_reason == "iteration_limit"
    assert "3 iterations" in result.error
    assert [m.role for m in result.messages] == ["assistant", "tool"] * 3
    assert (result.stats.iterations, result.stats.llm_calls) == (3, 3)
    assert harness.metric("toolscout_chats_total", model="gpt", outcome="iteration_limit") == 1


async def test_config_iteration_limit_applies_when_the_request_sets_none(harness: Harness) -> None:
    harness.fake.responder = lambda req: Reply.calls(ScriptedCall("clock_now", {}))
    result = await harness.loop.run(ask())
    assert (result.stop_reason, result.stats.iterations) == ("iteration_limit", 5)


async def test_rate_limit_is_retried_then_succeeds(harness: Harness) -> None:
    harness.fake.script(Reply.error(429, "slow down"), Reply.answer("fine"))
    result = await harness.loop.run(ask())
    assert result.messages[0].content == "fine"
    assert len(harness.fake.requests) == 2
    assert (
        harness.metric("toolscout_llm_errors_total", provider="openai", model="gpt", reason="rate_limited")
        == 1
    )


async def test_rate_limit_exhausted_is_resource_exhausted_with_the_providers_reason(harness: Harness) -> None:
    harness.fake.responder = lambda req: Reply.error(429, "quota exceeded for org")
    with pytest.raises(ProviderRateLimitedError, match="quota exceeded for org"):
        await harness.loop.run(ask())
    assert len(harness.fake.requests) == 3  # max_retries=2


async def test_server_errors_exhausted_are_unavailable_without_secrets(harness: Harness) -> None:
    harness.fake.responder = lambda req: Reply.error(500, "boom, key sk-test-secret-key-123456 invalid")
    with pytest.raises(ProviderUnavailableError) as info:
        await harness.loop.run(ask())
    assert "boom" in info.value.message
    assert "sk-test-secret-key-123456" not in info.value.message
    assert harness.metric("toolscout_chats_total", model="gpt", outcome="error") == 1


async def test_provider_rejecting_tools_is_retried_once_without_tools_and_flagged(harness: Harness) -> None:
    harness.fake.script(Reply.tools_not_supported(), Reply.answer("I can't use tools, but hi."))
    result = await harness.loop.run(ask())
    assert result.tools_disabled_fallback
    assert result.messages[0].content == "I can't use tools, but hi."
    assert harness.fake.requests[0].tool_names == ["clock_now", "search_tools"]
    assert "tools" not in harness.fake.requests[1].body
    # Counted once: the rejected attempt carried the definitions; later calls of the chat send none.
    assert result.stats.discovery.definition_tokens_sent == 200


async def test_unknown_model_lists_the_configured_models(harness: Harness) -> None:
    with pytest.raises(UnknownModelError, match="configured models: gpt, sonnet, templated"):
        await harness.loop.run(ask(model="gpt-9"))


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (ChatRequest(messages=[], model="gpt"), "messages must not be empty"),
        (ChatRequest(messages=[Message("robot", "x")], model="gpt"), "is not one of"),  # type: ignore[arg-type]
        (ChatRequest(messages=[Message("tool", "x")], model="gpt"), "needs tool_call_id"),
        (ChatRequest(messages=[Message("user", "x")], model="gpt", meta_json="[1]"), "JSON object"),
        (
            ChatRequest(messages=[Message("user", "x")], model="gpt", tool_result_format="xml"),
            "tool_result_format",
        ),
        (
            ChatRequest(messages=[Message("user", "x")], model="gpt", conversation_id="c" * 257),
            "conversation_id must be at most 256",
        ),
    ],
)
async def test_malformed_requests_are_invalid_arguments(
    harness: Harness, request_: ChatRequest, message: str
) -> None:
    with pytest.raises(InvalidChatError, match=message):
        await harness.loop.run(request_)


async def test_unknown_toolset_is_not_found(harness: Harness) -> None:
    with pytest.raises(NotFoundError, match="unknown toolset"):
        await harness.loop.run(ask(toolset="nope"))


async def test_function_args_result_format_and_size_cap_are_applied(harness: Harness) -> None:
    async def big(args: dict[str, object]) -> CallToolResult:
        return text_result("x" * 1000, server="clock")

    harness.pool.handlers["clock_now"] = big
    harness.fake.script(Reply.calls(ScriptedCall("clock_now", {"tz": "UTC"})), Reply.answer("ok"))
    result = await harness.loop.run(ask(tool_result_format="function_args_result"))
    content = result.messages[1].content
    assert content.startswith("clock_now(tz='UTC') → xxx")
    assert content.endswith("[... truncated: 722 more characters not shown]")


async def test_meta_is_passed_to_every_tool_call(harness: Harness) -> None:
    harness.fake.script(Reply.calls(ScriptedCall("clock_now", {})), Reply.answer("ok"))
    await harness.loop.run(ask(meta_json='{"user": "u1"}'))
    assert harness.pool.calls[0].meta_json == '{"user": "u1"}'


async def test_think_tags_and_reasoning_field_are_separated_from_the_answer(harness: Harness) -> None:
    harness.fake.script(
        Reply.answer("<think>plan it</think>The answer is 4.", reasoning="2+2", reasoning_field="reasoning")
    )
    result = await harness.loop.run(ask())
    assert result.messages[0].content == "The answer is 4."
    assert result.messages[0].reasoning == "2+2\nplan it"


async def test_streaming_emits_text_and_reasoning_deltas_then_tool_events(harness: Harness) -> None:
    harness.fake.script(
        Reply.calls(
            ScriptedCall("search_tools", {"query": "forecast"}), text="<think>need weather</think>Looking"
        ),
        Reply.answer("Sunny today", reasoning="easy"),
    )
    events: list[ChatEvent] = []

    async def sink(event: ChatEvent) -> None:
        events.append(event)

    result = await harness.loop.run(ask(), events=sink)
    assert all(r.streamed for r in harness.fake.requests)
    text = "".join(e.text for e in events if isinstance(e, TextDeltaEvent))
    reasoning = "".join(e.text for e in events if isinstance(e, ReasoningDeltaEvent))
    assert text == "LookingSunny today"
    assert reasoning == "need weathereasy"
    assert [e.tools for e in events if isinstance(e, ToolsDiscoveredEvent)] == [["weather_forecast"]]
    finished = [e for e in events if isinstance(e, ToolCallFinishedEvent)]
    assert [(e.call.name, e.is_error) for e in finished] == [("search_tools", False)]
    assistant = [e.message for e in events if isinstance(e, AssistantMessageEvent)]
    assert [m.content for m in assistant] == ["Looking", "Sunny today"]
    assert result.messages[-1].reasoning == "easy"


async def test_model_template_is_rendered_with_the_tools_actually_sent(harness: Harness) -> None:
    harness.fake.script(
        Reply.calls(ScriptedCall("search_tools", {"query": "alerts"})),
        Reply.answer("ok"),
    )
    await harness.loop.run(ask(model="templated"))
    systems = [r.body["messages"][0]["content"] for r in harness.fake.requests]
    assert systems == ["Tools: clock_now search_tools", "Tools: clock_now search_tools weather_alerts"]


async def test_explicit_system_prompt_wins_over_template_and_history(harness: Harness) -> None:
    harness.fake.script(Reply.answer("ok"))
    request = ChatRequest(
        messages=[Message("system", "old"), Message("user", "x")], model="templated", system="Be brief."
    )
    await harness.loop.run(request)
    messages = harness.fake.requests[0].body["messages"]
    assert messages[0] == {"role": "system", "content": "Be brief."}
    assert [m["role"] for m in messages] == ["system", "user"]


async def test_cancelling_the_chat_cancels_the_in_flight_tool_call(harness: Harness) -> None:
    release = asyncio.Event()

    async def slow(args: dict[str, object]) -> CallToolResult:
        await release.wait()
        return text_result("late")

    harness.pool.handlers["clock_now"] = slow
    harness.fake.script(Reply.calls(ScriptedCall("clock_now", {})))
    task = asyncio.create_task(harness.loop.run(ask()))
    await harness.pool.wait_for_calls(1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert harness.pool.cancelled == ["clock_now"]
    assert harness.metric("toolscout_chats_total", model="gpt", outcome="cancelled") == 1


async def test_deadline_stops_a_slow_llm_call_and_the_provider_sees_the_disconnect(harness: Harness) -> None:
    harness.fake.script(Reply.answer("too late", hold=asyncio.Event()))
    with pytest.raises(ChatDeadlineError):
        await harness.loop.run(ask(), time_limit=0.3)
    await harness.fake.wait_for_disconnects(1)
    assert harness.metric("toolscout_chats_total", model="gpt", outcome="deadline") == 1


async def test_deadline_is_passed_down_to_tool_calls(harness: Harness) -> None:
    harness.fake.script(Reply.calls(ScriptedCall("clock_now", {})), Reply.answer("ok"))
    await harness.loop.run(ask(), time_limit=30)
    limit = harness.pool.calls[0].time_limit
    assert limit is not None
    assert 0 < limit <= 30


async def test_empty_or_repeated_tool_call_ids_are_made_unique(harness: Harness) -> None:
    harness.fake.script(
        Reply.calls(ScriptedCall("clock_now", {}, id="same"), ScriptedCall("clock_now", {}, id="same")),
        Reply.answer("ok"),
    )
    result = await harness.loop.run(ask())
    ids = [c.id for c in result.messages[0].tool_calls]
    assert len(set(ids)) == 2
    assert [m.tool_call_id for m in result.messages[1:3]] == ids


async def test_search_results_record_what_they_loaded_so_later_turns_need_no_replay(harness: Harness) -> None:
    harness.fake.script(
        Reply.calls(ScriptedCall("search_tools", {"query": "forecast"}, id="s1")),
        Reply.answer("Found a forecast tool."),
    )
    first = await harness.loop.run(ask())
    search_result = first.messages[1]
    assert search_result.loaded_tools == ["weather_forecast"]
    history = [Message("user", "weather in Paris?"), *first.messages, Message("user", "and tomorrow?")]
    searches_before = len(harness.discovery.searches)
    harness.fake.script(Reply.answer("Rain."))
    second = await harness.loop.run(ChatRequest(messages=history, model="gpt"))
    assert second.loaded_tools == ["weather_forecast"]
    assert len(harness.discovery.searches) == searches_before  # nothing replayed
    # A history from another client, without the record, is replayed once.
    history[2] = dataclasses.replace(search_result, loaded_tools=None)
    harness.fake.script(Reply.answer("Rain."))
    third = await harness.loop.run(ChatRequest(messages=history, model="gpt"))
    assert third.loaded_tools == ["weather_forecast"]
    assert len(harness.discovery.searches) == searches_before + 1


async def test_deferred_names_are_fetched_once_per_catalog_version_not_per_chat(harness: Harness) -> None:
    for _ in range(3):
        harness.fake.script(
            Reply.calls(ScriptedCall("weather_forecast", {"city": "Paris"})), Reply.answer("x")
        )
        result = await harness.loop.run(ask())
        assert result.messages[1].content == NOT_LOADED
    assert harness.discovery.deferred_name_fetches == 1


async def test_an_inline_toolset_reaches_every_discovery_call_of_the_chat(harness: Harness) -> None:
    inline = '{"servers": {"weather": true, "clock": true}}'
    harness.fake.script(
        Reply.calls(ScriptedCall("weather_forecast", {"city": "Paris"})),  # before loading it
        Reply.calls(ScriptedCall("search_tools", {"query": "forecast"})),
        Reply.answer("Sunny."),
    )
    result = await harness.loop.run(ask(toolset=ToolsetRef(filter_json=inline)))
    assert result.stop_reason == "completed"
    # Plan, deferred names (for the early call), search: all with the caller's filter.
    assert len(harness.discovery.toolset_jsons) >= 3
    assert set(harness.discovery.toolset_jsons) == {inline}
    assert harness.metric("toolscout_chats_total", model="gpt", outcome="completed") == 1
    assert harness.metric("toolscout_tokens_saved_total", model="gpt", toolset="_inline") > 0
