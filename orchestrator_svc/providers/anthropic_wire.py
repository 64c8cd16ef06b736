"""The Anthropic Messages request body, built from a provider-neutral request (no SDK import).

Append mode sends the loaded tools and plain tool results, as always. Native mode
(``request.deferral == "native"``) sends every tool of the toolset in the order given, deferred
ones with ``"defer_loading": true``; a search's tool result carries ``tool_reference`` blocks for
the tools it loaded after its text; with ``search: provider`` our ``search_tools`` is replaced by
Anthropic's ``tool_search_tool_bm25_20251119`` (its manifest joins the system prompt) and the
``server_tool_use`` / ``tool_search_tool_result`` blocks of earlier answers go back unchanged.

With ``prompt_cache``, breakpoints mark the stable prefix: the last tool that is not deferred
(never a deferred one: the API rejects ``cache_control`` there), the system prompt, the previous
user turn (the end of the prefix the previous call wrote) and the last message (the prefix the
next call of the loop will read). Four in all, the API's maximum.
"""

from __future__ import annotations

import base64
from collections.abc import Collection
from typing import Any

from toolscout.client import SEARCH_TOOL_NAME, Deferral, Tool

from orchestrator_svc.messages import LLMRequest, Message, object_schema
from toolscout_kit.json_text import json_object_or_empty
from toolscout_kit.logging import get_logger

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "PROVIDER_SEARCH_TOOL",
    "SERVER_TOOL_ID_PREFIX",
    "anthropic_body",
    "anthropic_messages",
    "anthropic_tools",
]

_log = get_logger(__name__)

# The Messages API requires max_tokens; used when the model config sets none.
DEFAULT_MAX_TOKENS = 4096
# Anthropic's own BM25 tool search (``search: provider``).
PROVIDER_SEARCH_TOOL: dict[str, Any] = {
    "type": "tool_search_tool_bm25_20251119",
    "name": "tool_search_tool_bm25",
}
# Ids of server tool calls: Anthropic answers them itself, a client never does.
SERVER_TOOL_ID_PREFIX = "srvtoolu_"
_EPHEMERAL: dict[str, Any] = {"type": "ephemeral"}
_IMAGE_TYPES = {"image/jpeg", "image/png", "image/gif", "image/webp"}
# Blocks a client may put cache_control on (thinking and server-tool blocks may not carry it).
_CACHEABLE = {"text", "image", "document", "tool_use", "tool_result", "tool_reference"}


def anthropic_tools(
    tools: list[Tool],
    *,
    native: bool = False,
    deferred: Collection[str] = frozenset(),
    provider_search: bool = False,
) -> list[dict[str, Any]]:
    """Tool definitions in the order given; in native mode the ``deferred`` ones carry
    ``defer_loading`` and, with ``provider_search``, ``search_tools`` becomes Anthropic's own
    search tool."""
    out: list[dict[str, Any]] = []
    for t in tools:
        if native and provider_search and t.llm_name == SEARCH_TOOL_NAME:
            out.append(dict(PROVIDER_SEARCH_TOOL))
            continue
        entry: dict[str, Any] = {
            "name": t.llm_name,
            "description": t.description,
            "input_schema": object_schema(t),
        }
        if native and t.llm_name in deferred:
            entry["defer_loading"] = True
        out.append(entry)
    return out


def _tool_result(m: Message, referable: frozenset[str]) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": m.content or "(empty result)"}]
    for a in m.attachments:
        if a.type == "image" and a.mime_type in _IMAGE_TYPES:
            source = {"type": "base64", "media_type": a.mime_type, "data": base64.b64encode(a.data).decode()}
            content.append({"type": "image", "source": source})
    if not m.is_error:
        # Only deferred tools need loading; an eager one is in the prompt already.
        content += [
            {"type": "tool_reference", "tool_name": n} for n in m.loaded_tools or () if n in referable
        ]
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": content}
    if m.is_error:
        block["is_error"] = True
    return block


def _native_blocks(m: Message) -> list[dict[str, Any]] | None:
    """The assistant's output as Anthropic sent it, when it is recorded and still matches the
    neutral tool calls (the loop may rename duplicate call ids; then the neutral view wins)."""
    blocks = [dict(i.data) for i in m.native_items if i.provider == "anthropic"]
    if not blocks:
        return None
    ids = [b.get("id") for b in blocks if b.get("type") == "tool_use"]
    if ids != [c.id for c in m.tool_calls]:
        return None
    return blocks


def anthropic_messages(
    system: str,
    messages: list[Message],
    *,
    native: bool = False,
    referable: frozenset[str] = frozenset(),
) -> tuple[str, list[dict[str, Any]]]:
    """(system, messages): system messages of the history join the system prompt, tool results
    become user turns, and consecutive turns of one role are merged (the API wants alternation).

    Native mode replays recorded provider blocks of assistant turns verbatim, and search results
    get a ``tool_reference`` block for each tool they loaded that is in ``referable`` (the
    request's deferred tools; empty with Anthropic's own search).
    """
    systems = [system] if system else []
    out: list[dict[str, Any]] = []

    def push(role: str, blocks: list[dict[str, Any]]) -> None:
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for m in messages:
        if m.role == "system":
            systems.append(m.content)
        elif m.role == "user":
            push("user", [{"type": "text", "text": m.content}])
        elif m.role == "tool":
            if m.tool_call_id.startswith(SERVER_TOOL_ID_PREFIX):
                # Anthropic ran that call itself; answering it is a 400.
                _log.warning("server_tool_result_dropped", tool_call_id=m.tool_call_id)
                continue
            push("user", [_tool_result(m, referable if native else frozenset())])
        else:
            replay = _native_blocks(m) if native else None
            if replay is not None:
                push("assistant", replay)
                continue
            blocks: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
            # The history may hold malformed arguments the model produced; the API needs an object.
            blocks += [
                {
                    "type": "tool_use",
                    "id": c.id,
                    "name": c.name,
                    "input": json_object_or_empty(c.arguments_json),
                }
                for c in m.tool_calls
            ]
            push("assistant", blocks or [{"type": "text", "text": "(no content)"}])
    return "\n\n".join(s for s in systems if s), out


def _mark_last_cacheable(message: dict[str, Any]) -> bool:
    for block in reversed(message["content"]):
        if block.get("type") in _CACHEABLE:
            block["cache_control"] = dict(_EPHEMERAL)
            return True
    return False


def _add_breakpoints(tools: list[dict[str, Any]], messages: list[dict[str, Any]]) -> None:
    for tool in reversed(tools):
        if not tool.get("defer_loading"):
            tool["cache_control"] = dict(_EPHEMERAL)
            break
    users = [m for m in messages if m["role"] == "user"]
    # The last message (written for the next call) and the previous user turn (read from the
    # previous call), so the lookback window never has to reach far.
    for m in users[-2:]:
        _mark_last_cacheable(m)


def anthropic_body(request: LLMRequest, *, tools: bool = True) -> dict[str, Any]:
    """The Messages API body for ``request`` (``tools=False``: the retry without tools)."""
    native = request.deferral == Deferral.NATIVE
    provider_search = native and request.search == "provider"
    system = request.system
    if provider_search:
        # Anthropic's search tool has no description to carry our manifest: it joins the system.
        manifest = next((t.description for t in request.tools if t.llm_name == SEARCH_TOOL_NAME), "")
        system = "\n\n".join(p for p in (system, manifest) if p)
    referable = request.deferred if native and not provider_search else frozenset()
    system, messages = anthropic_messages(system, request.messages, native=native, referable=referable)
    body: dict[str, Any] = {
        "model": request.model,
        "messages": messages,
        "max_tokens": request.max_tokens or DEFAULT_MAX_TOKENS,
    }
    tool_list = (
        anthropic_tools(
            request.tools, native=native, deferred=request.deferred, provider_search=provider_search
        )
        if tools and request.tools
        else []
    )
    if request.prompt_cache:
        _add_breakpoints(tool_list, messages)
    if system:
        body["system"] = (
            [{"type": "text", "text": system, "cache_control": dict(_EPHEMERAL)}]
            if request.prompt_cache
            else system
        )
    if tool_list:
        body["tools"] = tool_list
    if request.temperature is not None:
        body["temperature"] = request.temperature
    return body
