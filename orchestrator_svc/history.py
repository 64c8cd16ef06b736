"""Rebuilds the tools discovered earlier in a conversation from the history the caller sends.

No server-side state: a conversation's discovered tools are the union of what the caller says it
has (``discovered_tools``, from a previous response) and what the history shows — deferred tools
the assistant called, the tools earlier successful ``search_tools`` calls loaded, and the tools
a provider's own search referenced (:func:`search_result_references`, the one reader of Anthropic
``tool_references``). The
orchestrator records the latter on each search result (``Message.loaded_tools``); searches in a
history from another client, which lacks the record, are replayed against discovery. casual-mcp
forgets discovered tools every turn, so the model would have to search again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from toolscout.client import CALL_TOOL_NAME, READ_RESULT_NAME, SEARCH_TOOL_NAME

from orchestrator_svc.messages import Message, ToolCall
from toolscout_kit.call_tool import CallTarget, read_call

__all__ = [
    "discovery_candidates",
    "history_loaded_tools",
    "recorded_searches",
    "result_handles",
    "search_result_references",
]


def recorded_searches(messages: Sequence[Message]) -> tuple[dict[str, list[str]], list[ToolCall]]:
    """The history's successful search_tools calls: what each loaded, by call id, where its result
    recorded it; and, in order, those whose result did not (to be replayed)."""
    results = {m.tool_call_id: m for m in messages if m.role == "tool"}
    recorded: dict[str, list[str]] = {}
    unrecorded: list[ToolCall] = []
    for m in messages:
        if m.role != "assistant":
            continue
        for call in m.tool_calls:
            result = results.get(call.id)
            if call.name != SEARCH_TOOL_NAME or result is None or result.is_error:
                continue
            if result.loaded_tools is not None:
                recorded[call.id] = list(result.loaded_tools)
            else:
                unrecorded.append(call)
    return recorded, unrecorded


def discovery_candidates(
    messages: Sequence[Message],
    explicit: Sequence[str],
    found_by_search: Mapping[str, Sequence[str]] | None = None,
) -> list[str]:
    """Tools this conversation may already have loaded, in first-seen order.

    ``explicit`` (the caller's ``discovered_tools``) comes first so a client echoing the previous
    ``loaded_tools`` keeps the exact tool order, and with it the provider's prompt cache. Then, in
    history order, tools the assistant called (through ``call_tool`` too) and the tools each earlier search loaded
    (``found_by_search``: call id → names; a search's result text is never parsed, since it also
    names tools it did *not* load, e.g. closest matches). Discovery keeps the deferred ones of
    these (``ToolPlan.discovered``); eager tools and names no longer in the catalog fall away there.
    """
    found: dict[str, None] = {}
    by_search = found_by_search or {}
    for name in explicit:
        found.setdefault(name, None)
    results = {m.tool_call_id: m for m in messages if m.role == "tool" and m.tool_call_id}
    for m in messages:
        if m.role != "assistant":
            continue
        for call in m.tool_calls:
            if call.name == SEARCH_TOOL_NAME:
                for name in by_search.get(call.id, ()):
                    found.setdefault(name, None)
                continue
            if call.name == READ_RESULT_NAME:
                continue  # the orchestrator's own tool, never a catalog tool to load
            result = results.get(call.id)
            # A call we refused as "not yet loaded" does not mean the tool was ever loaded.
            if result is None or not result.not_loaded:
                found.setdefault(_called_tool(call), None)
    return list(found)


def _called_tool(call: ToolCall) -> str:
    """The tool a call ran: the one a ``call_tool`` call names (stable deferral; read as the
    contract reads it, :func:`toolscout_kit.call_tool.read_call`), else its own name."""
    if call.name != CALL_TOOL_NAME:
        return call.name
    target = read_call(call.arguments_json)
    # A refused call_tool call still names the tool the model meant, when it named one.
    return target.name if isinstance(target, CallTarget) else (target.tool or call.name)


def search_result_references(block: Mapping[str, Any]) -> list[str]:
    """The tools an Anthropic server-side search result block (``tool_search_tool_result``) loaded:
    the ``tool_name`` of each of its ``tool_references``; [] for any other block."""
    if block.get("type") != "tool_search_tool_result":
        return []
    content = block.get("content")
    refs = content.get("tool_references") if isinstance(content, dict) else None
    return [r["tool_name"] for r in refs or [] if isinstance(r, dict) and "tool_name" in r]


def history_loaded_tools(messages: Sequence[Message]) -> list[str]:
    """Every tool the history's searches loaded, in order: ``loaded_tools`` of tool messages and
    the references of Anthropic server-side search results (``search: provider``). The loop
    rebuilds a conversation's loaded set from these; native requests must declare them all."""
    names: list[str] = []
    for m in messages:
        names += m.loaded_tools or []
        for item in m.native_items:
            if item.provider == "anthropic":
                names += search_result_references(item.data)
    return names


def result_handles(messages: Sequence[Message]) -> dict[str, float]:
    """The result handles the conversation was given, each with its expiry (Unix seconds), from
    the tool results the orchestrator marked (``result_handle``). read_result reads only these,
    and is offered while one of them has not expired."""
    return {m.result_handle: m.handle_expires_unix for m in messages if m.role == "tool" and m.result_handle}
