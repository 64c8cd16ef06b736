"""What a chat takes, returns and streams: provider-neutral request, result and event types."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

from toolscout.client import (
    ChatResult,
    ReasoningDelta,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolsetRef,
)

from orchestrator_svc.messages import Message, Usage
from orchestrator_svc.stats import ChatTally

__all__ = [
    "AssistantMessageEvent",
    "ChatEvent",
    "ChatOutcome",
    "ChatRequest",
    "EventSink",
    "ReasoningDeltaEvent",
    "StopReason",
    "TextDeltaEvent",
    "ToolCallFinishedEvent",
    "ToolCallStartedEvent",
    "ToolsDiscoveredEvent",
    "UsageEvent",
]

StopReason = Literal["completed", "iteration_limit"]


@dataclass(slots=True)
class ChatRequest:
    messages: list[Message]
    model: str
    system: str = ""
    # A configured toolset, or an inline one (discovery validates it); as the caller sent it.
    toolset: ToolsetRef = field(default_factory=ToolsetRef)
    meta_json: str = ""
    discovered_tools: list[str] = field(default_factory=list)
    max_iterations: int = 0
    tool_result_format: str = ""
    # Names the conversation result handles are bound to ("": derived, see loop.conversation_id).
    conversation_id: str = ""
    # Whom the chat runs for (the caller's ``x-toolscout-principal``; "": nobody named): the
    # principal of its tool calls (per_user servers use that user's token) and result handles.
    principal: str = ""

    def __post_init__(self) -> None:
        # A toolset named as callers have it (a name, a mapping) is a ref like any other.
        self.toolset = ToolsetRef.of(self.toolset)


@dataclass(slots=True)
class ChatOutcome:
    """A finished chat in the loop's terms (its own messages, its tally); :meth:`result` is the
    shared :class:`~toolscout.client.ChatResult` the servicer sends."""

    messages: list[Message]
    loaded_tools: list[str]
    stats: ChatTally
    stop_reason: StopReason
    model: str
    error: str = ""
    tools_disabled_fallback: bool = False

    def result(self) -> ChatResult:
        return ChatResult(
            messages=tuple(m.to_chat_message() for m in self.messages),
            loaded_tools=tuple(self.loaded_tools),
            stats=self.stats.stats(),
            stop_reason=self.stop_reason,
            error=self.error,
            tools_disabled_fallback=self.tools_disabled_fallback,
            model=self.model,
        )


# The text and tool-call events hold nothing of the loop's own: they are the client library's
# values, under the loop's names. Events that carry its Message or running Usage are its own.
TextDeltaEvent = TextDelta
ReasoningDeltaEvent = ReasoningDelta
ToolCallStartedEvent = ToolCallStarted
ToolCallFinishedEvent = ToolCallFinished


@dataclass(frozen=True, slots=True)
class AssistantMessageEvent:
    message: Message


@dataclass(frozen=True, slots=True)
class ToolsDiscoveredEvent:
    tools: list[str]


@dataclass(frozen=True, slots=True)
class UsageEvent:
    usage: Usage


ChatEvent = (
    TextDeltaEvent
    | ReasoningDeltaEvent
    | AssistantMessageEvent
    | ToolCallStartedEvent
    | ToolCallFinishedEvent
    | ToolsDiscoveredEvent
    | UsageEvent
)
EventSink = Callable[[ChatEvent], Awaitable[None]]
