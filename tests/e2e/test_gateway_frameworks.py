"""Agent frameworks' MCP clients against the gateway: what their model sees of ``search_tools``.

- FastMCP's ``Client``: the structured answer carries the guidance the text gives;
- pydantic-ai's ``MCPToolset`` (built on FastMCP), with a scripted ``FunctionModel`` (no provider):
  pydantic-ai hands the model a tool's ``structuredContent`` when it has one, so the no-match hint
  must be there, or the model sees an empty list and nothing to do next.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from fastmcp import Client as FastMCPClient
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from tests.support.gateway import GatewayStack, gateway_stack
from tests.support.mcp_servers import example_server_config
from toolscout_kit.config import parse_config

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

NO_MATCH = "No tools found matching 'book a flight to Paris'"


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def gw(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[GatewayStack]:
    config = parse_config(
        {
            "servers": {"weather": example_server_config("weather", defer_loading=True)},
            "tool_discovery": {"enabled": True},
        },
        base_dir=tmp_path_factory.mktemp("frameworks"),
    )
    async with gateway_stack(config) as running:
        yield running


async def test_fastmcp_sees_the_guidance_in_the_structured_answer(gw: GatewayStack) -> None:
    async with FastMCPClient(gw.url) as client:
        missed = await client.call_tool("search_tools", {"query": "book a flight to Paris"})
        found = await client.call_tool("search_tools", {"query": "weather forecast"})
    assert missed.structured_content is not None
    assert missed.structured_content["tools"] == []
    assert missed.structured_content["guidance"].startswith(NO_MATCH)
    assert found.structured_content is not None
    assert found.structured_content["tools"][0]["name"] == "weather__get_forecast"
    assert "call_tool" in found.structured_content["guidance"]


async def test_a_pydantic_ai_model_sees_the_no_match_hint(gw: GatewayStack) -> None:
    seen: list[Any] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [p for m in messages for p in getattr(m, "parts", ()) if isinstance(p, ToolReturnPart)]
        if not returns:
            assert {t.name for t in info.function_tools} >= {"search_tools", "call_tool"}
            return ModelResponse(parts=[ToolCallPart("search_tools", {"query": "book a flight to Paris"})])
        seen.append(returns[-1].content)
        return ModelResponse(parts=[TextPart("no flight tool here")])

    agent = Agent(FunctionModel(model), toolsets=[MCPToolset(gw.url)])
    async with agent:
        result = await agent.run("Book me a flight to Paris")
    assert result.output == "no flight tool here"
    assert len(seen) == 1
    assert isinstance(seen[0], dict)
    assert seen[0]["tools"] == []
    assert seen[0]["guidance"].startswith(NO_MATCH)
