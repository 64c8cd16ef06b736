"""The console's chat: one turn through the orchestrator's ``StreamChat``, as server-sent events.

Each ``toolscout.client`` chat event becomes one JSON event for the page's script: text and
reasoning deltas, each tool call as it starts and finishes (``search_tools`` included), tools
discovered, usage after each LLM call, and at the end every tool result as the model read it, the
turn's token figures and its trace. The conversation (history, model, toolset, loaded tools) is
kept in the browser's console session, so the page sends only the new message.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from toolscout.client import (
    AssistantMessage,
    AsyncOrchestratorClient,
    ChatFinished,
    ChatMessage,
    ChatTotals,
    ModelInfo,
    ReasoningDelta,
    TextDelta,
    TokenUsage,
    ToolCallFinished,
    ToolCallStarted,
    ToolscoutClientError,
    ToolsDiscovered,
    UsageUpdate,
)
from toolscout.client.types import ChatEvent, ChatResult

from mcp_gateway_svc.console.data import problem_text
from toolscout_kit.inflight import InFlight
from toolscout_kit.logging import get_logger
from toolscout_kit.status import chat_ended_text
from toolscout_kit.tracing import Tracing

__all__ = ["ChatRunner"]

_log = get_logger(__name__)
# Seconds one console chat turn may take (the orchestrator's own limits apply within).
_TURN_DEADLINE = 300.0
# What the page gets for a turn the gateway's stop ended (ChatRunner.end_turns).
ENDED_AT_STOP = chat_ended_text("gateway").capitalize() + "."


def _sse(payload: dict[str, Any]) -> str:
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"


def _assistant(event: AssistantMessage) -> dict[str, Any]:
    message = event.message
    calls = [{"id": c.id, "name": c.name, "arguments": c.arguments_json} for c in message.tool_calls]
    return {"type": "assistant", "reasoning": message.reasoning, "calls": calls}


def _started(event: ToolCallStarted) -> dict[str, Any]:
    call = event.call
    return {
        "type": "call_started",
        "id": call.id,
        "name": call.name,
        "server": event.server,
        "arguments": call.arguments_json,
    }


def _call_finished(event: ToolCallFinished) -> dict[str, Any]:
    return {
        "type": "call_finished",
        "id": event.call.id,
        "name": event.call.name,
        "is_error": event.is_error,
        "seconds": round(event.duration_seconds, 3),
        "preview": event.result_preview,
    }


def _usage(usage: TokenUsage) -> dict[str, Any]:
    return {
        "input": usage.input_tokens,
        "output": usage.output_tokens,
        "cached": usage.cached_input_tokens,
        "cache_write": usage.cache_write_input_tokens,
    }


# What the page gets for each chat event (ChatFinished is answered apart: it ends the turn).
_EVENTS: dict[type[Any], Callable[[Any], dict[str, Any]]] = {
    TextDelta: lambda e: {"type": "text", "text": e.text},
    ReasoningDelta: lambda e: {"type": "reasoning", "text": e.text},
    AssistantMessage: _assistant,
    ToolCallStarted: _started,
    ToolCallFinished: _call_finished,
    ToolsDiscovered: lambda e: {"type": "discovered", "tools": list(e.tools)},
    UsageUpdate: lambda e: {"type": "usage", **_usage(e.usage)},
}


def _event(event: ChatEvent) -> dict[str, Any] | None:
    convert = _EVENTS.get(type(event))
    return convert(event) if convert is not None else None


def _finished(result: ChatResult) -> dict[str, Any]:
    stats = result.stats
    return {
        "type": "finished",
        "stop_reason": result.stop_reason,
        "error": result.error,
        "answer": result.text,
        # Every tool result as the model read it, by call id.
        "results": {m.tool_call_id: m.content for m in result.messages if m.role == "tool"},
        "loaded_tools": list(result.loaded_tools),
        "llm_calls": stats.llm_calls,
        "usage": _usage(stats.usage),
        "definitions": {
            "sent": stats.discovery.definition_tokens_sent,
            "all": stats.discovery.definition_tokens_all,
            "saved": stats.discovery.tokens_saved,
            "encoding": stats.discovery.encoding,
            "deferral": stats.discovery.deferral,
        },
    }


class ChatRunner:
    """Runs console chat turns through the orchestrator client (None: chat is not offered)."""

    def __init__(
        self, orchestrator: AsyncOrchestratorClient | None, tracing: Tracing, trace_url: str
    ) -> None:
        self._orchestrator = orchestrator
        self._tracing = tracing
        self._trace_url = trace_url
        self.savings = ChatTotals()
        # The turns running; the gateway's stop ends those still running at the end of its grace.
        self._turns = InFlight()
        self.idle = self._turns.idle

    def end_turns(self) -> int:
        """Ends every turn still running (its orchestrator call is cancelled, and the page is
        told the turn was cut short); returns how many."""
        return self._turns.end_all()

    @property
    def available(self) -> bool:
        return self._orchestrator is not None

    async def models(self) -> tuple[ModelInfo, ...]:
        assert self._orchestrator is not None
        return await self._orchestrator.list_models(deadline=5.0)

    async def turn(
        self, state: dict[str, Any], *, message: str, model: str, toolset: str
    ) -> AsyncIterator[str]:
        """The events of one turn of the conversation in ``state`` (a new one for another
        model or toolset), as server-sent event lines; ``state`` holds the turn once it finished."""
        assert self._orchestrator is not None
        if state.get("model") != model or state.get("toolset") != toolset:
            state.clear()
            state.update(model=model, toolset=toolset, history=[], loaded=[], turns=[])
        user = ChatMessage.user(message)
        history: list[ChatMessage] = state["history"]
        span = self._tracing.start("console chat", attributes={"toolscout.model": model})
        trace_id = format(span.get_span_context().trace_id, "032x") if self._tracing.enabled else ""
        yield _sse({"type": "started", "trace_id": trace_id, "trace_url": self._link(trace_id)})
        try:
            context = span.get_span_context()
            # The orchestrator's spans join this turn's trace.
            metadata = (
                [("traceparent", f"00-{trace_id}-{context.span_id:016x}-{int(context.trace_flags):02x}")]
                if trace_id
                else None
            )
            stream = self._orchestrator.stream_chat(
                [*history, user],
                model=model,
                toolset=toolset,
                discovered_tools=state["loaded"],
                deadline=_TURN_DEADLINE,
                metadata=metadata,
            )
            with self._turns.track() as turn:
                async for event in stream:
                    if isinstance(event, ChatFinished):
                        result = event.result
                        history.extend([user, *result.messages])
                        state["loaded"] = list(result.loaded_tools)
                        state["turns"].append({"user": message, "answer": result.text})
                        self.savings.add(result.stats)
                        yield _sse(_finished(result))
                        continue
                    payload = _event(event)
                    if payload is not None:
                        yield _sse(payload)
            if turn.ended:
                yield _sse({"type": "error", "message": ENDED_AT_STOP})
        except ToolscoutClientError as err:
            _log.info("console chat failed", error=type(err).__name__)
            yield _sse({"type": "error", "message": problem_text(err)})
        finally:
            span.end()

    def _link(self, trace_id: str) -> str:
        return self._trace_url.replace("{trace_id}", trace_id) if trace_id and self._trace_url else ""
