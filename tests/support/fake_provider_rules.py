"""The documented request rules the fake provider enforces, as pure functions of request bodies.

Each returns the 400 message the fake answers with, or None when the request obeys the rule.
They follow the providers' documentation of native deferral (Anthropic tool search and prompt
caching; OpenAI Responses tool search with client execution) so that a test fails as soon as our
adapters send what the real APIs would reject.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = [
    "MAX_ANTHROPIC_BREAKPOINTS",
    "MAX_ANTHROPIC_DEFERRED",
    "anthropic_conversation_key",
    "anthropic_request_violation",
    "anthropic_strict_violation",
    "responses_call_violation",
    "responses_deferred_functions",
    "responses_input_violation",
    "responses_loaded_functions",
]

MAX_ANTHROPIC_BREAKPOINTS = 4
MAX_ANTHROPIC_DEFERRED = 10_000
_SERVER_SEARCH_TYPES = (
    "tool_search_tool_bm25_20251119",
    "tool_search_tool_bm25",
    "tool_search_tool_regex_20251119",
)


# --- Anthropic Messages --------------------------------------------------------------------


def _blocks(messages: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for m in messages:
        content = m.get("content")
        if isinstance(content, list):
            yield from (b for b in content if isinstance(b, dict))


def _references(messages: list[dict[str, Any]]) -> Iterator[str]:
    """Every tool name a tool_reference block names: in tool results and in server search results."""
    for b in _blocks(messages):
        if b.get("type") == "tool_result" and isinstance(b.get("content"), list):
            yield from (r["tool_name"] for r in b["content"] if r.get("type") == "tool_reference")
        elif b.get("type") == "tool_search_tool_result":
            content = b.get("content") or {}
            yield from (r["tool_name"] for r in content.get("tool_references") or [])


def _count_breakpoints(value: Any) -> int:
    if isinstance(value, dict):
        own = 1 if value.get("cache_control") else 0
        return own + sum(_count_breakpoints(v) for k, v in value.items() if k != "cache_control")
    if isinstance(value, list):
        return sum(_count_breakpoints(v) for v in value)
    return 0


def _deferral_rules(tools: list[dict[str, Any]]) -> str | None:
    for i, t in enumerate(tools):
        if t.get("defer_loading") and t.get("cache_control"):
            return f"tools.{i}: a tool with defer_loading cannot have cache_control"
    deferred = sum(1 for t in tools if t.get("defer_loading"))
    if tools and deferred == len(tools):
        return "tools: at least one tool must not have defer_loading: true"
    if deferred > MAX_ANTHROPIC_DEFERRED:
        return f"tools: {deferred} deferred tools exceed the limit of {MAX_ANTHROPIC_DEFERRED}"
    return None


def _reference_rules(tools: list[dict[str, Any]], messages: list[dict[str, Any]]) -> str | None:
    names = {t.get("name") for t in tools}
    unknown = next((n for n in _references(messages) if n not in names), None)
    return None if unknown is None else f"tool_reference: tool '{unknown}' is not defined in tools"


def _server_tool_rules(tools: list[dict[str, Any]], messages: list[dict[str, Any]]) -> str | None:
    server_search = any(t.get("type") in _SERVER_SEARCH_TYPES for t in tools)
    for b in _blocks(messages):
        if b.get("type") == "tool_result" and str(b.get("tool_use_id", "")).startswith("srvtoolu_"):
            return f"tool_result: '{b['tool_use_id']}' is a server tool use; the API runs server tools itself"
        if b.get("type") in ("server_tool_use", "tool_search_tool_result") and not server_search:
            return f"messages: a {b['type']} block needs the tool search tool in tools"
    return None


def anthropic_request_violation(body: dict[str, Any]) -> str | None:
    """Rules for one request (any model)."""
    tools: list[dict[str, Any]] = body.get("tools") or []
    messages: list[dict[str, Any]] = body.get("messages") or []
    breakpoints = _count_breakpoints(body)
    if breakpoints > MAX_ANTHROPIC_BREAKPOINTS:
        return f"A maximum of {MAX_ANTHROPIC_BREAKPOINTS} blocks with cache_control may be provided. Found {breakpoints}."
    return _deferral_rules(tools) or _reference_rules(tools, messages) or _server_tool_rules(tools, messages)


def anthropic_conversation_key(body: dict[str, Any]) -> tuple[str, str] | None:
    """(model, text of the first user message): how the fake tells conversations apart."""
    for m in body.get("messages") or []:
        if m.get("role") != "user":
            continue
        content = m.get("content")
        if isinstance(content, str):
            return body.get("model", ""), content
        texts = [b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text"]
        return body.get("model", ""), "".join(texts)
    return None


def _without_breakpoint(tool: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in tool.items() if k != "cache_control"}


def anthropic_strict_violation(
    previous: list[dict[str, Any]], tools: list[dict[str, Any]], messages: list[dict[str, Any]]
) -> str | None:
    """A strict model's rule for a later request of a conversation: ``tools`` is the previous
    request's list unchanged (moving a cache breakpoint is no change), except that tools with
    ``defer_loading: true`` that nothing references yet may be added."""
    before = [_without_breakpoint(t) for t in previous]
    known = {t.get("name") for t in before}
    kept = [_without_breakpoint(t) for t in tools if t.get("name") in known]
    if kept != before:
        return "tools: this model does not allow tools to be removed, edited or reordered mid-conversation"
    referenced = set(_references(messages))
    for t in tools:
        if t.get("name") in known:
            continue
        if not t.get("defer_loading"):
            return f"tools: this model does not allow adding tool '{t.get('name')}' mid-conversation"
        if t.get("name") in referenced:
            return f"tools: tool '{t.get('name')}' was added mid-conversation and is already referenced"
    return None


# --- OpenAI Responses ----------------------------------------------------------------------


def _functions(tools: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], str]]:
    """(function, namespace or "") for every function declared at the top level or in a namespace."""
    for t in tools:
        if t.get("type") == "function":
            yield t, ""
        elif t.get("type") == "namespace":
            yield from ((f, t.get("name", "")) for f in t.get("tools") or [] if f.get("type") == "function")


def responses_deferred_functions(body: dict[str, Any]) -> dict[str, str]:
    """Deferred function name -> its namespace ("" at the top level)."""
    return {f["name"]: ns for f, ns in _functions(body.get("tools") or []) if f.get("defer_loading")}


def _input_items(body: dict[str, Any]) -> list[dict[str, Any]]:
    raw = body.get("input")
    return [i for i in raw if isinstance(i, dict)] if isinstance(raw, list) else []


def responses_loaded_functions(body: dict[str, Any]) -> set[str]:
    """Functions the input's ``tool_search_output`` items returned."""
    return {
        f["name"]
        for item in _input_items(body)
        if item.get("type") == "tool_search_output"
        for f, _ in _functions(item.get("tools") or [])
    }


def _repeated_namespace(items: list[dict[str, Any]]) -> str | None:
    """A namespace shown by a second tool_search_output of the input (OpenAI-compatible upstreams
    refuse it)."""
    shown: set[Any] = set()
    for i, item in enumerate(items):
        if item.get("type") != "tool_search_output":
            continue
        for space in item.get("tools") or []:
            if space.get("type") != "namespace":
                continue
            if space.get("name") in shown:
                return f"input.{i}: Namespace names must be unique: '{space.get('name')}'"
            shown.add(space.get("name"))
    return None


def responses_input_violation(body: dict[str, Any]) -> str | None:
    """Every ``tool_search_output`` answers an open ``tool_search_call``; every call is answered;
    a deferred function appears in a call only after a search returned it; a namespace appears at
    most once across the tool_search_output items."""
    deferred = responses_deferred_functions(body)
    loaded: set[str] = set()
    open_searches: set[str] = set()
    calls: dict[str, str] = {}
    answered: set[str] = set()
    for i, item in enumerate(_input_items(body)):
        kind = item.get("type")
        if kind == "tool_search_call" and item.get("execution", "server") == "client":
            open_searches.add(str(item.get("call_id")))
        elif kind == "tool_search_output" and item.get("execution", "server") == "client":
            call_id = str(item.get("call_id"))
            if call_id not in open_searches:
                return (
                    f"input.{i}: no open tool_search_call found for tool_search_output with call_id {call_id}"
                )
            open_searches.discard(call_id)
            loaded |= {f["name"] for f, _ in _functions(item.get("tools") or [])}

        elif kind == "function_call":
            name = str(item.get("name"))
            if name in deferred and name not in loaded:
                return f"input.{i}: function '{name}' is deferred and no tool_search_output has returned it"
            calls[str(item.get("call_id"))] = name
        elif kind == "function_call_output":
            call_id = str(item.get("call_id"))
            if call_id not in calls:
                return f"input.{i}: no tool call found for function call output with call_id {call_id}"
            answered.add(call_id)
    if open_searches:
        return f"input: no tool_search_output found for tool_search_call {sorted(open_searches)[0]}"
    missing = [c for c in calls if c not in answered]
    if missing:
        return f"input: no tool output found for function call {missing[0]}"
    return _repeated_namespace(_input_items(body))


def responses_call_violation(body: dict[str, Any], names: list[str]) -> str | None:
    """A scripted reply calling a deferred function no search has returned: the real model can
    only call what it has loaded, so such a script is refused."""
    deferred = responses_deferred_functions(body)
    loaded = responses_loaded_functions(body)
    for name in names:
        if name in deferred and name not in loaded:
            return f"function '{name}' is deferred and no tool_search_output has returned it (bad script)"
    return None
