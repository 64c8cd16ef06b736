"""Provider-neutral chat types shared by the loop, the providers and the servicer.

Tool definitions, tool calls and content blocks are the client library's values
(``toolscout.client``: :class:`Tool`, :class:`ToolCall`, :class:`ContentBlock`), as discovery and
the pool return them. :class:`Message` is the orchestrator's own: a chat message that holds its
provider-native items parsed (:meth:`Message.of` / :meth:`Message.to_chat_message` convert it to
and from the wire's :class:`~toolscout.client.ChatMessage`).

Deferral modes (see :mod:`orchestrator_svc.providers.deferral`) add three things here:

* ``LLMRequest.deferred``: in *native* mode every tool of the toolset is sent on every request and
  the deferred ones (named there) are sent with ``defer_loading: true``;
* ``Message.loaded_tools``: on the tool message answering a search, the names of the tools that
  search loaded (Anthropic: ``tool_reference`` blocks; OpenAI Responses: the ``tool_search_output``);
* ``Message.native_items``: provider-native history (Anthropic server-tool blocks, Responses
  output items) kept verbatim so the next request of the conversation can send it back unchanged.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, cast, get_args

from toolscout.client import ChatMessage, ContentBlock, Deferral, Tool, ToolCall

from toolscout_kit.json_text import JsonTextError, json_object_or_none, parse_json

__all__ = [
    "Attachment",
    "DeltaSink",
    "LLMRequest",
    "LLMResult",
    "Message",
    "NativeItem",
    "NativeProvider",
    "Role",
    "SearchMode",
    "ToolCall",
    "Usage",
    "object_schema",
    "tool_schema",
]

Role = Literal["system", "user", "assistant", "tool"]
# Who answers searches in native mode: our ``search_tools`` or the provider's own tool search.
SearchMode = Literal["ours", "provider"]
# The wire format a NativeItem belongs to.
NativeProvider = Literal["anthropic", "openai_responses"]


# A non-text content block of a tool result: the client library's type, as the pool returns it.
Attachment = ContentBlock


@dataclass(frozen=True, slots=True)
class NativeItem:
    """One provider-native history item, kept as the provider's wire JSON.

    On an assistant message, ``native_items`` is the *whole* ordered output of that LLM call in
    ``provider``'s wire format (Anthropic content blocks, Responses output items), recorded when
    the output holds something the neutral fields cannot express (``server_tool_use`` /
    ``tool_search_tool_result`` blocks, reasoning items, ``tool_search_call`` items). The adapter
    of the same provider sends it back verbatim; any other adapter uses the neutral fields.
    Over gRPC each item travels as the string :meth:`to_json` returns.
    """

    provider: NativeProvider
    data: dict[str, Any]

    @property
    def type(self) -> str:
        """The item's wire ``type`` (``server_tool_use``, ``reasoning``, ``tool_search_call``, ...)."""
        return str(self.data.get("type", ""))

    def to_json(self) -> str:
        return json.dumps({"provider": self.provider, "item": self.data}, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> NativeItem:
        """Parses :meth:`to_json` output.

        Raises:
            ValueError: not such an object (bad JSON, unknown provider, item not an object).
        """
        try:
            value = parse_json(text, "native item")
        except JsonTextError as err:
            raise ValueError(err.message) from None
        if not isinstance(value, dict):
            raise ValueError("native item must be a JSON object")
        provider, item = value.get("provider"), value.get("item")
        if provider not in get_args(NativeProvider):
            raise ValueError(f"native item: unknown provider {provider!r}")
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            raise ValueError("native item: 'item' must be an object with a string 'type'")
        return cls(cast(NativeProvider, provider), item)


# The fields a Message and the wire's ChatMessage hold the same way.
_SAME_FIELDS = (
    "role",
    "content",
    "tool_call_id",
    "name",
    "reasoning",
    "is_error",
    "not_loaded",
    "result_handle",
    "handle_expires_unix",
)


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
    # On the result of a search_tools call: the LLM-facing names of the tools that search loaded,
    # in order (None: not recorded, e.g. a history from another client). In native mode they
    # become tool_reference blocks / a tool_search_output.
    loaded_tools: list[str] | None = None
    # Assistant message: the provider's whole output, verbatim (see NativeItem).
    native_items: list[NativeItem] = field(default_factory=list)
    # On a tool result: the call named a deferred tool no search had loaded yet, and was refused
    # before anything ran (the history rebuild does not count such a tool as loaded).
    not_loaded: bool = False
    # On a tool result that is a preview of a result over its budget: the handle the pool keeps
    # the whole under, and when it expires (Unix seconds); read_result reads it.
    result_handle: str = ""
    handle_expires_unix: float = 0.0

    @classmethod
    def of(cls, m: ChatMessage) -> Message:
        """``m`` with its native items parsed.

        Raises:
            ValueError: a native item is not one (the message says which, for the caller).
        """
        native: list[NativeItem] = []
        for n, text in enumerate(m.native_items_json):
            try:
                native.append(NativeItem.from_json(text))
            except ValueError as err:
                raise ValueError(f"native_items_json[{n}]: {err}") from None
        return cls(
            **{f: getattr(m, f) for f in _SAME_FIELDS},
            tool_calls=list(m.tool_calls),
            attachments=list(m.attachments),
            loaded_tools=None if m.loaded_tools is None else list(m.loaded_tools),
            native_items=native,
        )

    def to_chat_message(self) -> ChatMessage:
        return ChatMessage(
            **{f: getattr(self, f) for f in _SAME_FIELDS},
            tool_calls=tuple(self.tool_calls),
            attachments=tuple(self.attachments),
            loaded_tools=None if self.loaded_tools is None else tuple(self.loaded_tools),
            native_items_json=tuple(i.to_json() for i in self.native_items),
        )


_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


@functools.lru_cache(maxsize=8192)
def tool_schema(tool: Tool) -> dict[str, Any]:
    """The input schema of ``tool`` as the providers send it, parsed once per definition: the same
    definitions go out on every LLM call of a chat and of every chat. Shared: never change it."""
    return json_object_or_none(tool.input_schema_json) or _EMPTY_SCHEMA


def object_schema(tool: Tool) -> dict[str, Any]:
    """:func:`tool_schema` where an API takes only object schemas (an empty object otherwise)."""
    schema = tool_schema(tool)
    return schema if schema.get("type") == "object" else _EMPTY_SCHEMA


@dataclass(slots=True)
class Usage:
    """Provider-reported tokens of one or more LLM calls.

    ``input_tokens`` is every input token of the call, whatever the cache did with it (Anthropic
    reports uncached, cache-read and cache-written tokens apart; they are added up here).
    ``cached_input_tokens`` are the input tokens read from the prompt cache, and
    ``cache_write_tokens`` those written to it (billed above the base price by Anthropic).
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cached_input_tokens += other.cached_input_tokens
        self.cache_write_tokens += other.cache_write_tokens


@dataclass(slots=True)
class LLMRequest:
    model: str
    system: str
    messages: list[Message]
    tools: list[Tool]
    max_tokens: int | None = None
    temperature: float | None = None
    # Seconds left for this call (the chat's deadline), or None.
    timeout: float | None = None
    # The model accepts images (ModelConfig.vision).
    vision: bool = False
    # "native": every tool of the toolset is in ``tools`` (those in ``deferred`` withheld from the
    # model's context until a search loads them) and searches are answered natively; "append":
    # ``tools`` holds only loaded tools (see providers/deferral.py); "stable": ``tools`` is eager
    # tools + search_tools + call_tool, sent as plainly as in append mode.
    deferral: Deferral = Deferral.APPEND
    # Native mode: the LLM names of the tools of ``tools`` declared deferred (``defer_loading``).
    deferred: frozenset[str] = frozenset()
    # Native mode only: "provider" declares the provider's own tool search instead of ours.
    search: SearchMode = "ours"
    # Put prompt-cache breakpoints on the stable prefix (providers with explicit caching).
    prompt_cache: bool = False
    # Identifies the conversation for the provider's cache routing (OpenAI ``prompt_cache_key``);
    # empty: not sent. Never a secret or a user id.
    cache_key: str = ""
    # Native mode, Responses API: the description of each server's namespace (server -> text);
    # servers missing here get a generic one.
    namespace_descriptions: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class LLMResult:
    text: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    # True when the provider rejected tool calling and this call was retried without tools.
    tools_disabled: bool = False
    # Tools the provider's own tool search loaded during this call (``search: provider``): the
    # model may call them from now on, like tools our search loaded.
    loaded_tools: list[str] = field(default_factory=list)
    # The provider's whole output when it must be sent back verbatim (see NativeItem); the loop
    # copies it to the assistant Message.
    native_items: list[NativeItem] = field(default_factory=list)
    # Why the model stopped, in the provider's words ("stop", "tool_calls", "end_turn", "length").
    finish_reason: str = ""


# Receives streamed pieces: kind is "text" or "reasoning".
DeltaSink = Callable[[Literal["text", "reasoning"], str], Awaitable[None]]
