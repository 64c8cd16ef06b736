"""What a chat takes, returns and streams: provider-neutral request, result and event types."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

from orchestrator_svc.messages import Message, ToolCall, Usage
from orchestrator_svc.stats import ChatStats

__all__ = [
    "AssistantMessageEvent",
    "ChatEvent",
    "ChatRequest",
    "ChatResult",
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
    toolset: str = ""
    # An inline toolset (JSON, the shape of a config ``tool_sets`` entry) instead of ``toolset``;
    # discovery validates it.
    toolset_json: str = ""
    meta_json: str = ""
    discovered_tools: list[str] = field(default_factory=list)
    max_iterations: int = 0
    tool_result_format: str = ""


@dataclass(slots=True)
class ChatResult:
    messages: list[Message]
    loaded_tools: list[str]
    stats: ChatStats
    stop_reason: StopReason
    model: str
    error: str = ""
    tools_disabled_fallback: bool = False


@dataclass(frozen=True, slots=True)
class TextDeltaEvent:
    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDeltaEvent:
    text: str


@dataclass(frozen=True, slots=True)
class AssistantMessageEvent:
    message: Message


@dataclass(frozen=True, slots=True)
class ToolCallStartedEvent:
    call: ToolCall
    server: str


@dataclass(frozen=True, slots=True)
class ToolCallFinishedEvent:
    call: ToolCall
    server: str
    duration_seconds: float
    is_error: bool
    result_preview: str


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
