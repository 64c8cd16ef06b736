"""Rebuilds the tools discovered earlier in a conversation from the history the caller sends.

No server-side state: a conversation's discovered tools are the union of what the caller says it
has (``discovered_tools``, from a previous response) and what the history shows — deferred tools
the assistant called, and the tools earlier successful ``search_tools`` calls loaded (replayed
against discovery). casual-mcp forgets them every turn, so the model would have to search again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from toolscout.client import SEARCH_TOOL_NAME

from orchestrator_svc.messages import Message, ToolCall

__all__ = ["SEARCH_TOOL_NAME", "not_loaded_error", "rebuild_discovered", "successful_searches"]


def not_loaded_error(name: str) -> str:
    """The PRD's exact text for a deferred tool called before search_tools loaded it."""
    return (
        f"Error: Tool '{name}' is not yet loaded. "
        "Use the 'search_tools' tool to discover and load it first, then call it again."
    )


def successful_searches(messages: Sequence[Message]) -> list[ToolCall]:
    """The history's search_tools calls whose result was not an error, in order."""
    failed = {m.tool_call_id for m in messages if m.role == "tool" and m.is_error}
    answered = {m.tool_call_id for m in messages if m.role == "tool"}
    return [
        c
        for m in messages
        if m.role == "assistant"
        for c in m.tool_calls
        if c.name == SEARCH_TOOL_NAME and c.id in answered and c.id not in failed
    ]


def rebuild_discovered(
    messages: Sequence[Message],
    explicit: Sequence[str],
    deferred: frozenset[str],
    found_by_search: Mapping[str, Sequence[str]] | None = None,
) -> list[str]:
    """Deferred tools this conversation already loaded, in first-seen order.

    ``explicit`` (the caller's ``discovered_tools``) comes first so a client echoing the previous
    ``loaded_tools`` keeps the exact tool order, and with it the provider's prompt cache. Then, in
    history order, deferred tools the assistant called and the tools each earlier search loaded
    (``found_by_search``: call id → names, from replaying the search; its result text is not
    parsed because it also names tools it did *not* load, e.g. closest matches).
    """
    found: dict[str, None] = {}
    by_search = found_by_search or {}

    def add(name: str) -> None:
        if name in deferred:
            found.setdefault(name, None)

    for name in explicit:
        add(name)
    results = {m.tool_call_id: m for m in messages if m.role == "tool" and m.tool_call_id}
    for m in messages:
        if m.role != "assistant":
            continue
        for call in m.tool_calls:
            if call.name == SEARCH_TOOL_NAME:
                for name in by_search.get(call.id, ()):
                    add(name)
                continue
            result = results.get(call.id)
            # A call we rejected as "not yet loaded" does not mean the tool was ever loaded.
            if result is None or result.content != not_loaded_error(call.name):
                add(call.name)
    return list(found)
