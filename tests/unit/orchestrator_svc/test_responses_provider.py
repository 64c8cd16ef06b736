"""The OpenAI Responses adapter through the real SDK against the fake ``/v1/responses``: the Chat
Completions feature set in append mode, and native tool search (``tool_search`` with client
execution, namespaces, ``tool_search_output``)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
from openai import AsyncOpenAI

from orchestrator_svc.errors import ProviderRejectedError
from orchestrator_svc.messages import Attachment, LLMResult, Message, NativeItem, ToolCall
from orchestrator_svc.providers.registry import build_provider
from orchestrator_svc.providers.responses_provider import OpenAIResponsesProvider
from tests.support.fake_provider import FakeProvider, RecordedRequest, Reply, ScriptedCall, ScriptedSearch
from tests.support.native_requests import TOOLS, collect, eager, request, search_turn
from toolscout_kit.config import ClientConfig

MODEL = "gpt-5.4"


@pytest.fixture
async def fake() -> AsyncIterator[FakeProvider]:
    async with FakeProvider() as fake:
        yield fake


@pytest.fixture
async def sdk(fake: FakeProvider) -> AsyncIterator[AsyncOpenAI]:
    client = AsyncOpenAI(api_key="k", base_url=fake.openai_base_url, max_retries=0)
    yield client
    await client.close()


@pytest.fixture
def provider(sdk: AsyncOpenAI) -> OpenAIResponsesProvider:
    return OpenAIResponsesProvider(sdk, client_name="oai", max_retries=2, request_timeout=10)


def _items(rec: RecordedRequest, kind: str) -> list[dict[str, Any]]:
    return [i for i in rec.body["input"] if i.get("type") == kind]


def _assistant(result: LLMResult) -> Message:
    """The assistant message the loop appends for ``result``."""
    return Message(
        "assistant",
        result.text,
        result.tool_calls,
        reasoning=result.reasoning,
        native_items=result.native_items,
    )


# --- append mode: what the Chat Completions adapter does ------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_plain_answer_with_usage_including_cached_tokens(
    fake: FakeProvider, provider: OpenAIResponsesProvider, stream: bool
) -> None:
    fake.script(Reply.answer("Hello there", input_tokens=1500, cached_tokens=1024, output_tokens=3))
    history = [Message("system", "Be brief."), Message("user", "hi")]
    result, pieces = await collect(provider, request(history, mode="append", model=MODEL), stream=stream)
    assert result.text == "Hello there"
    assert (result.usage.input_tokens, result.usage.cached_input_tokens, result.usage.output_tokens) == (
        1500,
        1024,
        3,
    )
    if stream:
        assert "".join(p.removeprefix("text:") for p in pieces) == "Hello there"
    body = fake.requests[0].body
    assert body["instructions"] == "You are helpful.\n\nBe brief."
    assert body["input"] == [{"role": "user", "content": "hi"}]
    assert [t["name"] for t in body["tools"]] == ["clock_now", "search_tools"]
    assert body["tools"][0] == {
        "type": "function",
        "name": "clock_now",
        "description": "Current time",
        "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}},
    }
    assert fake.requests[0].streamed == stream


@pytest.mark.parametrize("stream", [False, True])
async def test_parallel_calls_come_back_in_order_and_their_results_as_outputs(
    fake: FakeProvider, provider: OpenAIResponsesProvider, stream: bool
) -> None:
    fake.script(
        Reply.calls(
            ScriptedCall("clock_now", {}, id="c1"), ScriptedCall("clock_now", {"tz": "UTC"}, id="c2")
        ),
        Reply.answer("noon"),
    )
    history = [Message("user", "time?")]
    first, _ = await collect(provider, request(history, mode="append", model=MODEL), stream=stream)
    assert [(c.id, c.name, json.loads(c.arguments_json)) for c in first.tool_calls] == [
        ("c1", "clock_now", {}),
        ("c2", "clock_now", {"tz": "UTC"}),
    ]
    assert first.native_items == []  # nothing the neutral message cannot say
    history += [
        _assistant(first),
        Message("tool", "12:00", tool_call_id="c1"),
        Message("tool", "11:00", tool_call_id="c2"),
    ]
    await provider.complete(request(history, mode="append", model=MODEL))
    second = fake.requests[1]
    assert not second.rejected
    assert [i["call_id"] for i in _items(second, "function_call")] == ["c1", "c2"]
    assert [(i["call_id"], i["output"]) for i in _items(second, "function_call_output")] == [
        ("c1", "12:00"),
        ("c2", "11:00"),
    ]


@pytest.mark.parametrize("stream", [False, True])
async def test_reasoning_items_are_kept_and_sent_back_verbatim(
    fake: FakeProvider, provider: OpenAIResponsesProvider, stream: bool
) -> None:
    fake.script(
        Reply.calls(ScriptedCall("clock_now", {}, id="c1"), reasoning="The user wants the time."),
        Reply.answer("noon"),
    )
    history = [Message("user", "time?")]
    first, pieces = await collect(provider, request(history, mode="native", model=MODEL), stream=stream)
    assert first.reasoning == "The user wants the time."
    if stream:
        assert "".join(p.removeprefix("reasoning:") for p in pieces) == "The user wants the time."
    assert [i.type for i in first.native_items] == ["reasoning", "function_call"]
    reasoning = first.native_items[0].data
    history += [_assistant(first), Message("tool", "12:00", tool_call_id="c1")]
    await provider.complete(request(history, mode="native", model=MODEL))
    second = fake.requests[1]
    assert not second.rejected
    assert second.body["input"][1] == reasoning
    assert reasoning["summary"] == [{"type": "summary_text", "text": "The user wants the time."}]


async def test_rate_limits_and_server_errors_are_retried_through_the_shared_policy(
    fake: FakeProvider, provider: OpenAIResponsesProvider
) -> None:
    fake.script(Reply.error(429, "slow down"), Reply.error(503, "busy"), Reply.answer("ok"))
    result = await provider.complete(request([Message("user", "hi")], mode="append", model=MODEL))
    assert result.text == "ok"
    assert len(fake.requests) == 3


async def test_append_mode_retries_without_tools_when_the_server_rejects_them(
    fake: FakeProvider, provider: OpenAIResponsesProvider
) -> None:
    fake.script(Reply.tools_not_supported(), Reply.answer("plain"))
    result = await provider.complete(request([Message("user", "hi")], mode="append", model=MODEL))
    assert result.tools_disabled
    assert "tools" not in fake.requests[1].body


async def test_native_mode_never_retries_without_tools(
    fake: FakeProvider, provider: OpenAIResponsesProvider
) -> None:
    fake.script(Reply.error(400, "tools[2]: invalid namespace"), Reply.answer("unused"))
    with pytest.raises(ProviderRejectedError, match="invalid namespace"):
        await provider.complete(request([Message("user", "hi")], model=MODEL))
    assert len(fake.requests) == 1


async def test_tool_images_reach_vision_models_inside_the_function_output(
    fake: FakeProvider, provider: OpenAIResponsesProvider
) -> None:
    history = [
        Message("user", "chart?"),
        Message("assistant", "", [ToolCall("c1", "clock_now", "{}")]),
        Message(
            "tool",
            "a chart",
            tool_call_id="c1",
            attachments=[Attachment("image", data=b"\x89PNG", mime_type="image/png")],
        ),
    ]
    fake.script(Reply.answer("nice"))
    await provider.complete(request(history, mode="append", model=MODEL, vision=True))
    [output] = _items(fake.requests[0], "function_call_output")
    assert output["output"] == [
        {"type": "input_text", "text": "a chart\n[image attachment (image/png) follows]"},
        {"type": "input_image", "image_url": "data:image/png;base64,iVBORw=="},
    ]


# --- native mode -----------------------------------------------------------------------------


async def test_native_tools_are_loaded_functions_tool_search_and_one_namespace_per_server(
    fake: FakeProvider, provider: OpenAIResponsesProvider
) -> None:
    fake.script(Reply.answer("hi"))
    await provider.complete(request([Message("user", "hi")], model=MODEL, cache_key="conv-42"))
    body = fake.requests[0].body
    assert body["prompt_cache_key"] == "conv-42"
    tools = body["tools"]
    assert [t["type"] for t in tools] == ["function", "tool_search", "namespace", "namespace"]
    assert tools[1] == {
        "type": "tool_search",
        "execution": "client",
        "description": TOOLS[1].description,
        "parameters": TOOLS[1].input_schema,
    }
    assert [(t["name"], [f["name"] for f in t["tools"]]) for t in tools[2:]] == [
        ("weather", ["weather_forecast", "weather_alerts"]),
        ("files", ["files_read"]),
    ]
    assert tools[2]["description"] == "Tools of the MCP server 'weather'."
    assert all(f["defer_loading"] for t in tools[2:] for f in t["tools"])


@pytest.mark.parametrize("stream", [False, True])
async def test_a_search_round_trip_loads_tools_the_model_then_calls(
    fake: FakeProvider, provider: OpenAIResponsesProvider, stream: bool
) -> None:
    fake.script(
        Reply(searches=[ScriptedSearch({"query": "weather"}, call_id="call_s")]),
        Reply.calls(ScriptedCall("weather_forecast", {"city": "Paris"}, id="call_f")),
        Reply.answer("Sunny."),
    )
    history = [Message("user", "weather in Paris?")]
    first, _ = await collect(provider, request(history, model=MODEL), stream=stream)
    # The model's tool_search_call reaches the loop as a search_tools call.
    assert [(c.id, c.name, json.loads(c.arguments_json)) for c in first.tool_calls] == [
        ("call_s", "search_tools", {"query": "weather"})
    ]
    assert [i.type for i in first.native_items] == ["tool_search_call"]
    items = [NativeItem.from_json(i.to_json()) for i in first.native_items]
    history += [
        Message("assistant", first.text, first.tool_calls, native_items=items),
        Message(
            "tool", "Found 2 tools.", tool_call_id="call_s", loaded_tools=["weather_forecast", "files_read"]
        ),
    ]
    second, _ = await collect(provider, request(history, model=MODEL), stream=stream)
    [output] = _items(fake.requests[1], "tool_search_output")
    assert output == {
        "type": "tool_search_output",
        "call_id": "call_s",
        "execution": "client",
        "tools": [
            {
                "type": "namespace",
                "name": "weather",
                "description": "Tools of the MCP server 'weather'.",
                "tools": [
                    {
                        "type": "function",
                        "name": "weather_forecast",
                        "description": "Weather forecast for a city",
                        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                        "defer_loading": True,
                    }
                ],
            },
            {
                "type": "namespace",
                "name": "files",
                "description": "Tools of the MCP server 'files'.",
                "tools": [
                    {
                        "type": "function",
                        "name": "files_read",
                        "description": "Read a file",
                        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
                        "defer_loading": True,
                    }
                ],
            },
        ],
    }
    assert [c.name for c in second.tool_calls] == ["weather_forecast"]
    assert [i.data.get("namespace") for i in second.native_items] == ["weather"]
    history += [_assistant(second), Message("tool", "Sunny", tool_call_id="call_f")]
    await provider.complete(request(history, model=MODEL))
    assert [r.rejected for r in fake.requests] == ["", "", ""]
    # tools never changed within the conversation.
    assert len({json.dumps(r.body["tools"]) for r in fake.requests}) == 1


@pytest.mark.parametrize(
    ("text", "is_error"),
    [("query must be a string", True), ("No tools found matching 'teleport'. Try other words.", False)],
    ids=["failed", "found-nothing"],
)
async def test_a_search_that_loads_nothing_answers_its_call_and_tells_the_model_why(
    fake: FakeProvider, provider: OpenAIResponsesProvider, text: str, is_error: bool
) -> None:
    history = [
        Message("user", "weather?"),
        Message("assistant", "", [ToolCall("call_s", "search_tools", '{"query": 1}')]),
        Message(
            "tool", text, tool_call_id="call_s", is_error=is_error, loaded_tools=None if is_error else []
        ),
    ]
    fake.script(Reply.answer("Sorry."))
    await provider.complete(request(history, model=MODEL))
    sent = fake.requests[0]
    assert not sent.rejected
    output, note = sent.body["input"][2:]
    assert (output["type"], output["tools"]) == ("tool_search_output", [])
    # The output has no text: the result follows it as a developer message.
    assert note == {"role": "developer", "content": f"search_tools: {text}"}


async def test_a_namespace_appears_once_across_the_search_outputs_of_a_request(
    fake: FakeProvider, provider: OpenAIResponsesProvider
) -> None:
    history = [
        *search_turn(["weather_forecast"], call_id="call_s1"),
        Message("assistant", "", [ToolCall("call_f", "weather_forecast", '{"city": "Oslo"}')]),
        Message("tool", "Rain", tool_call_id="call_f"),
        Message("assistant", "", [ToolCall("call_s2", "search_tools", '{"query": "alerts"}')]),
        Message(
            "tool", "Found 2 tools.", tool_call_id="call_s2", loaded_tools=["weather_alerts", "files_read"]
        ),
        Message("assistant", "", [ToolCall("call_a", "weather_alerts", '{"region": "west"}')]),
        Message("tool", "None", tool_call_id="call_a"),
    ]
    fake.script(Reply.answer("No alerts."))
    await provider.complete(request(history, model=MODEL))
    sent = fake.requests[0]
    assert not sent.rejected
    first, second = _items(sent, "tool_search_output")
    assert [(t["type"], t.get("name")) for t in first["tools"]] == [("namespace", "weather")]
    # weather was shown already: its newly found function comes plain, files in its own namespace.
    assert [(t["type"], t.get("name")) for t in second["tools"]] == [
        ("namespace", "files"),
        ("function", "weather_alerts"),
    ]
    calls = {i["name"]: i.get("namespace") for i in _items(sent, "function_call")}
    assert calls == {"weather_forecast": "weather", "weather_alerts": None}


async def test_a_deferred_call_from_an_append_mode_history_is_loaded_by_name_first(
    fake: FakeProvider, provider: OpenAIResponsesProvider
) -> None:
    history = [
        Message("user", "weather?"),
        Message("assistant", "", [ToolCall("call_f", "weather_forecast", '{"city": "Oslo"}')]),
        Message("tool", "Rain", tool_call_id="call_f"),
    ]
    fake.script(Reply.answer("Rain in Oslo."))
    await provider.complete(request(history, model=MODEL))
    sent = fake.requests[0]
    assert not sent.rejected
    assert [i.get("type", "message") for i in sent.body["input"]] == [
        "message",
        "tool_search_call",
        "tool_search_output",
        "function_call",
        "function_call_output",
    ]
    assert sent.body["input"][1]["arguments"] == {"tool_names": ["weather_forecast"]}
    assert sent.body["input"][3]["namespace"] == "weather"


# --- the fake enforces the documented rules --------------------------------------------------


_DEFERRED_NS = {
    "type": "namespace",
    "name": "weather",
    "description": "weather",
    "tools": [
        {"type": "function", "name": "forecast", "parameters": {"type": "object"}, "defer_loading": True}
    ],
}
_SEARCH = {"type": "tool_search", "execution": "client"}


@pytest.mark.parametrize(
    ("items", "error"),
    [
        (
            [{"type": "tool_search_output", "call_id": "nope", "execution": "client", "tools": []}],
            "no open tool_search_call found for tool_search_output with call_id nope",
        ),
        (
            [{"type": "tool_search_call", "call_id": "s1", "execution": "client", "arguments": {}}],
            "no tool_search_output found for tool_search_call s1",
        ),
        (
            [
                {
                    "type": "function_call",
                    "call_id": "f1",
                    "name": "forecast",
                    "arguments": "{}",
                    "namespace": "weather",
                },
                {"type": "function_call_output", "call_id": "f1", "output": "x"},
            ],
            "function 'forecast' is deferred and no tool_search_output has returned it",
        ),
        (
            [{"type": "function_call_output", "call_id": "f9", "output": "x"}],
            "no tool call found for function call output with call_id f9",
        ),
        (
            [
                {"type": "tool_search_call", "call_id": "s1", "execution": "client", "arguments": {}},
                {
                    "type": "tool_search_output",
                    "call_id": "s1",
                    "execution": "client",
                    "tools": [_DEFERRED_NS],
                },
                {"type": "tool_search_call", "call_id": "s2", "execution": "client", "arguments": {}},
                {
                    "type": "tool_search_output",
                    "call_id": "s2",
                    "execution": "client",
                    "tools": [_DEFERRED_NS],
                },
            ],
            "Namespace names must be unique: 'weather'",
        ),
    ],
    ids=[
        "output-without-call",
        "call-without-output",
        "deferred-call-before-search",
        "output-without-function-call",
        "namespace-twice",
    ],
)
async def test_fake_rejects_inputs_breaking_the_tool_search_rules(
    fake: FakeProvider, sdk: AsyncOpenAI, items: list[dict[str, Any]], error: str
) -> None:
    fake.script(Reply.answer("never sent"))
    body: Any = [{"role": "user", "content": "hi"}, *items]
    with pytest.raises(openai.BadRequestError, match=error):
        await sdk.responses.create(model=MODEL, input=body, extra_body={"tools": [_SEARCH, _DEFERRED_NS]})
    assert fake.replies


async def test_fake_refuses_a_script_calling_a_deferred_function_no_search_returned(
    fake: FakeProvider, provider: OpenAIResponsesProvider
) -> None:
    fake.script(Reply.calls(ScriptedCall("weather_forecast", {"city": "Paris"})))
    with pytest.raises(ProviderRejectedError, match="no tool_search_output has returned it"):
        await provider.complete(request([Message("user", "weather?")], model=MODEL))


async def test_registry_builds_the_responses_adapter_for_api_responses(fake: FakeProvider) -> None:
    client = ClientConfig(provider="openai", api="responses", base_url=fake.openai_base_url, api_key="k")  # type: ignore[arg-type]
    provider = build_provider("oai", client)
    try:
        assert isinstance(provider, OpenAIResponsesProvider)
        assert provider.provider == "openai"
        fake.script(Reply.answer("hi"))
        assert (
            await provider.complete(request([Message("user", "hi")], tools=eager(), model=MODEL))
        ).text == "hi"
        assert fake.requests[0].path == "/v1/responses"
    finally:
        await provider.aclose()
