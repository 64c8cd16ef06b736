"""A chat restricted by an inline toolset, end to end: the client library, the orchestrator, discovery
and the pool over gRPC with our example MCP servers, and the real OpenAI SDK against the fake
provider. The filter travels with the request; no toolset is configured."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import pytest_asyncio
from toolscout.client import AsyncOrchestratorClient, InvalidArgumentError, NotFoundError

from tests.support.fake_provider import FakeProvider, Reply, ScriptedCall
from tests.support.mcp_servers import example_server_config
from tests.support.stack import running_stack
from toolscout_kit.config import parse_config

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

WAIT = 60.0
FORECAST = "weather__get_forecast"


@dataclass
class Chat:
    fake: FakeProvider
    client: AsyncOrchestratorClient


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def chat(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Chat]:
    base = tmp_path_factory.mktemp("inline")
    async with FakeProvider() as fake:
        config = parse_config(
            {
                "clients": {
                    "chat": {"provider": "openai", "base_url": fake.openai_base_url, "api_key": "sk-x"}
                },
                "models": {"gpt": {"client": "chat", "model": "gpt-4.1"}},
                "servers": {
                    "text": example_server_config("text"),
                    "weather": example_server_config("weather", defer_loading=True),
                    "notes": example_server_config("notes", defer_loading=True),
                },
                "tool_discovery": {"enabled": True},
            },
            base_dir=base,
        )
        async with running_stack(config) as stack:
            assert stack.orchestrator is not None
            async with AsyncOrchestratorClient.connect(stack.orchestrator.address) as client:
                yield Chat(fake, client)


async def test_a_chat_with_an_inline_toolset_sees_searches_and_calls_only_its_tools(chat: Chat) -> None:
    chat.fake.requests.clear()
    chat.fake.script(
        Reply.calls(ScriptedCall("search_tools", {"query": "weather forecast"}, id="call_s")),
        Reply.calls(ScriptedCall(FORECAST, {"location": {"city": "Berlin"}, "days": 2}, id="call_f")),
        Reply.answer("Mild."),
    )
    inline = {"servers": {"weather": True, "notes": {"exclude": ["delete_note"]}}}
    result = await chat.client.chat("weather in Berlin?", model="gpt", toolset=inline, deadline=WAIT)
    assert result.stop_reason == "completed", result.error
    first, second, _ = chat.fake.requests
    # The text server is eager without a toolset; this filter leaves it out.
    assert first.tool_names == ["search_tools"]
    description = first.body["tools"][0]["function"]["description"]
    assert "weather" in description
    assert "text" not in description
    assert second.tool_names[0] == "search_tools"
    assert FORECAST in second.tool_names
    assert all(name.startswith("weather__") for name in second.tool_names[1:])
    search, forecast = (m for m in result.messages if m.role == "tool")
    assert FORECAST in (search.loaded_tools or ())
    assert forecast.content.startswith("Berlin forecast")
    assert FORECAST in result.loaded_tools
    assert all(name.startswith("weather__") for name in result.loaded_tools)


async def test_a_chat_with_an_inline_toolset_naming_an_unknown_server_is_not_found(chat: Chat) -> None:
    with pytest.raises(
        NotFoundError, match=r"server 'wether' is not configured \(servers: notes, text, weather\)"
    ):
        await chat.client.chat("hi", model="gpt", toolset={"servers": {"wether": True}}, deadline=WAIT)
    # The old keyword still reaches the orchestrator (with its deprecation warning for one release).
    with (
        pytest.warns(DeprecationWarning, match="toolset_json is deprecated"),
        pytest.raises(InvalidArgumentError, match="not both"),
    ):
        await chat.client.chat(
            "hi",
            model="gpt",
            toolset="everyday",
            toolset_json='{"servers": {"weather": true}}',
            deadline=WAIT,
        )
