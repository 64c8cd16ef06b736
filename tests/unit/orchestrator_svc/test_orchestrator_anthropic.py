"""The loop through the real Anthropic SDK against the fake Messages API."""

from __future__ import annotations

import asyncio

import pytest
from toolscout.client import CallToolResult

from orchestrator_svc.errors import ProviderRateLimitedError, ProviderUnavailableError
from orchestrator_svc.loop import ChatEvent, ChatRequest, ReasoningDeltaEvent, TextDeltaEvent
from orchestrator_svc.messages import Attachment, Message
from tests.support.fake_provider import Reply, ScriptedCall
from tests.support.orchestrator_fakes import Harness


def ask(**kw: object) -> ChatRequest:
    return ChatRequest(messages=[Message("user", "hi")], model="sonnet", **kw)  # type: ignore[arg-type]


async def test_plain_answer_separates_thinking_and_reports_cache_reads(harness: Harness) -> None:
    harness.fake.script(Reply.answer("Hello", reasoning="greet back", cached_tokens=7))
    result = await harness.loop.run(ask())
    [message] = result.messages
    assert (message.content, message.reasoning) == ("Hello", "greet back")
    assert result.stats.usage.cached_input_tokens == 7
    body = harness.fake.requests[0].body
    assert body["max_tokens"] == 4096
    # prompt_cache (on by default) sends the system prompt as a block with a cache breakpoint.
    [system] = body["system"]
    assert system["text"].startswith("You are a helpful assistant")
    assert system["cache_control"] == {"type": "ephemeral"}
    assert [t["name"] for t in body["tools"]] == ["clock_now", "search_tools"]
    headers = harness.fake.requests[0].headers
    # This SDK version sends the key as a bearer token; older ones used x-api-key.
    assert "ak-test" in (headers.get("x-api-key") or headers["authorization"])


async def test_search_call_and_tool_results_become_tool_result_blocks_with_images(harness: Harness) -> None:
    async def snapshot(args: dict[str, object]) -> CallToolResult:
        blocks = [
            Attachment("text", text="a chart"),
            Attachment("image", data=b"\x89PNG", mime_type="image/png"),
        ]
        return CallToolResult(blocks, server="weather")

    harness.pool.handlers["weather_forecast"] = snapshot
    harness.fake.script(
        Reply.calls(ScriptedCall("search_tools", {"query": "forecast"}, id="toolu_s")),
        Reply.calls(ScriptedCall("weather_forecast", {"city": "Oslo"}, id="toolu_f")),
        Reply.answer("Here it is."),
    )
    result = await harness.loop.run(ask())
    assert result.stop_reason == "completed"
    assert result.messages[3].attachments[0].mime_type == "image/png"
    last = harness.fake.requests[2].body["messages"]
    assert [m["role"] for m in last] == ["user", "assistant", "user", "assistant", "user"]
    tool_result = last[-1]["content"][0]
    assert tool_result["type"] == "tool_result"
    assert tool_result["tool_use_id"] == "toolu_f"
    assert tool_result["content"][0] == {"type": "text", "text": "a chart"}
    assert tool_result["content"][1]["source"] == {
        "type": "base64",
        "media_type": "image/png",
        "data": "iVBORw==",
    }
    assert [t["name"] for t in harness.fake.requests[2].body["tools"]] == [
        "clock_now",
        "search_tools",
        "weather_forecast",
    ]


async def test_parallel_tool_results_are_merged_into_one_user_turn(harness: Harness) -> None:
    harness.fake.script(
        Reply.calls(
            ScriptedCall("clock_now", {}, id="t1"), ScriptedCall("clock_now", {"tz": "UTC"}, id="t2")
        ),
        Reply.answer("done"),
    )
    await harness.loop.run(ask())
    last = harness.fake.requests[1].body["messages"][-1]
    assert last["role"] == "user"
    assert [b["tool_use_id"] for b in last["content"]] == ["t1", "t2"]


async def test_streaming_emits_thinking_and_text_deltas_and_parses_tool_input(harness: Harness) -> None:
    harness.fake.script(
        Reply.calls(ScriptedCall("clock_now", {"tz": "Europe/Paris"}), text="Checking", reasoning="time?"),
        Reply.answer("It is noon."),
    )
    events: list[ChatEvent] = []

    async def sink(event: ChatEvent) -> None:
        events.append(event)

    result = await harness.loop.run(ask(), events=sink)
    assert "".join(e.text for e in events if isinstance(e, TextDeltaEvent)) == "CheckingIt is noon."
    assert "".join(e.text for e in events if isinstance(e, ReasoningDeltaEvent)) == "time?"
    assert harness.pool.calls[0].arguments_json == '{"tz": "Europe/Paris"}'
    assert result.messages[-1].content == "It is noon."


async def test_overloaded_then_success_is_retried(harness: Harness) -> None:
    harness.fake.script(Reply.error(529, "Overloaded"), Reply.answer("ok"))
    result = await harness.loop.run(ask())
    assert result.messages[0].content == "ok"
    assert (
        harness.metric(
            "toolscout_orchestrator_llm_errors_total",
            provider="anthropic",
            model="sonnet",
            reason="unavailable",
        )
        == 1
    )


async def test_rate_limit_and_server_errors_exhausted_map_to_their_categories(harness: Harness) -> None:
    harness.fake.responder = lambda req: Reply.error(429, "rate limited: 50 rpm")
    with pytest.raises(ProviderRateLimitedError, match="50 rpm"):
        await harness.loop.run(ask())
    harness.fake.responder = lambda req: Reply.error(500, "internal")
    with pytest.raises(ProviderUnavailableError, match="after 3 attempts"):
        await harness.loop.run(ask())


async def test_cancel_during_a_slow_stream_closes_the_provider_connection(harness: Harness) -> None:
    harness.fake.script(Reply.answer("never", hold=asyncio.Event()))

    async def sink(event: ChatEvent) -> None:
        pass

    task = asyncio.create_task(harness.loop.run(ask(), events=sink))
    await harness.fake.wait_for_requests(1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await harness.fake.wait_for_disconnects(1)
