"""Tool result text for the LLM: casual-mcp's result formats and the size cap."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolscout.client import CallToolResult

from orchestrator_svc.messages import Attachment, ToolCall
from toolscout_kit.config import ResultFormat
from toolscout_kit.json_text import json_object_or_none

__all__ = [
    "cap_text",
    "format_result",
    "outcome_text",
]


def format_result(
    fmt: ResultFormat, call: ToolCall, text: str, arguments: Mapping[str, Any] | None = None
) -> str:
    """``text`` in the chat's result format; ``arguments``: the call's, already parsed (else read
    from the call)."""
    if fmt == "result":
        return text
    if fmt == "function_result":
        return f"{call.name} → {text}"
    args = arguments
    if args is None:
        args = json_object_or_none(call.arguments_json) if call.arguments_json.strip() else {}
    if isinstance(args, Mapping):
        rendered = ", ".join(f"{k}={v!r}" for k, v in args.items())
    else:
        rendered = call.arguments_json
    return f"{call.name}({rendered}) → {text}"


def cap_text(text: str, limit: int) -> str:
    """Cuts text past ``limit`` characters and says so, so the LLM knows the result is partial."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[... truncated: {len(text) - limit} more characters not shown]"


def outcome_text(outcome: CallToolResult) -> tuple[str, list[Attachment]]:
    """(text for the LLM, non-text blocks to attach) of a pool result."""
    texts: list[str] = []
    attachments: list[Attachment] = []
    for block in outcome.content:
        if block.type == "text" or (block.type == "resource" and block.text):
            texts.append(block.text)
        elif block.type == "resource_link":
            texts.append(f"[resource: {block.name or block.uri} <{block.uri}>]")
        else:
            attachments.append(block)
    if not texts and outcome.structured_content_json:
        texts.append(outcome.structured_content_json)
    return "\n".join(texts), attachments
