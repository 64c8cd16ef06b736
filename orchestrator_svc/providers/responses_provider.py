"""OpenAI's Responses API through the official SDK (``clients.<name>.api: responses``).

Same loop features as the Chat Completions adapter (streamed or not, parallel calls, retries and
the tools fallback through :class:`SdkProvider`, usage with cached tokens) plus native deferral
(:mod:`.responses_wire`). A client-executed ``tool_search_call`` surfaces as a ``search_tools``
tool call with the call's ``call_id`` as id and its arguments as JSON; the loop answers it like
any search, and the tool message (with ``loaded_tools``) goes back as a ``tool_search_output``.
Reasoning items, ``tool_search_call`` items and namespaced calls are kept as native items (in
input shape) so the next request sends them back unchanged.
"""

from __future__ import annotations

import json
from typing import Any

from openai import AsyncOpenAI
from openai.types.responses import (
    ResponseFunctionToolCallParam,
    ResponseOutputMessageParam,
    ResponseReasoningItemParam,
)
from openai.types.responses.response_input_item_param import ToolSearchCall
from openai.types.responses.response_tool_search_output_item_param_param import (
    ResponseToolSearchOutputItemParamParam,
)
from toolscout.client import SEARCH_TOOL_NAME

from orchestrator_svc.messages import DeltaSink, LLMRequest, LLMResult, NativeItem, ToolCall, Usage
from orchestrator_svc.providers.base import Failure, FailureKind, StreamCollector, clean_reason
from orchestrator_svc.providers.openai_provider import OpenAIProvider
from orchestrator_svc.providers.responses_wire import responses_body
from orchestrator_svc.reasoning import split_reasoning

__all__ = ["OpenAIResponsesProvider", "ResponsesStreamError", "input_shape", "responses_usage"]

# Output items that become input items again, and the keys the input form accepts: output-only
# fields (``created_by``, ...) are dropped so the item can be sent back.
_INPUT_FORMS: dict[str, Any] = {
    "message": ResponseOutputMessageParam,
    "reasoning": ResponseReasoningItemParam,
    "function_call": ResponseFunctionToolCallParam,
    "tool_search_call": ToolSearchCall,
    "tool_search_output": ResponseToolSearchOutputItemParamParam,
}
_INPUT_KEYS = {
    kind: frozenset(cls.__required_keys__ | cls.__optional_keys__) for kind, cls in _INPUT_FORMS.items()
}
# Output that the neutral message cannot carry: when present, the whole output is kept.
_KEEP = {"reasoning", "tool_search_call", "tool_search_output"}


class ResponsesStreamError(Exception):
    """A streamed response ended in ``response.failed`` or an ``error`` event."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}" if code else message)
        self.code = code


def input_shape(item: dict[str, Any]) -> dict[str, Any]:
    """An output item as the input item that sends it back (unknown types unchanged)."""
    keys = _INPUT_KEYS.get(str(item.get("type")))
    return item if keys is None else {k: v for k, v in item.items() if k in keys}


def responses_usage(raw: Any) -> Usage:
    if raw is None:
        return Usage()
    details = getattr(raw, "input_tokens_details", None)
    return Usage(
        raw.input_tokens or 0,
        raw.output_tokens or 0,
        getattr(details, "cached_tokens", 0) or 0,
        getattr(details, "cache_write_tokens", 0) or 0,
    )


def _parse_output(output: list[Any]) -> tuple[str, list[str], list[ToolCall], list[NativeItem]]:
    text: list[str] = []
    reasoning: list[str] = []
    calls: list[ToolCall] = []
    keep = False
    for item in output:
        if item.type == "message":
            for part in item.content:
                text.append(part.text if part.type == "output_text" else getattr(part, "refusal", ""))
        elif item.type == "reasoning":
            parts = item.summary or item.content or []
            reasoning += [p.text for p in parts if p.text]
        elif item.type == "function_call":
            calls.append(ToolCall(item.call_id, item.name, item.arguments or ""))
            keep = keep or bool(item.namespace)
        elif item.type == "tool_search_call" and item.execution == "client":
            args = item.arguments if isinstance(item.arguments, dict) else {}
            calls.append(ToolCall(item.call_id or item.id, SEARCH_TOOL_NAME, json.dumps(args)))
        keep = keep or item.type in _KEEP
    native = (
        [
            NativeItem("openai_responses", input_shape(i.model_dump(mode="json", exclude_none=True)))
            for i in output
        ]
        if keep
        else []
    )
    return "".join(text), reasoning, calls, native


def _finish_reason(response: Any) -> str:
    """ "completed", or why the response is incomplete ("max_output_tokens", "content_filter")."""
    details = getattr(response, "incomplete_details", None)
    return str(getattr(details, "reason", None) or getattr(response, "status", None) or "")


class OpenAIResponsesProvider(OpenAIProvider):
    """``provider: openai`` with ``api: responses``."""

    def __init__(self, client: AsyncOpenAI, **kw: Any) -> None:
        super().__init__(client, provider="openai", **kw)

    def _body(self, request: LLMRequest, tools: bool) -> dict[str, Any]:
        return self._wire_params(request, responses_body(request, tools=tools), "responses")

    async def _call_once(
        self, request: LLMRequest, *, tools: bool, stream: DeltaSink | None, time_limit: float
    ) -> LLMResult:
        params = self._body(request, tools)
        if stream is not None:
            return await self._stream_response(params, stream, time_limit)
        response = await self._client.responses.create(**params, timeout=time_limit)
        text, reasoning, calls, native = _parse_output(response.output)
        answer, tagged = split_reasoning(text)
        result = LLMResult(
            answer, "\n".join(r for r in [*reasoning, tagged] if r), calls, responses_usage(response.usage)
        )
        result.native_items = native
        result.finish_reason = _finish_reason(response)
        return result

    async def _stream_response(self, params: dict[str, Any], sink: DeltaSink, time_limit: float) -> LLMResult:
        events = await self._client.responses.create(**params, stream=True, timeout=time_limit)
        reply = StreamCollector(sink)
        final: Any = None
        async with events:
            async for event in events:
                if event.type == "response.output_text.delta":
                    await reply.answer(event.delta)
                elif event.type in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
                    await reply.reasoning(event.delta)
                elif event.type in ("response.completed", "response.incomplete"):
                    final = event.response
                elif event.type == "response.failed":
                    error = event.response.error
                    raise ResponsesStreamError(
                        error.code if error else "", error.message if error else "response failed"
                    )
                elif event.type == "error":
                    raise ResponsesStreamError(event.code or "", event.message)
            streamed = await reply.finish()
        if final is None:
            raise ResponsesStreamError("", "the stream ended without a final response")
        _, _, calls, native = _parse_output(final.output)
        streamed.tool_calls = calls
        streamed.usage = responses_usage(final.usage)
        streamed.native_items = native
        streamed.finish_reason = _finish_reason(final)
        return streamed

    def _classify(self, exc: Exception) -> Failure | None:
        if isinstance(exc, ResponsesStreamError):
            # Failures reported inside a stream: server-side ones are worth a retry.
            kind: FailureKind = "unavailable"
            if exc.code == "rate_limit_exceeded":
                kind = "rate_limited"
            elif exc.code and exc.code != "server_error":
                kind = "bad_request"
            return Failure(kind, clean_reason(str(exc)))
        return super()._classify(exc)
