"""The OpenAI Responses API request body, built from a provider-neutral request (no SDK import).

Append mode is Chat Completions in Responses clothing: loaded tools are flat functions and
``search_tools`` is one of them. Native mode (``request.deferral == Deferral.NATIVE``, gpt-5.4 and later)
follows OpenAI's tool search guide:

* ``search_tools`` becomes ``{"type": "tool_search", "execution": "client"}`` with our description
  (the manifest) and parameters, so the model's searches come back as ``tool_search_call`` items;
* deferred tools are grouped in one ``namespace`` per MCP server, each function with
  ``"defer_loading": true`` and its LLM-facing name (unique, so calls map back without the
  namespace); namespaces sit where their first tool is, so ``tools`` keeps the request's order;
* the loop answers a search like a ``search_tools`` call; its tool message becomes a
  ``tool_search_output`` listing the loaded tools, grouped in the same namespaces. A namespace
  appears at most once across the ``tool_search_output`` items of a request (OpenAI-compatible
  upstreams refuse repeats: "Namespace names must be unique"), so a later search's functions of a
  namespace loaded before come as plain functions; calls of those carry no namespace. The output has
  no text, so a search that loads nothing (no match, only tools loaded before, an error) is followed
  by a developer message with its result text: the model learns that it found nothing, and why;
* a deferred function called in a history that never loaded it (a conversation that started in
  append mode) is loaded first by a replayed ``tool_search_call`` / ``tool_search_output`` pair
  asking for it by name, because the API refuses calls of deferred functions no search returned.

Assistant turns recorded as native items (reasoning, ``tool_search_call`` and namespaced calls)
are sent back verbatim; ``prompt_cache_key`` is the request's ``cache_key``.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Collection
from typing import Any

from toolscout.client import SEARCH_TOOL_NAME, Deferral, Tool

from orchestrator_svc.messages import LLMRequest, Message, object_schema
from orchestrator_svc.providers.tool_results import shown_as_image, tool_result_text
from toolscout_kit.json_text import json_object_or_empty

__all__ = ["namespace_names", "responses_body", "responses_input", "responses_tools"]

_NAME_BAD = re.compile(r"[^A-Za-z0-9_-]")
_NAME_MAX = 64


def _function(t: Tool, *, deferred: bool = False) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "type": "function",
        "name": t.llm_name,
        "description": t.description,
        "parameters": object_schema(t),
    }
    if deferred:
        entry["defer_loading"] = True
    return entry


def namespace_names(tools: list[Tool], deferred: Collection[str]) -> dict[str, str]:
    """Server -> namespace name (``^[A-Za-z0-9_-]{1,64}$``, unique), in order of first deferred tool."""
    names: dict[str, str] = {}
    taken: set[str] = set()
    for t in tools:
        if t.llm_name not in deferred or t.server in names:
            continue
        base = _NAME_BAD.sub("_", t.server)[:_NAME_MAX] or "tools"
        name, n = base, 2
        while name in taken:
            suffix = f"_{n}"
            name, n = base[: _NAME_MAX - len(suffix)] + suffix, n + 1
        names[t.server] = name
        taken.add(name)
    return names


def _namespace(
    server: str, name: str, functions: list[dict[str, Any]], request: LLMRequest
) -> dict[str, Any]:
    description = request.namespace_descriptions.get(server) or f"Tools of the MCP server '{server or name}'."
    return {"type": "namespace", "name": name, "description": description, "tools": functions}


def responses_tools(request: LLMRequest) -> list[dict[str, Any]]:
    """The ``tools`` array: flat functions in append mode; in native mode loaded tools, the
    client-executed ``tool_search`` and one namespace of deferred functions per server."""
    if request.deferral != Deferral.NATIVE:
        return [_function(t) for t in request.tools]
    names = namespace_names(request.tools, request.deferred)
    out: list[dict[str, Any]] = []
    spaces: dict[str, dict[str, Any]] = {}
    for t in request.tools:
        if t.llm_name == SEARCH_TOOL_NAME:
            out.append(
                {
                    "type": "tool_search",
                    "execution": "client",
                    "description": t.description,
                    "parameters": object_schema(t),
                }
            )
        elif t.llm_name not in request.deferred:
            out.append(_function(t))
        elif t.server in spaces:
            spaces[t.server]["tools"].append(_function(t, deferred=True))
        else:
            spaces[t.server] = _namespace(t.server, names[t.server], [_function(t, deferred=True)], request)
            out.append(spaces[t.server])
    return out


def _search_output(
    call_id: str,
    names: list[str],
    deferred: dict[str, Tool],
    spaces: dict[str, str],
    request: LLMRequest,
    shown: set[str],
) -> dict[str, Any]:
    """A ``tool_search_output`` loading ``names`` (deferred ones only), grouped by namespace in
    the order found; functions of a namespace in ``shown`` (an earlier output of the request has
    it) come as plain functions. Adds the namespaces it shows to ``shown``."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    plain: list[dict[str, Any]] = []
    for name in dict.fromkeys(names):
        t = deferred.get(name)
        if t is None:
            continue
        if spaces[t.server] in shown:
            plain.append(_function(t, deferred=True))
        else:
            grouped.setdefault(t.server, []).append(_function(t, deferred=True))
    tools = [_namespace(server, spaces[server], functions, request) for server, functions in grouped.items()]
    shown.update(spaces[server] for server in grouped)
    return {"type": "tool_search_output", "call_id": call_id, "execution": "client", "tools": tools + plain}


def _function_output(m: Message, vision: bool) -> dict[str, Any]:
    images = [a for a in m.attachments if shown_as_image(a, vision)]
    output: str | list[dict[str, Any]]
    if images:
        output = [{"type": "input_text", "text": tool_result_text(m, vision, images_follow="follows")}]
        output += [
            {
                "type": "input_image",
                "image_url": f"data:{a.mime_type or 'image/png'};base64,{base64.b64encode(a.data).decode()}",
            }
            for a in images
        ]
    else:
        output = tool_result_text(m, vision)
    return {"type": "function_call_output", "call_id": m.tool_call_id, "output": output}


def _native_items(m: Message) -> list[dict[str, Any]] | None:
    """The assistant's recorded output, when it still matches the neutral tool calls."""
    items = [dict(i.data) for i in m.native_items if i.provider == "openai_responses"]
    if not items:
        return None
    ids = [
        i.get("call_id")
        for i in items
        if i.get("type") == "function_call"
        or (i.get("type") == "tool_search_call" and i.get("execution") == "client")
    ]
    return items if ids == [c.id for c in m.tool_calls] else None


class _InputBuilder:
    """Turns the history into input items, tracking which deferred tools searches loaded."""

    def __init__(self, request: LLMRequest) -> None:
        self.request = request
        self.native = request.deferral == Deferral.NATIVE
        self.deferred = (
            {t.llm_name: t for t in request.tools if t.llm_name in request.deferred} if self.native else {}
        )
        self.spaces = namespace_names(request.tools, request.deferred) if self.native else {}
        self.loaded: set[str] = set()
        # Namespaces an earlier tool_search_output showed, and functions loaded without theirs.
        self.shown: set[str] = set()
        self.plain: set[str] = set()
        self.search_ids: set[str] = set()
        self.instructions: list[str] = [request.system] if request.system else []
        self.items: list[dict[str, Any]] = []

    def add(self, m: Message) -> None:
        if m.role == "system":
            self.instructions.append(m.content)
        elif m.role == "user":
            self.items.append({"role": "user", "content": m.content})
        elif m.role == "tool":
            if m.tool_call_id in self.search_ids:
                names = [] if m.is_error else (m.loaded_tools or [])
                output = _search_output(
                    m.tool_call_id, names, self.deferred, self.spaces, self.request, self.shown
                )
                self.items.append(output)
                self.loaded.update(n for n in names if n in self.deferred)
                self.plain.update(f["name"] for f in output["tools"] if f["type"] == "function")
                if not output["tools"]:
                    self.items.append({"role": "developer", "content": f"{SEARCH_TOOL_NAME}: {m.content}"})
            else:
                self.items.append(_function_output(m, self.request.vision))
        else:
            self._assistant(m)

    def _assistant(self, m: Message) -> None:
        replay = _native_items(m) if self.native else None
        if replay is not None:
            self.items += replay
            self.search_ids.update(
                str(i["call_id"]) for i in replay if i.get("type") == "tool_search_call" and i.get("call_id")
            )
            return
        if m.content:
            self.items.append({"role": "assistant", "content": m.content})
        for c in m.tool_calls:
            if self.native and c.name == SEARCH_TOOL_NAME:
                self.items.append(
                    {
                        "type": "tool_search_call",
                        "call_id": c.id,
                        "execution": "client",
                        "arguments": json_object_or_empty(c.arguments_json),
                    }
                )
                self.search_ids.add(c.id)
                continue
            item: dict[str, Any] = {
                "type": "function_call",
                "call_id": c.id,
                "name": c.name,
                "arguments": c.arguments_json,
            }
            t = self.deferred.get(c.name)
            if t is not None:
                if c.name not in self.loaded:
                    self._load_first(c.id, c.name)
                if c.name not in self.plain:
                    item["namespace"] = self.spaces[t.server]
            self.items.append(item)

    def _load_first(self, call_id: str, name: str) -> None:
        search_id = f"{call_id}_load"
        self.items.append(
            {
                "type": "tool_search_call",
                "call_id": search_id,
                "execution": "client",
                "arguments": {"tool_names": [name]},
            }
        )
        output = _search_output(search_id, [name], self.deferred, self.spaces, self.request, self.shown)
        self.items.append(output)
        self.loaded.add(name)
        self.plain.update(f["name"] for f in output["tools"] if f["type"] == "function")


def responses_input(request: LLMRequest) -> tuple[str, list[dict[str, Any]]]:
    """(instructions, input items): system messages of the history join the instructions."""
    builder = _InputBuilder(request)
    for m in request.messages:
        builder.add(m)
    return "\n\n".join(s for s in builder.instructions if s), builder.items


def responses_body(request: LLMRequest, *, tools: bool = True) -> dict[str, Any]:
    """The ``responses.create`` body for ``request`` (``tools=False``: the retry without tools)."""
    instructions, items = responses_input(request)
    body: dict[str, Any] = {"model": request.model, "input": items}
    if instructions:
        body["instructions"] = instructions
    if tools and request.tools:
        body["tools"] = responses_tools(request)
    if request.max_tokens is not None:
        body["max_output_tokens"] = request.max_tokens
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.cache_key:
        body["prompt_cache_key"] = request.cache_key
    return body
