"""Independent MCP client implementations against the gateway, which fronts the real pool with our
example servers and an npm server (``@modelcontextprotocol/server-everything`` over stdio).

- the TypeScript SDK (npm ``@modelcontextprotocol/sdk``) in a node process;
- the OpenAI Agents SDK (``openai-agents``): an agent whose model is scripted on a local server that
  speaks the Chat Completions wire format, so the agent lists the gateway's tools, calls
  ``search_tools``, then ``call_tool`` (meta) or the loaded tool by its own name (progressive);
- (the ``mcp`` Python SDK, both revisions: tests/integration/test_gateway_mcp.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from tests.support.fake_provider import FakeProvider, RecordedRequest, Reply, ScriptedCall
from tests.support.gateway import GatewayStack, gateway_stack
from tests.support.mcp_servers import REPO_ROOT, everything_bin, example_server_config, ts_sdk_dir
from toolscout_kit.config import parse_config

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

TS_CLIENT = REPO_ROOT / "tests" / "fixtures" / "gateway" / "ts_client.mjs"


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def gw(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[GatewayStack]:
    tmp = tmp_path_factory.mktemp("gateway-clients")
    config = parse_config(
        {
            "servers": {
                "text": example_server_config("text"),
                "weather": example_server_config("weather", defer_loading=True),
                "everything": {"command": str(everything_bin()), "defer_loading": True},
            },
            "tool_discovery": {"enabled": True},
            "tool_sets": {"wx": {"servers": {"weather": True, "everything": True}}},
            "toolscout": {"gateway": {"modes": {"wx": "progressive"}}},
        },
        base_dir=tmp,
    )
    async with gateway_stack(config) as running:
        yield running


# --- the TypeScript SDK ------------------------------------------------------------------------


async def _ts_client(
    url: str, *, mode: str, query: str, tool: str, arguments: dict[str, Any]
) -> dict[str, Any]:
    folder = ts_sdk_dir()
    env = {
        **os.environ,
        "GATEWAY_URL": url,
        "GATEWAY_MODE": mode,
        "QUERY": query,
        "TOOL": tool,
        "ARGUMENTS": json.dumps(arguments),
    }

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["node", "--input-type=module"],
            input=TS_CLIENT.read_text(),
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    done = await asyncio.to_thread(run)
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


def _texts(result: dict[str, Any]) -> str:
    return "\n".join(block.get("text", "") for block in result["content"])


async def test_the_typescript_sdk_searches_and_calls_a_found_npm_tool_through_call_tool(
    gw: GatewayStack,
) -> None:
    seen = await _ts_client(
        gw.url,
        mode="meta",
        query="echo back a message",
        tool="everything__echo",
        arguments={"message": "from ts"},
    )
    assert seen["first"][-3:] == ["search_tools", "call_tool", "read_result"]
    assert seen["after"] == seen["first"]
    assert "everything__echo" in _texts(seen["search"])
    assert "everything__echo" in {t["name"] for t in seen["search"]["structuredContent"]["tools"]}
    assert not seen["call"].get("isError")
    assert "from ts" in _texts(seen["call"])


async def test_the_typescript_sdk_on_a_progressive_endpoint_gets_list_changed_and_calls_by_name(
    gw: GatewayStack,
) -> None:
    seen = await _ts_client(
        gw.gateway.toolset_url("wx"),
        mode="progressive",
        query="sum of two numbers",
        tool="everything__get-sum",
        arguments={"a": 2, "b": 40},
    )
    assert seen["session"]  # a handshake revision, with a session
    assert seen["first"] == ["search_tools", "call_tool"]
    assert seen["changed"] >= 1
    assert "everything__get-sum" in seen["after"]
    assert "42" in _texts(seen["call"])


# --- the OpenAI Agents SDK ---------------------------------------------------------------------


def _tool_names(request: RecordedRequest) -> list[str]:
    return [t["function"]["name"] for t in request.body.get("tools", [])]


async def _run_agent(url: str, fake: FakeProvider, second: ScriptedCall) -> tuple[Any, list[RecordedRequest]]:
    from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
    from agents.mcp import MCPServerStreamableHttp
    from openai import AsyncOpenAI

    set_tracing_disabled(True)  # traces would go to OpenAI's servers

    def respond(request: RecordedRequest) -> Reply:
        done = sum(1 for m in request.body["messages"] if m["role"] == "tool")
        if done == 0:
            return Reply.calls(ScriptedCall("search_tools", {"query": "weather forecast for a city"}))
        if done == 1:
            return Reply.calls(second)
        return Reply.answer("It will rain in Berlin.")

    fake.responder = respond
    openai_client = AsyncOpenAI(base_url=fake.openai_base_url, api_key="test-key")
    server = MCPServerStreamableHttp(params={"url": url}, name="toolscout", client_session_timeout_seconds=30)
    async with server:
        agent = Agent(
            name="assistant",
            instructions="Use the tools.",
            mcp_servers=[server],
            model=OpenAIChatCompletionsModel(model="gpt-test", openai_client=openai_client),
        )
        result = await Runner.run(agent, "What is the forecast for Berlin?")
    await openai_client.close()
    return result, list(fake.requests)


async def test_an_agents_sdk_agent_searches_then_runs_the_found_tool_through_call_tool(
    gw: GatewayStack,
) -> None:
    async with FakeProvider() as fake:
        call = ScriptedCall(
            "call_tool",
            {"name": "weather__get_forecast", "arguments": {"location": {"city": "Berlin"}, "days": 2}},
        )
        result, requests = await _run_agent(gw.url, fake, call)
    assert result.final_output == "It will rain in Berlin."
    assert len(requests) == 3
    # The model was offered the same tools on every call (the prompt cache survives the search).
    tools = [json.dumps(r.body["tools"], sort_keys=True) for r in requests]
    assert tools[0] == tools[1] == tools[2]
    assert _tool_names(requests[0])[-3:] == ["search_tools", "call_tool", "read_result"]
    results = [m["content"] for m in requests[2].body["messages"] if m["role"] == "tool"]
    assert "weather__get_forecast (server: weather, tool: get_forecast)" in json.dumps(results[0])
    assert "Berlin forecast" in json.dumps(results[1])


async def test_an_agents_sdk_agent_on_a_progressive_endpoint_calls_the_loaded_tool_by_name(
    gw: GatewayStack,
) -> None:
    async with FakeProvider() as fake:
        call = ScriptedCall("weather__get_forecast", {"location": {"city": "Berlin"}, "days": 1})
        result, requests = await _run_agent(gw.gateway.toolset_url("wx"), fake, call)
    assert result.final_output == "It will rain in Berlin."
    assert _tool_names(requests[0]) == ["search_tools", "call_tool"]
    # After the search the agent lists the tools again: the found ones have joined.
    assert "weather__get_forecast" in _tool_names(requests[1])
    results = [m["content"] for m in requests[2].body["messages"] if m["role"] == "tool"]
    assert "Berlin forecast" in json.dumps(results[1])
