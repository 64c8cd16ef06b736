"""Anthropic Messages through the official SDK (request bodies: :mod:`.anthropic_wire`)."""

from __future__ import annotations

import json
from typing import Any

import anthropic
from anthropic import AsyncAnthropic

from orchestrator_svc.history import search_result_references
from orchestrator_svc.messages import DeltaSink, LLMRequest, LLMResult, NativeItem, ToolCall, Usage
from orchestrator_svc.providers.anthropic_wire import (
    DEFAULT_MAX_TOKENS,
    anthropic_body,
    anthropic_messages,
    anthropic_tools,
)
from orchestrator_svc.providers.base import (
    Failure,
    SdkErrors,
    SdkProvider,
    StreamCollector,
    classify_sdk_error,
)
from orchestrator_svc.reasoning import split_reasoning
from toolscout_kit.json_text import json_object_or_empty

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "AnthropicProvider",
    "anthropic_messages",
    "anthropic_tools",
    "anthropic_usage",
]

# Output blocks the neutral Message cannot express: when one is present the whole output is
# kept as native items and sent back verbatim.
_SERVER_BLOCKS = {"server_tool_use", "tool_search_tool_result"}


def anthropic_usage(raw: Any) -> Usage:
    """Usage with Anthropic's three input counts (uncached, cache read, cache written) added up."""
    if raw is None:
        return Usage()
    uncached = getattr(raw, "input_tokens", 0) or 0
    read = getattr(raw, "cache_read_input_tokens", 0) or 0
    written = getattr(raw, "cache_creation_input_tokens", 0) or 0
    return Usage(uncached + read + written, getattr(raw, "output_tokens", 0) or 0, read, written)


def _loaded_by_server_search(blocks: list[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(name for b in blocks for name in search_result_references(b)))


def _result(
    text: str, reasoning: list[str], calls: list[ToolCall], usage: Usage, blocks: list[dict[str, Any]]
) -> LLMResult:
    answer, tagged = split_reasoning(text)
    result = LLMResult(answer, "\n".join(r for r in [*reasoning, tagged] if r), calls, usage)
    if any(b.get("type") in _SERVER_BLOCKS for b in blocks):
        result.native_items = [NativeItem("anthropic", b) for b in blocks]
        result.loaded_tools = _loaded_by_server_search(blocks)
    return result


class AnthropicProvider(SdkProvider):
    provider = "anthropic"
    tools_fallback = False

    def __init__(self, client: AsyncAnthropic, **kw: Any) -> None:
        super().__init__(**kw)
        self._client = client

    def _params(self, request: LLMRequest, tools: bool) -> dict[str, Any]:
        return self._wire_params(request, anthropic_body(request, tools=tools), "messages")

    async def _call_once(
        self, request: LLMRequest, *, tools: bool, stream: DeltaSink | None, time_limit: float
    ) -> LLMResult:
        params = self._params(request, tools)
        if stream is not None:
            return await self._stream(params, stream, time_limit)
        response = await self._client.messages.create(**params, timeout=time_limit)
        text: list[str] = []
        reasoning: list[str] = []
        calls: list[ToolCall] = []
        for block in response.content:
            if block.type == "text":
                text.append(block.text)
            elif block.type == "thinking":
                reasoning.append(block.thinking)
            elif block.type == "tool_use":
                calls.append(ToolCall(block.id, block.name, json.dumps(block.input)))
            # server_tool_use / tool_search_tool_result: Anthropic ran the search; kept below.
        blocks = [b.model_dump(mode="json", exclude_none=True) for b in response.content]
        result = _result("".join(text), reasoning, calls, anthropic_usage(response.usage), blocks)
        result.finish_reason = response.stop_reason or ""
        return result

    async def _stream(self, params: dict[str, Any], sink: DeltaSink, time_limit: float) -> LLMResult:
        events = await self._client.messages.create(**params, stream=True, timeout=time_limit)
        reply = StreamCollector(sink)
        blocks = _BlockRecorder()
        async with events:
            async for event in events:
                if event.type == "message_start":
                    reply.usage = anthropic_usage(event.message.usage)
                elif event.type == "content_block_start":
                    blocks.start(event.index, event.content_block.model_dump(mode="json", exclude_none=True))
                    if event.content_block.type == "tool_use":
                        reply.call(event.index)[:2] = [event.content_block.id, event.content_block.name]
                elif event.type == "content_block_delta":
                    delta = event.delta
                    if delta.type == "text_delta":
                        await reply.answer(delta.text)
                    elif delta.type == "thinking_delta":
                        await reply.reasoning(delta.thinking)
                    elif delta.type == "input_json_delta" and event.index in reply.calls:
                        reply.calls[event.index][2] += delta.partial_json
                    blocks.delta(event.index, delta.model_dump(mode="json"))
                elif event.type == "content_block_stop":
                    blocks.stop(event.index)
                elif event.type == "message_delta" and event.usage is not None:
                    reply.usage.output_tokens = event.usage.output_tokens or reply.usage.output_tokens
                    reply.finish_reason = event.delta.stop_reason or reply.finish_reason
            streamed = await reply.finish(empty_arguments="{}")
        ordered = blocks.ordered()
        if any(b.get("type") in _SERVER_BLOCKS for b in ordered):
            streamed.native_items = [NativeItem("anthropic", b) for b in ordered]
            streamed.loaded_tools = _loaded_by_server_search(ordered)
        return streamed

    async def aclose(self) -> None:
        await self._client.close()

    def _classify(self, exc: Exception) -> Failure | None:
        return classify_sdk_error(exc, _ERRORS)


def _status_reason(exc: anthropic.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return str(body["error"].get("message") or exc.message)
    return exc.message


_ERRORS = SdkErrors(
    anthropic.APITimeoutError,
    anthropic.APIConnectionError,
    anthropic.APIStatusError,
    anthropic.AnthropicError,
    _status_reason,
)


class _BlockRecorder:
    """Rebuilds the streamed content blocks as the API would have returned them whole, so they
    can be sent back verbatim (text, thinking with its signature, tool inputs, server blocks)."""

    def __init__(self) -> None:
        self._blocks: dict[int, dict[str, Any]] = {}
        self._json: dict[int, str] = {}

    def start(self, index: int, block: dict[str, Any]) -> None:
        self._blocks[index] = block

    def delta(self, index: int, delta: dict[str, Any]) -> None:
        block = self._blocks.setdefault(index, {})
        kind = delta.get("type")
        if kind == "text_delta":
            block["text"] = block.get("text", "") + delta["text"]
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + delta["thinking"]
        elif kind == "signature_delta":
            block["signature"] = delta["signature"]
        elif kind == "input_json_delta":
            self._json[index] = self._json.get(index, "") + delta["partial_json"]

    def stop(self, index: int) -> None:
        if index in self._json:
            self._blocks[index]["input"] = json_object_or_empty(self._json.pop(index))

    def ordered(self) -> list[dict[str, Any]]:
        return [self._blocks[i] for i in sorted(self._blocks)]
