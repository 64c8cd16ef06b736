"""What the orchestrator's spans say: the chat (GenAI's agent invocation) and each LLM call
(GenAI's inference span: model, provider, token usage with cache reads and writes, finish reason).

No prompt text or tool arguments here: :meth:`toolscout_kit.tracing.Tracing.content` adds them only
when ``toolscout.tracing.capture_content`` is on.
"""

from __future__ import annotations

from typing import Any

from orchestrator_svc.chat import ChatRequest
from orchestrator_svc.messages import LLMRequest, LLMResult
from orchestrator_svc.metrics import INLINE_TOOLSET_LABEL
from orchestrator_svc.stats import ChatTally

__all__ = [
    "chat_attributes",
    "chat_result_attributes",
    "llm_attributes",
    "llm_result_attributes",
    "output_messages",
]


def chat_attributes(request: ChatRequest) -> dict[str, Any]:
    """The ``chat`` span's attributes at its start."""
    return {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.request.model": request.model,
        "toolscout.toolset": INLINE_TOOLSET_LABEL if request.toolset.is_inline else request.toolset.name,
    }


def chat_result_attributes(stats: ChatTally, outcome: str) -> dict[str, Any]:
    """The ``chat`` span's attributes at its end (the deferral mode after any fallback)."""
    return {
        "toolscout.chat.outcome": outcome,
        "toolscout.chat.iterations": stats.iterations,
        "toolscout.deferral.mode": stats.discovery.deferral,
    }


def llm_attributes(request: LLMRequest, provider: str) -> dict[str, Any]:
    """An LLM call's span attributes before it is sent (OpenTelemetry's GenAI conventions)."""
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": request.model,
        "toolscout.llm.tools_sent": len(request.tools),
    }
    if request.max_tokens is not None:
        attributes["gen_ai.request.max_tokens"] = request.max_tokens
    if request.temperature is not None:
        attributes["gen_ai.request.temperature"] = request.temperature
    return attributes


def llm_result_attributes(result: LLMResult) -> dict[str, Any]:
    usage = result.usage
    attributes: dict[str, Any] = {
        "gen_ai.usage.input_tokens": usage.input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
        "gen_ai.response.finish_reasons": [result.finish_reason] if result.finish_reason else [],
    }
    # Only what happened: every attribute costs the exporter time on every span.
    if usage.cached_input_tokens:
        attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cached_input_tokens
    if usage.cache_write_tokens:
        attributes["gen_ai.usage.cache_creation.input_tokens"] = usage.cache_write_tokens
    if result.tools_disabled:
        attributes["toolscout.llm.tools_disabled"] = True
    return attributes


def output_messages(result: LLMResult) -> list[dict[str, Any]]:
    """The reply as GenAI's ``gen_ai.output.messages`` (recorded only with content capture)."""
    parts: list[dict[str, Any]] = [{"type": "text", "content": result.text}] if result.text else []
    parts += [
        {"type": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments_json}
        for c in result.tool_calls
    ]
    return [{"role": "assistant", "parts": parts, "finish_reason": result.finish_reason}]
