"""Provider-neutral chat types shared by the loop, the providers and the servicer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "Attachment",
    "DeltaSink",
    "LLMRequest",
    "LLMResult",
    "Message",
    "Role",
    "ToolCall",
    "ToolDef",
    "Usage",
]

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True, slots=True)
class Attachment:
    """A non-text content block of a tool result (mirrors common.v1.ContentBlock)."""

    type: str
    text: str = ""
    data: bytes = b""
    mime_type: str = ""
    uri: str = ""
    name: str = ""
    raw_json: str = ""


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    # As the model produced it: possibly malformed, so it is never parsed here.
    arguments_json: str


@dataclass(slots=True)
class Message:
    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str = ""
    name: str = ""
    reasoning: str = ""
    attachments: list[Attachment] = field(default_factory=list)
    is_error: bool = False
    # On the result of a search_tools call: the tools that search loaded (None: not recorded, e.g.
    # a history from another client).
    loaded_tools: list[str] | None = None


@dataclass(frozen=True, slots=True)
class ToolDef:
    """A tool definition as sent to the LLM (server/name kept for stats and events)."""

    llm_name: str
    description: str
    input_schema: dict[str, Any]
    server: str = ""
    name: str = ""


@dataclass(slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cached_input_tokens += other.cached_input_tokens


@dataclass(slots=True)
class LLMRequest:
    model: str
    system: str
    messages: list[Message]
    tools: list[ToolDef]
    max_tokens: int | None = None
    temperature: float | None = None
    # Seconds left for this call (the chat's deadline), or None.
    timeout: float | None = None
    # The model accepts images (ModelConfig.vision).
    vision: bool = False


@dataclass(slots=True)
class LLMResult:
    text: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    # True when the provider rejected tool calling and this call was retried without tools.
    tools_disabled: bool = False


# Receives streamed pieces: kind is "text" or "reasoning".
DeltaSink = Callable[[Literal["text", "reasoning"], str], Awaitable[None]]
