"""Shared pieces of the provider-level native-deferral tests: a small toolset with one search
tool, deferred tools on two servers, and requests in either mode."""

from __future__ import annotations

import json
from typing import Any, Literal

from toolscout.client import Deferral, Tool

from orchestrator_svc.messages import LLMRequest, LLMResult, Message, ToolCall
from orchestrator_svc.providers.base import SdkProvider

__all__ = ["DEFERRED", "SEARCH", "TOOLS", "collect", "deferred", "eager", "request", "search_turn"]


def _tool(server: str, name: str, description: str, **props: str) -> Tool:
    schema = {"type": "object", "properties": {k: {"type": v} for k, v in props.items()}}
    return Tool(
        server, name, f"{server}_{name}", description=description, input_schema_json=json.dumps(schema)
    )


SEARCH = Tool(
    "",
    "search_tools",
    "search_tools",
    description="Search deferred tools. Servers: weather (2 tools), files (1 tool).",
    input_schema_json=json.dumps(
        {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "server_name": {"type": "string"},
                "tool_names": {"type": "array", "items": {"type": "string"}},
            },
        }
    ),
)
# Every tool of the toolset, in the stable order native mode sends them.
TOOLS = [
    _tool("clock", "now", "Current time", tz="string"),
    SEARCH,
    _tool("weather", "forecast", "Weather forecast for a city", city="string"),
    _tool("weather", "alerts", "Severe weather alerts", region="string"),
    _tool("files", "read", "Read a file", path="string"),
]
# The deferred ones (declared with defer_loading in native mode).
DEFERRED = frozenset({"weather_forecast", "weather_alerts", "files_read"})


def eager() -> list[Tool]:
    return [t for t in TOOLS if t.llm_name not in DEFERRED]


def deferred(name: str) -> Tool:
    return next(t for t in TOOLS if t.llm_name == name)


def request(
    messages: list[Message],
    *,
    mode: Deferral = Deferral.NATIVE,
    tools: list[Tool] | None = None,
    model: str = "claude-opus-4-7",
    **kw: Any,
) -> LLMRequest:
    """A request as the loop sends it: native mode declares every tool, append only the loaded."""
    chosen = tools if tools is not None else (TOOLS if mode == "native" else eager())
    declared = DEFERRED & {t.llm_name for t in chosen} if mode == "native" else frozenset()
    return LLMRequest(model, "You are helpful.", messages, chosen, deferral=mode, deferred=declared, **kw)


def search_turn(loaded: list[str], *, call_id: str = "toolu_s1", query: str = "weather") -> list[Message]:
    """A user question, the model's search_tools call and its result loading ``loaded``."""
    return [
        Message("user", "weather in Paris?"),
        Message("assistant", "", [ToolCall(call_id, "search_tools", f'{{"query": "{query}"}}')]),
        Message(
            "tool",
            f"Found {len(loaded)} tools.",
            tool_call_id=call_id,
            name="search_tools",
            loaded_tools=loaded,
        ),
    ]


async def collect(provider: SdkProvider, req: LLMRequest, *, stream: bool) -> tuple[LLMResult, list[str]]:
    """Runs one call, streamed or not; returns the result and the streamed pieces."""
    pieces: list[str] = []

    async def sink(kind: Literal["text", "reasoning"], text: str) -> None:
        pieces.append(f"{kind}:{text}")

    result = await provider.complete(req, stream=sink if stream else None)
    return result, pieces
