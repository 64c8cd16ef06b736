"""OpenAI Chat Completions through the official SDK; with ``base_url`` also Ollama, OpenRouter, vLLM.

A ``provider: openai`` client sends the conversation's ``prompt_cache_key`` and reads cache reads
and writes from the usage (``cached_tokens``, ``cache_write_tokens``)."""

from __future__ import annotations

import base64
from typing import Any

import openai
from openai import AsyncOpenAI
from toolscout.client import Tool

from orchestrator_svc.messages import (
    DeltaSink,
    LLMRequest,
    LLMResult,
    Message,
    ToolCall,
    Usage,
    tool_schema,
)
from orchestrator_svc.providers.base import (
    Failure,
    SdkErrors,
    SdkProvider,
    StreamCollector,
    classify_sdk_error,
)
from orchestrator_svc.providers.tool_results import shown_as_image, tool_result_text
from orchestrator_svc.reasoning import split_reasoning

__all__ = ["OpenAIProvider", "openai_messages", "openai_tools"]

# OpenAI-compatible servers put reasoning under either name.
_REASONING_FIELDS = ("reasoning_content", "reasoning")


def openai_tools(tools: list[Tool]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {"name": t.llm_name, "description": t.description, "parameters": tool_schema(t)},
        }
        for t in tools
    ]


def _image_message(tool_messages: list[Message]) -> dict[str, Any] | None:
    """A user message carrying the images of a run of tool results, for vision models."""
    parts: list[dict[str, Any]] = []
    for m in tool_messages:
        images = [a for a in m.attachments if shown_as_image(a, True)]
        if images:
            parts.append(
                {"type": "text", "text": f"Images returned by {m.name or 'a tool'} ({m.tool_call_id}):"}
            )
        for a in images:
            url = f"data:{a.mime_type or 'image/png'};base64,{base64.b64encode(a.data).decode()}"
            parts.append({"type": "image_url", "image_url": {"url": url}})
    return {"role": "user", "content": parts} if parts else None


def openai_messages(system: str, messages: list[Message], *, vision: bool = False) -> list[dict[str, Any]]:
    """Provider-neutral messages as Chat Completions messages.

    With ``vision``, tool-result images follow each run of tool messages as one user message
    (tool messages must stay contiguous after the assistant message that called them).
    """
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    pending: list[Message] = []
    for i, m in enumerate(messages):
        if m.role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": m.content or None}
            if m.tool_calls:
                entry["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments_json},
                    }
                    for c in m.tool_calls
                ]
            out.append(entry)
        elif m.role == "tool":
            out.append(
                {"role": "tool", "tool_call_id": m.tool_call_id, "content": tool_result_text(m, vision)}
            )
            pending.append(m)
            run_ends = i + 1 == len(messages) or messages[i + 1].role != "tool"
            if run_ends and vision:
                images = _image_message(pending)
                if images is not None:
                    out.append(images)
            if run_ends:
                pending = []
        else:
            out.append({"role": m.role, "content": m.content})
    return out


def _extra_reasoning(obj: Any) -> str:
    extra = getattr(obj, "model_extra", None) or {}
    for name in _REASONING_FIELDS:
        value = extra.get(name)
        if isinstance(value, str) and value:
            return value
    return ""


def _usage(raw: Any) -> Usage:
    """The call's usage: prompt tokens read from the cache and, since the GPT-5.6 family (billed
    at 1.25x), written to it (``prompt_tokens_details.cache_write_tokens``)."""
    if raw is None:
        return Usage()
    details = getattr(raw, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) or 0
    written = getattr(details, "cache_write_tokens", None) or 0
    return Usage(raw.prompt_tokens or 0, raw.completion_tokens or 0, cached, written)


class OpenAIProvider(SdkProvider):
    provider = "openai"

    def __init__(self, client: AsyncOpenAI, *, provider: str = "openai", **kw: Any) -> None:
        super().__init__(**kw)
        self._client = client
        self.provider = provider

    def _params(self, request: LLMRequest, tools: bool) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": request.model,
            "messages": openai_messages(request.system, request.messages, vision=request.vision),
        }
        if tools and request.tools:
            # Tool definitions are already wire-format JSON: sent as extra_body, they skip the SDK's
            # recursive TypedDict transform, which costs milliseconds per call on large schemas.
            params["extra_body"] = {"tools": openai_tools(request.tools)}
        if request.max_tokens is not None:
            params["max_tokens"] = request.max_tokens
        if request.temperature is not None:
            params["temperature"] = request.temperature
        if request.cache_key and self.provider == "openai":
            # Routes the conversation's requests to the same prompt cache (off per client with
            # ``prompt_cache_key: false``, for a compatible server that refuses the field).
            params["prompt_cache_key"] = request.cache_key
        return params

    async def _call_once(
        self, request: LLMRequest, *, tools: bool, stream: DeltaSink | None, time_limit: float
    ) -> LLMResult:
        params = self._params(request, tools)
        if stream is None:
            response = await self._client.chat.completions.create(**params, timeout=time_limit)
            choice = response.choices[0].message
            answer, tagged = split_reasoning(choice.content or "")
            reasoning = "\n".join(r for r in (_extra_reasoning(choice), tagged) if r)
            calls = [
                ToolCall(c.id, c.function.name, c.function.arguments or "")
                for c in (choice.tool_calls or [])
                if c.type == "function"
            ]
            finish = response.choices[0].finish_reason or ""
            return LLMResult(answer, reasoning, calls, _usage(response.usage), finish_reason=finish)
        return await self._stream(params, stream, time_limit)

    async def _stream(self, params: dict[str, Any], sink: DeltaSink, time_limit: float) -> LLMResult:
        chunks = await self._client.chat.completions.create(
            **params, stream=True, stream_options={"include_usage": True}, timeout=time_limit
        )
        reply = StreamCollector(sink)
        async with chunks:
            async for chunk in chunks:
                if chunk.usage is not None:
                    reply.usage = _usage(chunk.usage)
                for choice in chunk.choices:
                    reply.finish_reason = choice.finish_reason or reply.finish_reason
                    delta = choice.delta
                    extra = _extra_reasoning(delta)
                    if extra:
                        await reply.reasoning(extra)
                    if delta.content:
                        await reply.answer(delta.content)
                    for tc in delta.tool_calls or []:
                        slot = reply.call(tc.index)
                        if tc.id:
                            slot[0] = tc.id
                        if tc.function is not None:
                            slot[1] += tc.function.name or ""
                            slot[2] += tc.function.arguments or ""
            return await reply.finish()

    async def aclose(self) -> None:
        await self._client.close()

    def _classify(self, exc: Exception) -> Failure | None:
        return classify_sdk_error(exc, _ERRORS)


def _error_message(body: object) -> str:
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
        if isinstance(body.get("message"), str):
            return str(body["message"])
    return ""


_ERRORS = SdkErrors(
    openai.APITimeoutError,
    openai.APIConnectionError,
    openai.APIStatusError,
    openai.OpenAIError,
    lambda exc: _error_message(exc.body) or exc.message,
)
