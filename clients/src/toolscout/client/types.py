"""The values every toolscout RPC takes and returns: plain frozen dataclasses, independent of protobuf.

This is the one vocabulary of toolscout (as ``mcp_types`` is the MCP SDK's): the clients return
these values, and every service uses the same definitions for what it plans, finds, runs and counts
(:mod:`toolscout.client.wire` converts them to and from protobuf, for clients and servers alike).
Requests that cross a seam are values too (:class:`PlanRequest`, :class:`SearchRequest`,
:class:`CallRequest`), so a new field is added once; :class:`ToolsetRef` names a toolset.

JSON documents (schemas, arguments, structured content) keep their wire form as ``*_json``
strings, with a property that parses them on demand. Enums become lowercase strings
(``"ready"``, ``"deferred"``), so ``dataclasses.asdict`` of any result is JSON-serialisable. The
closed sets several services compare (:class:`ToolSurface`, :class:`Deferral`,
:class:`GatewayMode`) are ``str`` enums: each member is its lowercase string, so JSON, YAML and
the wire carry the same bytes as before, and ``""`` stays "not set".
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, TypedDict

__all__ = [
    "CALL_TOOL_NAME",
    "EMPTY_INPUT_SCHEMA_JSON",
    "HOST_DESCRIPTION_MAX_BYTES",
    "READ_RESULT_NAME",
    "SEARCH_TOOL_NAME",
    "AssistantMessage",
    "CallProgress",
    "CallRequest",
    "CallToolResult",
    "CatalogSnapshot",
    "ChatEvent",
    "ChatFields",
    "ChatFinished",
    "ChatMessage",
    "ChatResult",
    "ChatStats",
    "ChatTotals",
    "CompletionRequest",
    "ContentBlock",
    "Deferral",
    "DeprecatedToolset",
    "DiscoveryStats",
    "FeatureKind",
    "FeatureList",
    "FeatureReply",
    "FeatureSnapshot",
    "GatewayMode",
    "InputRoundRequest",
    "Manifest",
    "ModelInfo",
    "NameSuggestion",
    "PlanFields",
    "PlanRequest",
    "PromptRequest",
    "ReadRequest",
    "ReasoningDelta",
    "RelayAnswer",
    "RelayedLog",
    "RelayedRequest",
    "ResourceReadRequest",
    "ResultRead",
    "ResultTokens",
    "SearchFields",
    "SearchRequest",
    "SearchResult",
    "ServerFeature",
    "ServerOffers",
    "ServerStatus",
    "ServerTokens",
    "ShardInfo",
    "StructuredCopy",
    "TextDelta",
    "TokenAccounting",
    "TokenUsage",
    "Tool",
    "ToolCall",
    "ToolCallCount",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolCatalog",
    "ToolMatch",
    "ToolPlan",
    "ToolSurface",
    "ToolsDiscovered",
    "ToolsetInfo",
    "ToolsetLike",
    "ToolsetRef",
    "ToolsetServer",
    "UsageUpdate",
    "json_object_text",
    "parse_json_object",
]

# The name of discovery's synthetic search tool; its definition (with the manifest) comes in every
# plan that defers something.
SEARCH_TOOL_NAME = "search_tools"
# The name of discovery's call_tool, which runs a found tool on the cache-stable surface (a plan with
# ``surface="stable"``): the tool list stays eager tools + search_tools + call_tool.
CALL_TOOL_NAME = "call_tool"
# The name of discovery's read_result, which reads a tool result kept behind a handle (a preview
# replaced it): offered while a handle of the conversation is live.
READ_RESULT_NAME = "read_result"
# The largest tool description (and server instructions) MCP hosts keep whole, in bytes of UTF-8:
# Claude Code cuts longer ones. The stable surface's search_tools and everything the MCP gateway
# serves fit it.
HOST_DESCRIPTION_MAX_BYTES = 2048
# The input schema of a tool that takes no arguments (and what an invalid schema is read as).
EMPTY_INPUT_SCHEMA_JSON = '{"type":"object","properties":{}}'


class ToolSurface(StrEnum):
    """How the tools a search finds reach an LLM or an MCP host (discovery's ``ToolSurface``).

    ``append``: found tools join the tool list. ``stable``: the tool list stays eager tools +
    search_tools + call_tool for a whole catalog version; found tools are read as text and run
    through ``call_tool``. A request's ``""`` asks for the server's default (append).
    """

    APPEND = "append"
    STABLE = "stable"

    @classmethod
    def parse(cls, name: str) -> ToolSurface | Literal[""]:
        """The surface ``name`` names; ``""`` for ``""``.

        Raises:
            ValueError: any other name.
        """
        if not name:
            return ""
        try:
            return cls(name)
        except ValueError:
            raise ValueError(f"unknown tool surface {name!r} (append, stable)") from None


class Deferral(StrEnum):
    """How the orchestrator's found tools reach the model (a model's ``deferral`` setting).

    ``native``: every tool declared, deferred ones loaded by the provider's own mechanism;
    ``append``: found tools join ``tools``; ``stable``: discovery's stable surface (call_tool).
    ``auto`` is a setting only: a chat resolves it to native or append before it starts.
    """

    AUTO = "auto"
    NATIVE = "native"
    APPEND = "append"
    STABLE = "stable"


class GatewayMode(StrEnum):
    """What the MCP gateway's tool list holds (an endpoint's ``mode``).

    ``meta``: eager tools + search_tools + call_tool, the same bytes for a catalog version;
    ``progressive``: eager tools + search_tools + what the session's searches loaded; ``all``:
    every tool of the toolset.
    """

    META = "meta"
    PROGRESSIVE = "progressive"
    ALL = "all"


def parse_json_object(text: str) -> dict[str, Any] | None:
    """The JSON object in ``text``; None when it is empty, not valid JSON, or not an object."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _parse_object(text: str) -> dict[str, Any]:
    return parse_json_object(text) or {}


@functools.lru_cache(maxsize=4096)
def _task_support(extra_json: str) -> str:
    """A tool's ``execution.taskSupport`` by its definition's other fields (read once per text:
    every call through the gateway asks)."""
    execution = _parse_object(extra_json).get("execution")
    support = execution.get("taskSupport") if isinstance(execution, dict) else None
    return support if isinstance(support, str) else ""


def json_object_text(value: Mapping[str, Any] | str | None) -> str:
    """A JSON object as wire text (compact, keys in their order); a str passes through unchanged
    (the server validates it), None is ``""``."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(dict(value), ensure_ascii=False, separators=(",", ":"))


def _strings(value: Iterable[str] | str) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


# --- toolsets -----------------------------------------------------------------------------------


def _canonical_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """An inline toolset in its canonical form: servers sorted, tool lists sorted and deduplicated,
    the description (which filters nothing) left out. Anything not of the ``tool_sets`` shape is
    kept as it is, for discovery to refuse with its own words."""
    out = {k: v for k, v in spec.items() if k != "description"}
    servers = out.get("servers")
    if isinstance(servers, Mapping):
        canonical: dict[str, Any] = {}
        for name in sorted(servers, key=str):
            value = servers[name]
            if isinstance(value, list) and all(isinstance(x, str) for x in value):
                value = sorted(set(value))
            elif (
                isinstance(value, Mapping)
                and set(value) == {"exclude"}
                and isinstance(value["exclude"], list)
                and all(isinstance(x, str) for x in value["exclude"])
            ):
                value = {"exclude": sorted(set(value["exclude"]))}
            canonical[name] = value
        out["servers"] = canonical
    return out


@dataclass(frozen=True, slots=True)
class ToolsetRef:
    """Which tools a request may use: a configured toolset by ``name`` (``""``: every tool), or an
    inline filter in the shape of a config ``tool_sets`` entry (``filter_json``).

    Canonical and hashable: :meth:`inline` (and :meth:`of` a mapping) writes a filter in one form
    (servers sorted, tool lists sorted and deduplicated, no description), so the same filter given
    twice, however it was written, is one key (:attr:`key`). Requests accept a name, a mapping or a
    ref where they take a toolset. The constructor keeps the fields as given (the wire form);
    discovery canonicalizes what it receives.
    """

    name: str = ""
    # The canonical JSON of an inline filter ({"servers": {...}}); "" for a name.
    filter_json: str = ""

    @classmethod
    def named(cls, name: str) -> ToolsetRef:
        return cls(name=name)

    @classmethod
    def inline(cls, spec: Mapping[str, Any] | str) -> ToolsetRef:
        """An inline filter (``{"servers": {"weather": True, "mail": ["send_email"]}}``), as a
        mapping or its JSON text. Text that is not a JSON object is kept as it is: discovery
        refuses it (``INVALID_ARGUMENT``) with its own words."""
        value: Any = spec
        if isinstance(spec, str):
            try:
                value = json.loads(spec)
            except (ValueError, RecursionError):
                return cls(filter_json=spec)
            if not isinstance(value, dict):
                return cls(filter_json=spec)
        text = json.dumps(_canonical_spec(value), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return cls(filter_json=text)

    @classmethod
    def of(cls, toolset: ToolsetLike | None = None) -> ToolsetRef:
        """A configured name (a str), an inline filter (a mapping), or a ref as it is."""
        if toolset is None:
            return cls()
        if isinstance(toolset, ToolsetRef):
            return toolset
        if isinstance(toolset, str):
            return cls(name=toolset)
        return cls.inline(toolset)

    @property
    def is_inline(self) -> bool:
        return bool(self.filter_json)

    @property
    def key(self) -> str:
        """The name, or ``inline:<hash of the canonical filter>``: equal for equal toolsets."""
        if not self.filter_json:
            return self.name
        return "inline:" + hashlib.sha256(self.filter_json.encode()).hexdigest()[:32]

    def __str__(self) -> str:
        return self.key


# A toolset as callers may write it: a configured name, an inline filter as a mapping, or a ref.
ToolsetLike = ToolsetRef | str | Mapping[str, Any]


# --- common -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Tool:
    """One MCP tool in the catalog. ``llm_name`` is the stable name the LLM sees."""

    server: str
    name: str
    llm_name: str
    title: str = ""
    description: str = ""
    input_schema_json: str = ""
    output_schema_json: str = ""
    annotations_json: str = ""
    available: bool = True
    # The rest of the MCP definition (icons, execution, _meta, ...) as a JSON object string.
    extra_json: str = ""

    @property
    def input_schema(self) -> dict[str, Any]:
        return _parse_object(self.input_schema_json)

    @property
    def extra(self) -> dict[str, Any]:
        """The definition's other fields as the server sent them (``icons``, ``execution``, ``_meta``, ...)."""
        return _parse_object(self.extra_json)

    @property
    def task_support(self) -> str:
        """The tool's ``execution.taskSupport`` (``forbidden``, ``optional``, ``required``), or ""."""
        return _task_support(self.extra_json)

    @property
    def output_schema(self) -> dict[str, Any]:
        return _parse_object(self.output_schema_json)

    @property
    def annotations(self) -> dict[str, Any]:
        return _parse_object(self.annotations_json)


@dataclass(frozen=True, slots=True)
class ContentBlock:
    """One MCP content block: ``type`` is text, image, audio, resource_link or resource."""

    type: str
    text: str = ""
    data: bytes = b""
    mime_type: str = ""
    uri: str = ""
    name: str = ""
    raw_json: str = ""

    def to_mcp(self) -> dict[str, Any]:
        """The block as the MCP server sent it (its JSON object, payload included: base64 for
        binary data), e.g. to hand a pool result on to an MCP client unchanged."""
        block = _parse_object(self.raw_json) or {"type": self.type}
        if self.type == "text":
            block["text"] = self.text
        elif self.type in ("image", "audio"):
            block["data"] = base64.b64encode(self.data).decode("ascii")
        elif self.type == "resource":
            resource = dict(block.get("resource") or {"uri": self.uri})
            if self.data:
                resource["blob"] = base64.b64encode(self.data).decode("ascii")
            else:
                resource["text"] = self.text
            block["resource"] = resource
        return block


@dataclass(frozen=True, slots=True)
class TokenAccounting:
    """Tokens of all tool definitions vs what is sent (offline BPE counts in ``encoding``)."""

    all_definitions_tokens: int = 0
    sent_tokens: int = 0
    saved_tokens: int = 0
    encoding: str = ""
    estimate: bool = False


# --- McpPool ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ServerStatus:
    """State of one MCP server; ``state`` is starting, ready, reconnecting, failed, idle or stopped."""

    name: str
    transport: str
    state: str
    tool_count: int = 0
    restarts: int = 0
    last_error: str = ""
    state_since_unix: float = 0.0
    defer_loading: bool = False
    health_service: str = ""
    server_info: str = ""
    # While the server is down: Unix time of the pool's next connection attempt (0: none).
    next_retry_unix: float = 0.0
    # The MCP revision negotiated with the server ("2026-07-28", "2025-06-18", ...; "" before).
    protocol_version: str = ""
    # The pool shards that run it (one; every shard for placement "all").
    shards: tuple[int, ...] = ()
    placement: str = "owner"
    # Seconds between re-listings of its tools (its own ttlMs hint when given; 0 = on change only).
    tool_cache_ttl_seconds: float = 0.0
    # Whether the pool receives its tool-change notifications.
    change_notifications: bool = False
    # Whether calls to its tools not annotated readOnlyHint run one at a time (serialize_writes),
    # how many of its tools that serializes, and how many carry no annotations at all.
    serialize_writes: bool = True
    serialized_tools: int = 0
    unannotated_tools: int = 0
    # Since the pool process started: tokens of its results shaped to a budget, as returned and as
    # delivered, and how many became a preview and a handle.
    result_tokens_returned: int = 0
    result_tokens_delivered: int = 0
    results_kept: int = 0


@dataclass(frozen=True, slots=True)
class ShardInfo:
    """Which shard of a sharded pool answered: ``index`` of ``count`` (0 of 1 when unsharded)."""

    index: int = 0
    count: int = 1


@dataclass(frozen=True, slots=True)
class ToolCatalog:
    """The pool's catalog (``ListTools``): tools sorted by (server, name) and the catalog version."""

    tools: tuple[Tool, ...]
    catalog_version: str
    # The shard whose catalog this is (a merged catalog: 0 of 1).
    shard: ShardInfo = ShardInfo()


@dataclass(frozen=True, slots=True)
class CatalogSnapshot:
    """One ``WatchCatalog`` message: the whole catalog and the servers that changed."""

    catalog_version: str
    tools: tuple[Tool, ...]
    changed_servers: tuple[str, ...] = ()
    shard: ShardInfo = ShardInfo()


class StructuredCopy(StrEnum):
    """Which copy reaches the model when ``structuredContent`` and a text block that is only its
    serialization are both present (``CallRequest.structured_copy``; result shaping)."""

    # For MCP hosts, which read ``content``: a result within the budget reaches the host unchanged
    # (the gateway passes results through as the server sent them); past the budget, the text block
    # is kept and structuredContent dropped unless the tool declares an outputSchema, where the MCP
    # spec requires it.
    TEXT = "text"
    # structuredContent (compact JSON); the duplicate text block is dropped. The orchestrator: a
    # provider's tool result is text, built from structuredContent when no text block is left.
    STRUCTURED = "structured"


@dataclass(frozen=True, slots=True, kw_only=True)
class InputRoundRequest:
    """The part of a request (``CallRequest``, ``ResourceReadRequest``, ``PromptRequest``) that
    makes it one round of an MCP 2026-07-28 multi-round-trip request: the caller relays
    ``input_required`` results (``CallToolResult.input_required_json``,
    ``FeatureReply.input_required_json``); a retry carries the host's ``inputResponses`` (JSON
    object text) and the server's own ``requestState``; ``host_capabilities_json``: the host's
    sampling / elicitation / roots capabilities (MCP ``ClientCapabilities`` JSON object text),
    declared to a 2026-07-28 server on this request. Keyword-only, after the request's own fields."""

    accept_input_required: bool = False
    input_responses_json: str = ""
    request_state: str = ""
    host_capabilities_json: str = ""


@dataclass(frozen=True, slots=True)
class CallRequest(InputRoundRequest):
    """One tool call (``CallTool``): by ``llm_name``, or by ``server`` and the tool's own ``tool``.

    ``arguments_json`` and ``meta_json`` are JSON object texts (empty: none); :meth:`to` builds one
    from mappings. ``timeout_seconds`` 0 is the server's configured call timeout.
    """

    llm_name: str = ""
    server: str = ""
    tool: str = ""
    arguments_json: str = ""
    meta_json: str = ""
    timeout_seconds: float = 0.0
    # Result shaping (0: none): at most this many tokens reach the caller, the rest behind a
    # handle (``CallToolResult.result_handle``) bound to ``principal`` and ``conversation``.
    result_budget_tokens: int = 0
    # "o200k_base" ("": it) or "cl100k_base".
    token_encoding: str = ""
    # Which copy of a duplicated structured result is kept (None: TEXT).
    structured_copy: StructuredCopy | None = None
    principal: str = ""
    conversation: str = ""
    # The preview's size in tokens (0: the pool's configured one).
    preview_tokens: int = 0
    # A result that fits the budget unchanged comes back without its token counts (0), counted
    # by the pool after it answers (for a caller that does not read them: it saves the counting).
    defer_token_counts: bool = False

    @classmethod
    def to(
        cls,
        name: str,
        arguments: Mapping[str, Any] | str | None = None,
        *,
        server: str = "",
        meta: Mapping[str, Any] | str | None = None,
        timeout_seconds: float = 0.0,
    ) -> CallRequest:
        """A call of ``name``: its LLM-facing name, or (with ``server``) its own name on that server."""
        return cls(
            llm_name="" if server else name,
            server=server,
            tool=name if server else "",
            arguments_json=json_object_text(arguments),
            meta_json=json_object_text(meta),
            timeout_seconds=timeout_seconds,
        )

    @property
    def name(self) -> str:
        """The name the call was made with (the LLM-facing one, else the tool's own)."""
        return self.llm_name or self.tool


@dataclass(frozen=True, slots=True)
class CallToolResult:
    """A tool's result. A tool that failed is data: ``is_error`` with the server's text."""

    content: tuple[ContentBlock, ...]
    structured_content_json: str = ""
    is_error: bool = False
    truncated: bool = False
    server: str = ""
    tool: str = ""
    duration_seconds: float = 0.0
    # With a result budget: tokens as returned by the server and as delivered (estimated from
    # samples for long texts), and the handle of the whole result when this is a preview.
    tokens_returned: int = 0
    tokens_delivered: int = 0
    tokens_estimated: bool = False
    result_handle: str = ""
    handle_expires_unix: float = 0.0
    # The result's ``_meta`` as the server sent it (JSON object string), or "".
    meta_json: str = ""
    # Non-zero: the server answered with this JSON-RPC error code instead of a result (the error's
    # message is the text of ``content``, ``is_error`` is set).
    jsonrpc_error_code: int = 0
    # Non-empty: the server asked for input instead (MCP ``InputRequiredResult`` as JSON object
    # text); only when the request had ``accept_input_required``.
    input_required_json: str = ""

    @property
    def text(self) -> str:
        """The text blocks joined by newlines (what a person or an LLM reads)."""
        return "\n".join(b.text for b in self.content if b.type in ("text", "resource") and b.text)

    @property
    def structured_content(self) -> dict[str, Any]:
        return _parse_object(self.structured_content_json)


@dataclass(frozen=True, slots=True)
class ReadRequest:
    """A read of a kept result (``ReadResult``): a page from ``offset``, the lines containing
    ``pattern`` with ``context_lines`` around them, or the JMESPath ``path`` of a JSON result.
    ``budget_tokens`` 0 is the budget of the call that made the handle."""

    handle: str
    principal: str = ""
    conversation: str = ""
    offset: int = 0
    pattern: str = ""
    context_lines: int = 0
    path: str = ""
    budget_tokens: int = 0
    token_encoding: str = ""


@dataclass(frozen=True, slots=True)
class ResultRead:
    """What a read of a kept result returns: ``text`` for the model and its ``tokens``; for a
    page, ``next_offset`` (-1 at the end)."""

    text: str
    tokens: int = 0
    next_offset: int = -1
    total_chars: int = 0
    server: str = ""
    tool: str = ""


@dataclass(frozen=True, slots=True)
class CallProgress:
    """One progress notification of the MCP server running a call (``notifications/progress``)."""

    progress: float
    total: float | None = None
    message: str = ""


@dataclass(frozen=True, slots=True)
class RelayedRequest:
    """A request of the MCP server to the host during a relayed call (``CallToolRelay``):
    ``sampling/createMessage``, ``elicitation/create`` or ``roots/list``, with its params as MCP
    puts them on the wire (a JSON object string). Answered by a :class:`RelayAnswer` of its ``id``."""

    id: int
    method: str
    params_json: str = ""

    @property
    def params(self) -> dict[str, Any]:
        return _parse_object(self.params_json)


@dataclass(frozen=True, slots=True)
class RelayAnswer:
    """The host's answer to a :class:`RelayedRequest`: its MCP result (a JSON object string), or a
    JSON-RPC error when ``error_code`` is not 0."""

    id: int
    result_json: str = ""
    error_code: int = 0
    error_message: str = ""

    @classmethod
    def of(cls, request_id: int, result: Mapping[str, Any]) -> RelayAnswer:
        return cls(request_id, json_object_text(result))

    @classmethod
    def error(cls, request_id: int, code: int, message: str) -> RelayAnswer:
        return cls(request_id, error_code=code, error_message=message)


@dataclass(frozen=True, slots=True)
class RelayedLog:
    """A log message of the MCP server during a relayed call (``notifications/message``): its
    level (``debug`` … ``emergency``), logger name and ``data`` as JSON text."""

    level: str
    logger: str = ""
    data_json: str = "null"


# --- McpPool: resources, resource templates, prompts, completion, logging ------------------------


class FeatureKind(StrEnum):
    """What a server offers besides tools (``ListFeatures``' kind, ``Complete``'s reference)."""

    RESOURCE = "resource"
    RESOURCE_TEMPLATE = "resource_template"
    PROMPT = "prompt"

    @property
    def key_field(self) -> str:
        """The field of the kind's MCP definition that holds its key (its name or URI)."""
        return _FEATURE_KEY_FIELDS[self]


_FEATURE_KEY_FIELDS = {
    FeatureKind.RESOURCE: "uri",
    FeatureKind.RESOURCE_TEMPLATE: "uriTemplate",
    FeatureKind.PROMPT: "name",
}


@dataclass(frozen=True, slots=True)
class ServerFeature:
    """One resource, resource template or prompt of a server.

    ``own_name`` is its key on its server (a resource's URI, a template's URI template, a prompt's
    name); ``served_name`` the key it is served under (see the proto's ``ServerFeature``);
    ``definition_json`` the whole MCP definition as listed, but for the served name or URI.
    """

    kind: FeatureKind
    server: str
    own_name: str
    served_name: str
    definition_json: str = "{}"
    # The key it is served under when another server claims ``served_name`` too (see the proto's
    # ``ServerFeature``); "" from a pool that does not set it.
    qualified_name: str = ""

    @property
    def definition(self) -> dict[str, Any]:
        return _parse_object(self.definition_json)


@dataclass(frozen=True, slots=True)
class ServerOffers:
    """What one server's capabilities offer besides tools."""

    server: str
    resources: bool = False
    subscribe: bool = False
    prompts: bool = False
    completions: bool = False
    logging: bool = False


@dataclass(frozen=True, slots=True)
class FeatureList:
    """One page of ``ListFeatures``: features of one kind, the next page's cursor ("" at the end)."""

    features: tuple[ServerFeature, ...]
    next_cursor: str = ""
    features_version: str = ""
    shard: ShardInfo = ShardInfo()
    offers: tuple[ServerOffers, ...] = ()


@dataclass(frozen=True, slots=True)
class FeatureSnapshot:
    """One ``WatchFeatures`` message: every feature of every kind, what each server offers, and
    the kinds whose listing changed since the previous message."""

    features_version: str
    features: tuple[ServerFeature, ...]
    offers: tuple[ServerOffers, ...] = ()
    changed_kinds: tuple[FeatureKind, ...] = ()
    shard: ShardInfo = ShardInfo()


@dataclass(frozen=True, slots=True)
class ResourceReadRequest(InputRoundRequest):
    """``ReadResource``: a URI as served (or one a server's template matches); a round of a
    multi-round-trip read (:class:`InputRoundRequest`)."""

    uri: str
    principal: str = ""
    timeout_seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class PromptRequest(InputRoundRequest):
    """``GetPrompt``: a prompt by its served name, with its arguments (a JSON object of strings);
    a round of a multi-round-trip prompt (:class:`InputRoundRequest`)."""

    name: str
    arguments_json: str = ""
    principal: str = ""
    timeout_seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class CompletionRequest:
    """``Complete``: completions of one argument of a prompt (``ref_kind`` PROMPT, ``ref`` its
    served name) or of a resource template (RESOURCE_TEMPLATE, ``ref`` its served URI template)."""

    ref_kind: FeatureKind
    ref: str
    argument_name: str
    argument_value: str = ""
    # The other arguments' values already given, a JSON object text, or "".
    context_arguments_json: str = ""
    principal: str = ""
    timeout_seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class FeatureReply:
    """A server's answer to a read, a prompt or a completion: its MCP result as a JSON object text,
    or its JSON-RPC error (``jsonrpc_error_code`` non-zero, ``error_message``), or (a read or a
    prompt with ``accept_input_required``) its ``InputRequiredResult`` in ``input_required_json``."""

    server: str
    result_json: str = ""
    jsonrpc_error_code: int = 0
    error_message: str = ""
    input_required_json: str = ""

    @property
    def result(self) -> dict[str, Any]:
        return _parse_object(self.result_json)


# --- Discovery ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PlanRequest:
    """What ``PlanTools`` (and ``WatchPlan``) is asked: the tool list to send for a toolset.

    ``toolset`` and the name lists accept what callers have (a str, a mapping, lists); they are
    stored as a :class:`ToolsetRef` and tuples.
    """

    toolset: ToolsetRef = ToolsetRef()
    # LLM names already discovered in the conversation (they are planned as loaded).
    discovered_tools: tuple[str, ...] = ()
    # For the token encoding: "openai" (default), "anthropic" or "ollama".
    provider: str = ""
    # Also return the names / the definitions of every deferred tool (native deferral).
    include_deferred_names: bool = False
    include_deferred_tools: bool = False
    # APPEND ("" = the default) or STABLE: eager tools + search_tools + call_tool for a whole
    # catalog version. A plain string is read as its member (ValueError for an unknown one).
    surface: ToolSurface | Literal[""] = ""
    # Who the plan is for: a per_user server's tools are those it lists to them ("" = the stack's).
    principal: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "toolset", ToolsetRef.of(self.toolset))
        object.__setattr__(self, "discovered_tools", _strings(self.discovered_tools))
        object.__setattr__(self, "surface", ToolSurface.parse(self.surface))


class DeprecatedToolset(TypedDict, total=False):
    """The keyword the clients accept for one more release: an inline toolset as JSON text (pass
    it as ``toolset`` instead: a mapping, or :meth:`ToolsetRef.inline`). It warns."""

    toolset_json: str


class PlanFields(DeprecatedToolset, total=False):
    """The keyword arguments of ``plan_tools`` / ``watch_plan``: :class:`PlanRequest`'s fields."""

    discovered_tools: Sequence[str]
    provider: str
    include_deferred_names: bool
    include_deferred_tools: bool
    surface: ToolSurface


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """One ``search_tools`` call (``SearchTools``): a query, a server to browse, or exact names.

    ``arguments_json`` (the raw arguments a model sent) replaces ``query`` / ``server_name`` /
    ``tool_names`` when set. With ``include_plan`` the result carries the plan after the search.
    """

    query: str = ""
    toolset: ToolsetRef = ToolsetRef()
    server_name: str = ""
    tool_names: tuple[str, ...] = ()
    arguments_json: str = ""
    # LLM names already loaded in the conversation: reported as such, not counted as results.
    loaded_tools: tuple[str, ...] = ()
    # 0: the configured default; also the page size of a server browse.
    max_results: int = 0
    offset: int = 0
    include_plan: bool = False
    # With include_plan: the tools discovered earlier (in order) and the provider for token counts.
    discovered_tools: tuple[str, ...] = ()
    provider: str = ""
    # The provider loads found definitions itself (native deferral): the text lists names only.
    compact_text: bool = False
    # APPEND ("" = the default) or STABLE (found tools' schemas in the text, called via call_tool).
    surface: ToolSurface | Literal[""] = ""
    # Who searches: a per_user server's tools are those it lists to them ("" = the stack's).
    principal: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "toolset", ToolsetRef.of(self.toolset))
        for name in ("tool_names", "loaded_tools", "discovered_tools"):
            object.__setattr__(self, name, _strings(getattr(self, name)))
        object.__setattr__(self, "surface", ToolSurface.parse(self.surface))


class SearchFields(DeprecatedToolset, total=False):
    """The keyword arguments of ``search_tools``: :class:`SearchRequest`'s fields but the query."""

    toolset: ToolsetLike
    server_name: str
    tool_names: Sequence[str]
    arguments_json: str
    loaded_tools: Sequence[str]
    max_results: int
    offset: int
    include_plan: bool
    discovered_tools: Sequence[str]
    provider: str
    compact_text: bool
    surface: ToolSurface


@dataclass(frozen=True, slots=True)
class ToolPlan:
    """What to send to the LLM for a toolset (``PlanTools``)."""

    loaded_tools: tuple[Tool, ...] = ()
    has_search_tool: bool = False
    search_tool: Tool | None = None
    manifest: str = ""
    # "tool_description" (in search_tools' description) or "system_message".
    manifest_placement: str = "tool_description"
    manifest_system_message: str = ""
    total_tools: int = 0
    loaded_count: int = 0
    deferred_count: int = 0
    catalog_version: str = ""
    tokens: TokenAccounting = TokenAccounting()
    deferred_tool_names: tuple[str, ...] = ()
    dropped_tools: tuple[str, ...] = ()
    # The requested discovered tools that are deferred tools of the toolset (now loaded), in order.
    discovered_tools: tuple[str, ...] = ()
    # With ``include_deferred_tools``: the definition of every deferred tool (catalog order).
    deferred_tools: tuple[Tool, ...] = ()
    # With the STABLE surface and a search tool: the call_tool definition. The stable surface
    # sends eager tools + search_tool + call_tool and nothing else for a catalog version.
    call_tool: Tool | None = None
    surface: ToolSurface = ToolSurface.APPEND
    # The read_result definition (every plan): offered while a result handle is live.
    read_result_tool: Tool | None = None
    # Its tokens in ``tokens.encoding`` (not in ``tokens.sent_tokens``).
    read_result_tokens: int = 0
    # With ``surface="stable"``: the definitions of ``discovered_tools``, in order. Not sent (found
    # tools are called through call_tool); a caller checks call_tool arguments against them.
    found_tools: tuple[Tool, ...] = ()


@dataclass(frozen=True, slots=True)
class ToolMatch:
    tool: Tool
    already_loaded: bool = False
    # What the ranking used: BM25, or the fused score of hybrid search (0 for a server browse or
    # tool_names); an exact tool-name match ranks above every other whatever its score.
    score: float = 0.0
    # The parts of a query match's score: its BM25 score (None: no word in common with the
    # query) and, in hybrid search, its cosine similarity with the query.
    bm25_score: float | None = None
    similarity: float | None = None
    exact_name: bool = False


@dataclass(frozen=True, slots=True)
class NameSuggestion:
    name: str
    closest: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SearchResult:
    """A ``search_tools`` answer; ``mode`` is tool_names, server, server_query or query."""

    mode: str
    matches: tuple[ToolMatch, ...]
    newly_loaded: tuple[Tool, ...]
    result_text: str
    not_found: tuple[NameSuggestion, ...] = ()
    total_matches: int = 0
    catalog_version: str = ""
    # With ``include_plan``: what to send on the next LLM call (the plan after this search).
    plan: ToolPlan | None = None
    # What ranked a query search: "bm25" or "hybrid" ("" for a server browse and tool_names).
    ranking: str = ""
    # With ``surface="stable"``: the answer as data (an MCP tool result's structuredContent), JSON:
    # {"tools": [{"name", "server", "tool", "description", "inputSchema"}], "alreadyLoaded",
    # "notFound": [{"name", "closest"}], "totalMatches"}.
    structured_content_json: str = ""

    @property
    def structured_content(self) -> dict[str, Any]:
        return _parse_object(self.structured_content_json)


@dataclass(frozen=True, slots=True)
class ServerTokens:
    """One server's share of a toolset's tool-definition tokens (``GetManifest``)."""

    server: str
    tools: int = 0
    deferred_tools: int = 0
    all_tokens: int = 0
    loaded_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Manifest:
    manifest: str
    tokens: int
    budget_tokens: int
    deferred_servers: int
    deferred_tools: int
    catalog_version: str
    servers: tuple[ServerTokens, ...] = ()
    encoding: str = ""
    estimate: bool = False


# --- Orchestrator -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments_json: str = ""


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One message; ``role`` is system, user, assistant or tool."""

    role: str
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""
    name: str = ""
    reasoning: str = ""
    attachments: tuple[ContentBlock, ...] = ()
    is_error: bool = False
    # On a search_tools result from the orchestrator: the tools that search loaded. Keep it when
    # sending the history back, so the next turn needs no replay of the search.
    loaded_tools: tuple[str, ...] | None = None
    # On an assistant message: provider-native output items (JSON) to send back unchanged.
    native_items_json: tuple[str, ...] = ()
    # On a tool result from the orchestrator: the call named a deferred tool no search had loaded
    # yet and was refused before anything ran. Keep it when sending the history back.
    not_loaded: bool = False
    # On a tool result from the orchestrator that is a preview of a result over its budget: the
    # handle the whole is kept under and when it expires (Unix seconds). Keep both when sending
    # the history back: read_result is offered, and reads, only handles the history shows.
    result_handle: str = ""
    handle_expires_unix: float = 0.0

    @classmethod
    def user(cls, content: str) -> ChatMessage:
        return cls(role="user", content=content)


class ChatFields(DeprecatedToolset, total=False):
    """The keyword arguments of ``chat`` / ``stream_chat`` besides the messages and the model."""

    # A configured toolset's name, an inline filter, or a ToolsetRef (as for plan_tools).
    toolset: ToolsetLike
    # An explicit system prompt: replaces the model's template and the default.
    system: str
    # The tools discovered earlier in the conversation (the previous result's loaded_tools).
    discovered_tools: Sequence[str]
    # MCP ``_meta`` passed to every tool call: a mapping or its JSON text.
    meta: Mapping[str, Any] | str | None
    # Iteration limit for this chat (0: the configured one).
    max_iterations: int
    # "result", "function_result" or "function_args_result" ("": the configured one).
    tool_result_format: str
    # The same value on every turn of one conversation: result handles are bound to it ("": a
    # hash of the toolset and the first user message).
    conversation_id: str


@dataclass(frozen=True, slots=True)
class TokenUsage:
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_input_tokens: int = 0


@dataclass(frozen=True, slots=True)
class ToolCallCount:
    tool: str
    server: str = ""
    calls: int = 0
    errors: int = 0


@dataclass(frozen=True, slots=True)
class DiscoveryStats:
    search_calls: int = 0
    tools_discovered: int = 0
    definition_tokens_sent: int = 0
    definition_tokens_all: int = 0
    tokens_saved: int = 0
    encoding: str = ""
    estimate: bool = False
    deferred_call_rejections: int = 0
    # The chat's deferral mode after any fallback (never AUTO); "" when not reported.
    deferral: Deferral | Literal[""] = ""
    native_fallback_reason: str = ""


@dataclass(frozen=True, slots=True)
class ResultTokens:
    """Tool-result tokens of one server in one chat: as returned by the server, as delivered to the
    model (shaped, previews included) and the difference; the read_result answers apart."""

    server: str
    tokens_returned: int = 0
    tokens_delivered: int = 0
    tokens_saved: int = 0
    results_kept: int = 0
    reads: int = 0
    estimated: bool = False
    read_tokens: int = 0


@dataclass(frozen=True, slots=True)
class ChatStats:
    usage: TokenUsage = field(default_factory=TokenUsage)
    llm_calls: int = 0
    tool_calls: tuple[ToolCallCount, ...] = ()
    discovery: DiscoveryStats = field(default_factory=DiscoveryStats)
    iterations: int = 0
    duration_seconds: float = 0.0
    result_tokens: tuple[ResultTokens, ...] = ()


@dataclass(slots=True)
class ChatTotals:
    """Running totals of the :class:`ChatStats` of several chats (a conversation's turns, or the
    chats a console ran): :meth:`add` one chat's stats at a time."""

    chats: int = 0
    llm_calls: int = 0
    search_calls: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_input_tokens: int = 0
    definition_tokens_all: int = 0
    definition_tokens_sent: int = 0
    # The chats' own tokens_saved summed (each never below 0).
    tokens_saved: int = 0
    # Tool-result tokens as the servers returned them and as the model got them (shaped, the
    # read_result answers included).
    result_tokens_returned: int = 0
    result_tokens_delivered: int = 0

    def add(self, stats: ChatStats) -> None:
        usage, discovery = stats.usage, stats.discovery
        self.chats += 1
        self.llm_calls += stats.llm_calls
        self.search_calls += discovery.search_calls
        self.tool_calls += sum(c.calls for c in stats.tool_calls)
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.cached_input_tokens += usage.cached_input_tokens
        self.cache_write_input_tokens += usage.cache_write_input_tokens
        self.definition_tokens_all += discovery.definition_tokens_all
        self.definition_tokens_sent += discovery.definition_tokens_sent
        self.tokens_saved += discovery.tokens_saved
        for r in stats.result_tokens:
            self.result_tokens_returned += r.tokens_returned
            self.result_tokens_delivered += r.tokens_delivered + r.read_tokens


@dataclass(frozen=True, slots=True)
class ChatResult:
    """A finished chat; pass ``loaded_tools`` back as ``discovered_tools`` on the next turn.

    ``stop_reason`` is completed or iteration_limit (then ``error`` explains).
    """

    messages: tuple[ChatMessage, ...]
    loaded_tools: tuple[str, ...]
    stats: ChatStats
    stop_reason: str
    error: str = ""
    tools_disabled_fallback: bool = False
    model: str = ""

    @property
    def text(self) -> str:
        """The final assistant answer (the last assistant message's content)."""
        for message in reversed(self.messages):
            if message.role == "assistant" and message.content:
                return message.content
        return ""


@dataclass(frozen=True, slots=True)
class ModelInfo:
    name: str
    client: str
    provider: str
    model: str
    base_url: str = ""
    template: str = ""
    api: str = ""
    # The resolved deferral mode (never AUTO); "" when not reported.
    deferral: Deferral | Literal[""] = ""
    strict_tools: bool = False


@dataclass(frozen=True, slots=True)
class ToolsetServer:
    server: str
    mode: str
    tools: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ToolsetInfo:
    name: str
    description: str = ""
    servers: tuple[ToolsetServer, ...] = ()


# --- StreamChat events --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    text: str


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    """A complete assistant message (after its deltas), with the tool calls it asks for."""

    message: ChatMessage


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    call: ToolCall
    server: str = ""


@dataclass(frozen=True, slots=True)
class ToolCallFinished:
    call: ToolCall
    server: str = ""
    duration_seconds: float = 0.0
    is_error: bool = False
    result_preview: str = ""


@dataclass(frozen=True, slots=True)
class ToolsDiscovered:
    tools: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class UsageUpdate:
    """Cumulative provider-reported usage after each LLM call."""

    usage: TokenUsage


@dataclass(frozen=True, slots=True)
class ChatFinished:
    """The last event of a stream: the same result ``chat`` returns."""

    result: ChatResult


ChatEvent = (
    TextDelta
    | ReasoningDelta
    | AssistantMessage
    | ToolCallStarted
    | ToolCallFinished
    | ToolsDiscovered
    | UsageUpdate
    | ChatFinished
)
