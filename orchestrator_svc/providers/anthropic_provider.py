"""Anthropic Messages through the official SDK."""

from __future__ import annotations

import base64
import json
from typing import Any

import anthropic
from anthropic import AsyncAnthropic

from orchestrator_svc.messages import DeltaSink, LLMRequest, LLMResult, Message, ToolCall, ToolDef, Usage
from orchestrator_svc.providers.base import (
    Failure,
    SdkProvider,
    StreamCollector,
    classify_status,
    clean_reason,
    parse_retry_after,
)
from orchestrator_svc.reasoning import split_reasoning

__all__ = ["DEFAULT_MAX_TOKENS", "AnthropicProvider", "anthropic_messages", "anthropic_tools"]

# The Messages API requires max_tokens; used when the model config sets none.
DEFAULT_MAX_TOKENS = 4096
_IMAGE_TYPES = {"image/jpeg", "image/png", "image/gif", "image/webp"}


def anthropic_tools(tools: list[ToolDef]) -> list[dict[str, Any]]:
    out = []
    for t in tools:
        schema = (
            t.input_schema if t.input_schema.get("type") == "object" else {"type": "object", "properties": {}}
        )
        out.append({"name": t.llm_name, "description": t.description, "input_schema": schema})
    return out


def _arguments(raw: str) -> dict[str, Any]:
    # The history may hold malformed arguments the model produced; the API needs an object.
    try:
        value = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _tool_result(m: Message) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": m.content or "(empty result)"}]
    for a in m.attachments:
        if a.type == "image" and a.mime_type in _IMAGE_TYPES:
            source = {"type": "base64", "media_type": a.mime_type, "data": base64.b64encode(a.data).decode()}
            content.append({"type": "image", "source": source})
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": content}
    if m.is_error:
        block["is_error"] = True
    return block


def anthropic_messages(system: str, messages: list[Message]) -> tuple[str, list[dict[str, Any]]]:
    """(system, messages): system messages of the history join the system prompt, tool results
    become user turns, and consecutive turns of one role are merged (the API wants alternation)."""
    systems = [system] if system else []
    out: list[dict[str, Any]] = []

    def push(role: str, blocks: list[dict[str, Any]]) -> None:
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for m in messages:
        if m.role == "system":
            systems.append(m.content)
        elif m.role == "user":
            push("user", [{"type": "text", "text": m.content}])
        elif m.role == "tool":
            push("user", [_tool_result(m)])
        else:
            blocks: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
            blocks += [
                {"type": "tool_use", "id": c.id, "name": c.name, "input": _arguments(c.arguments_json)}
                for c in m.tool_calls
            ]
            push("assistant", blocks or [{"type": "text", "text": "(no content)"}])
    return "\n\n".join(s for s in systems if s), out


def _usage(raw: Any) -> Usage:
    if raw is None:
        return Usage()
    return Usage(
        getattr(raw, "input_tokens", 0) or 0,
        getattr(raw, "output_tokens", 0) or 0,
        getattr(raw, "cache_read_input_tokens", 0) or 0,
    )


class AnthropicProvider(SdkProvider):
    provider = "anthropic"

    def __init__(self, client: AsyncAnthropic, **kw: Any) -> None:
        super().__init__(**kw)
        self._client = client

    def _params(self, request: LLMRequest, tools: bool) -> dict[str, Any]:
        system, messages = anthropic_messages(request.system, request.messages)
        params: dict[str, Any] = {
            "model": request.model,
            "messages": messages,
            "max_tokens": request.max_tokens or DEFAULT_MAX_TOKENS,
        }
        if system:
            params["system"] = system
        if tools and request.tools:
            # Tool definitions are already wire-format JSON: sent as extra_body, they skip the SDK's
            # recursive TypedDict transform, which costs milliseconds per call on large schemas.
            params["extra_body"] = {"tools": anthropic_tools(request.tools)}
        if request.temperature is not None:
            params["temperature"] = request.temperature
        return params

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
        answer, tagged = split_reasoning("".join(text))
        return LLMResult(
            answer, "\n".join(r for r in [*reasoning, tagged] if r), calls, _usage(response.usage)
        )

    async def _stream(self, params: dict[str, Any], sink: DeltaSink, time_limit: float) -> LLMResult:
        events = await self._client.messages.create(**params, stream=True, timeout=time_limit)
        reply = StreamCollector(sink)
        async with events:
            async for event in events:
                if event.type == "message_start":
                    reply.usage = _usage(event.message.usage)
                elif event.type == "content_block_start" and event.content_block.type == "tool_use":
                    reply.call(event.index)[:2] = [event.content_block.id, event.content_block.name]
                elif event.type == "content_block_delta":
                    delta = event.delta
                    if delta.type == "text_delta":
                        await reply.answer(delta.text)
                    elif delta.type == "thinking_delta":
                        await reply.reasoning(delta.thinking)
                    elif delta.type == "input_json_delta" and event.index in reply.calls:
                        reply.calls[event.index][2] += delta.partial_json
                elif event.type == "message_delta" and event.usage is not None:
                    reply.usage.output_tokens = event.usage.output_tokens or reply.usage.output_tokens
            return await reply.finish(empty_arguments="{}")

    async def aclose(self) -> None:
        await self._client.close()

    def _classify(self, exc: Exception) -> Failure | None:
        if isinstance(exc, anthropic.APITimeoutError):
            return Failure("timeout", "the provider did not answer in time")
        if isinstance(exc, anthropic.APIConnectionError):
            return Failure("unavailable", clean_reason(f"connection error: {exc.message}"))
        if isinstance(exc, anthropic.APIStatusError):
            reason = exc.message
            body = exc.body
            if isinstance(body, dict) and isinstance(body.get("error"), dict):
                reason = str(body["error"].get("message") or reason)
            retry_after = parse_retry_after(exc.response.headers.get("retry-after"))
            return classify_status(exc.status_code, clean_reason(f"{exc.status_code} {reason}"), retry_after)
        if isinstance(exc, anthropic.AnthropicError):
            return Failure("unavailable", clean_reason(str(exc)))
        return None
