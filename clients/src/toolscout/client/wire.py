"""Protobuf messages ⇄ the values in :mod:`toolscout.client.types`, in both directions.

The one converter between the wire and the shared vocabulary: the clients use it to send requests
and read answers, and every toolscout service's servicer uses it to read requests and answer, so
a field is mapped in one place. ``x(message)`` reads a value from its message, ``x_pb(value)``
writes it. A field that a value and its message share by name and kind is copied by :class:`_Alike`
(a new one needs no code here); the converters spell out only the fields that change form. Enums
travel as lowercase names (``"ready"``); a number this side does not know (a newer peer) keeps its
number.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Generic, Literal, TypeVar

import grpc
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from toolscout.client import types as t
from toolscout.client._requests import toolset_ref
from toolscout.common.v1 import common_pb2
from toolscout.discovery.v1 import discovery_pb2
from toolscout.mcp_pool.v1 import mcp_pool_pb2
from toolscout.orchestrator.v1 import orchestrator_pb2


def _enum_name(enum: Any, value: int, prefix: str) -> str:
    # SERVER_STATE_READY -> "ready"; an unknown (newer) value keeps its number.
    try:
        name: str = enum.Name(value)
    except ValueError:
        return str(value)
    return name.removeprefix(prefix).lower()


def _enum_value(enum: Any, name: str, prefix: str) -> Any:
    # "ready" -> SERVER_STATE_READY; a number kept by _enum_name goes back as it came; "" -> 0.
    if name.isdigit():
        return int(name)
    try:
        return enum.Value(f"{prefix}{name.upper()}") if name else 0
    except ValueError:
        return 0


V = TypeVar("V")
M = TypeVar("M", bound=Message)
# Fields no value holds as they are on the wire.
_CONVERTED_KINDS = (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_ENUM)


def well_formed(text: str) -> str:
    """``text`` as UTF-8 (and so protobuf) can carry it: a lone surrogate, which a JSON ``\\ud800``
    escape decodes to, becomes U+FFFD; two that make a pair become the character they encode."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def well_formed_value(value: Any) -> Any:
    """``value`` with every string in it (in lists, tuples and dicts, keys too) :func:`well_formed`;
    anything else as it is."""
    if isinstance(value, str):
        return well_formed(value)
    if isinstance(value, list | tuple):
        return [well_formed_value(item) for item in value]
    if isinstance(value, dict):
        return {well_formed_value(key): well_formed_value(item) for key, item in value.items()}
    return value


def _build(message_type: type[M], fields: dict[str, Any]) -> M:
    """``message_type(**fields)``. A string protobuf refuses (one with a lone surrogate, from an MCP
    server's JSON) is made :func:`well_formed` and the message built again: a tool result, a log
    line or a relayed request from such a server still arrives. The check is protobuf's own, made
    as it copies the strings in, so a message without one costs nothing more."""
    try:
        return message_type(**fields)
    except UnicodeEncodeError:
        return message_type(**{name: well_formed_value(value) for name, value in fields.items()})


def _getter(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """Reads ``names`` of an object as a tuple (``attrgetter`` returns a bare value for one name)."""
    if not names:
        return lambda m: ()
    get = operator.attrgetter(*names)
    return get if len(names) > 1 else lambda m: (get(m),)


class _Alike(Generic[V, M]):
    """Converts a value type and its message by the fields both have, copied as they are (repeated
    ones as tuples). The ``converted`` fields (messages and enums) are not copied: the converter
    passes them, as it passes any field that changes form (a keyword given wins over the copy)."""

    def __init__(self, value_type: type[V], message_type: type[M], *converted: str) -> None:
        shared = message_type.DESCRIPTOR.fields_by_name
        names = [f.name for f in dataclasses.fields(value_type) if f.name in shared]  # type: ignore[arg-type]
        unconverted = [n for n in names if n not in converted and shared[n].type in _CONVERTED_KINDS]
        if unconverted:
            raise TypeError(f"{value_type.__name__}: message or enum fields need a converter: {unconverted}")
        self._value_type = value_type
        self._message_type = message_type
        self._plain = tuple(n for n in names if n not in converted)
        self._repeated = tuple(n for n in self._plain if shared[n].is_repeated)
        self._present = frozenset(n for n in self._plain if shared[n].has_presence)
        # Every plain field read in one call (a call's result is converted on its hot path).
        self._read = _getter(self._plain)
        # Built with positional arguments when the value's fields are the converted ones, then
        # the plain ones (no keyword dicts: a call's result and its blocks are built per call).
        every = dataclasses.fields(value_type)  # type: ignore[arg-type]
        fields = tuple(f.name for f in every)
        self._converted = tuple(n for n in fields if n in converted)
        self._positional = (
            not self._repeated
            and fields == self._converted + self._plain
            and all(f.init and not f.kw_only for f in every)
        )

    def value(self, m: M, **converted: Any) -> V:
        if self._positional and tuple(converted) == self._converted:
            return self._value_type(*converted.values(), *self._read(m))
        plain = dict(zip(self._plain, self._read(m), strict=True))
        for name in self._repeated:
            plain[name] = tuple(plain[name])
        return self._value_type(**(plain | converted))

    def message(self, x: V, **converted: Any) -> M:
        # A field without presence left at its default is not set (the same message; a call's
        # request has a dozen such fields, each set one by one).
        fields = {n: v for n in self._plain if (v := getattr(x, n)) or n in self._present}
        return _build(self._message_type, fields | converted)


# --- common ---------------------------------------------------------------------------------------

_TOOL = _Alike(t.Tool, common_pb2.Tool)
_CONTENT_BLOCK = _Alike(t.ContentBlock, common_pb2.ContentBlock)
_TOKEN_ACCOUNTING = _Alike(t.TokenAccounting, common_pb2.TokenAccounting)

tool = _TOOL.value
tool_pb = _TOOL.message
content_block = _CONTENT_BLOCK.value
content_block_pb = _CONTENT_BLOCK.message
token_accounting = _TOKEN_ACCOUNTING.value
token_accounting_pb = _TOKEN_ACCOUNTING.message


def tools(ms: Iterable[common_pb2.Tool]) -> tuple[t.Tool, ...]:
    return tuple(tool(m) for m in ms)


def tools_pb(xs: Iterable[t.Tool]) -> list[common_pb2.Tool]:
    return [tool_pb(x) for x in xs]


# --- McpPool ------------------------------------------------------------------------------------

_SERVER_STATUS = _Alike(t.ServerStatus, mcp_pool_pb2.ServerStatus, "state")
_SHARD_INFO = _Alike(t.ShardInfo, mcp_pool_pb2.ShardInfo)
_TOOL_CATALOG = _Alike(t.ToolCatalog, mcp_pool_pb2.ListToolsResponse, "tools", "shard")
_CATALOG_SNAPSHOT = _Alike(t.CatalogSnapshot, mcp_pool_pb2.WatchCatalogResponse, "tools", "shard")
_CALL_TOOL_RESULT = _Alike(t.CallToolResult, mcp_pool_pb2.CallToolResponse, "content")
_CALL_REQUEST = _Alike(t.CallRequest, mcp_pool_pb2.CallToolRequest, "structured_copy")
_READ_REQUEST = _Alike(t.ReadRequest, mcp_pool_pb2.ReadResultRequest)
_RESULT_READ = _Alike(t.ResultRead, mcp_pool_pb2.ReadResultResponse)
# StructuredCopy <-> its proto number; UNSPECIFIED (0) is None.
_COPY_NUMBERS = {
    copy: mcp_pool_pb2.StructuredCopy.Value(f"STRUCTURED_COPY_{copy.name}") for copy in t.StructuredCopy
}
_COPIES = {number: copy for copy, number in _COPY_NUMBERS.items()}


def call_request(m: mcp_pool_pb2.CallToolRequest) -> t.CallRequest:
    # A copy this side does not know (a newer peer's) is the default one, as UNSPECIFIED.
    return _CALL_REQUEST.value(m, structured_copy=_COPIES.get(m.structured_copy))


def call_request_pb(x: t.CallRequest) -> mcp_pool_pb2.CallToolRequest:
    copy = x.structured_copy
    return _CALL_REQUEST.message(x, structured_copy=0 if copy is None else _COPY_NUMBERS[copy])


read_request = _READ_REQUEST.value
read_request_pb = _READ_REQUEST.message
result_read = _RESULT_READ.value
result_read_pb = _RESULT_READ.message
shard_info_pb = _SHARD_INFO.message


def server_status(m: mcp_pool_pb2.ServerStatus) -> t.ServerStatus:
    return _SERVER_STATUS.value(
        m,
        state=_enum_name(mcp_pool_pb2.ServerState, m.state, "SERVER_STATE_"),
        placement=m.placement or "owner",
    )


def server_status_pb(x: t.ServerStatus) -> mcp_pool_pb2.ServerStatus:
    return _SERVER_STATUS.message(x, state=_enum_value(mcp_pool_pb2.ServerState, x.state, "SERVER_STATE_"))


def shard_info(m: mcp_pool_pb2.ShardInfo) -> t.ShardInfo:
    # An older pool sends no shard: it is the only one.
    return _SHARD_INFO.value(m, count=m.count or 1)


def tool_catalog(m: mcp_pool_pb2.ListToolsResponse) -> t.ToolCatalog:
    return _TOOL_CATALOG.value(m, tools=tools(m.tools), shard=shard_info(m.shard))


def tool_catalog_pb(x: t.ToolCatalog) -> mcp_pool_pb2.ListToolsResponse:
    return _TOOL_CATALOG.message(x, tools=tools_pb(x.tools), shard=shard_info_pb(x.shard))


def catalog_snapshot(m: mcp_pool_pb2.WatchCatalogResponse) -> t.CatalogSnapshot:
    return _CATALOG_SNAPSHOT.value(m, tools=tools(m.tools), shard=shard_info(m.shard))


def catalog_snapshot_pb(x: t.CatalogSnapshot) -> mcp_pool_pb2.WatchCatalogResponse:
    return _CATALOG_SNAPSHOT.message(x, tools=tools_pb(x.tools), shard=shard_info_pb(x.shard))


def call_tool_result(m: mcp_pool_pb2.CallToolResponse) -> t.CallToolResult:
    return _CALL_TOOL_RESULT.value(m, content=tuple(content_block(b) for b in m.content))


def call_progress(m: mcp_pool_pb2.CallProgress) -> t.CallProgress:
    return t.CallProgress(m.progress, m.total if m.has_total else None, m.message)


def relayed_request(m: mcp_pool_pb2.RelayedRequest) -> t.RelayedRequest:
    return t.RelayedRequest(m.id, m.method, m.params_json)


def relayed_request_pb(x: t.RelayedRequest) -> mcp_pool_pb2.RelayedRequest:
    return _build(mcp_pool_pb2.RelayedRequest, {"id": x.id, "method": x.method, "params_json": x.params_json})


def relay_answer(m: mcp_pool_pb2.RelayAnswer) -> t.RelayAnswer:
    return t.RelayAnswer(m.id, m.result_json, m.error_code, m.error_message)


def relay_answer_pb(x: t.RelayAnswer) -> mcp_pool_pb2.RelayAnswer:
    return _build(
        mcp_pool_pb2.RelayAnswer,
        {
            "id": x.id,
            "result_json": x.result_json,
            "error_code": x.error_code,
            "error_message": x.error_message,
        },
    )


def relayed_log(m: mcp_pool_pb2.RelayedLog) -> t.RelayedLog:
    return t.RelayedLog(m.level, m.logger, m.data_json or "null")


def relayed_log_pb(x: t.RelayedLog) -> mcp_pool_pb2.RelayedLog:
    return _build(mcp_pool_pb2.RelayedLog, {"level": x.level, "logger": x.logger, "data_json": x.data_json})


def call_progress_pb(x: t.CallProgress) -> mcp_pool_pb2.CallProgress:
    return _build(
        mcp_pool_pb2.CallProgress,
        {
            "progress": x.progress,
            "total": x.total or 0.0,
            "has_total": x.total is not None,
            "message": x.message,
        },
    )


def call_tool_result_pb(x: t.CallToolResult) -> mcp_pool_pb2.CallToolResponse:
    return _CALL_TOOL_RESULT.message(x, content=[content_block_pb(b) for b in x.content])


def call_stream_refusal_pb(
    call_id: int, code: grpc.StatusCode, details: str, trailing: Iterable[tuple[str, str]]
) -> mcp_pool_pb2.CallToolStreamResponse:
    """The call stream's answer to call ``call_id`` that ``CallTool`` would have ended with status
    ``code`` (never OK), ``details`` and ``trailing`` metadata."""
    entries = [mcp_pool_pb2.MetadataEntry(key=key, value=value) for key, value in trailing]
    return mcp_pool_pb2.CallToolStreamResponse(
        id=call_id, code=code.value[0], details=details, trailing_metadata=entries
    )


# --- McpPool: resources, resource templates, prompts, completion, logging ------------------------

_KIND_PREFIX = "FEATURE_KIND_"
_SERVER_FEATURE = _Alike(t.ServerFeature, mcp_pool_pb2.ServerFeature, "kind")
_SERVER_OFFERS = _Alike(t.ServerOffers, mcp_pool_pb2.ServerOffers)
_FEATURE_LIST = _Alike(t.FeatureList, mcp_pool_pb2.ListFeaturesResponse, "features", "shard", "offers")
_FEATURE_SNAPSHOT = _Alike(
    t.FeatureSnapshot, mcp_pool_pb2.WatchFeaturesResponse, "features", "offers", "changed_kinds", "shard"
)
_RESOURCE_READ = _Alike(t.ResourceReadRequest, mcp_pool_pb2.ReadResourceRequest)
_PROMPT_REQUEST = _Alike(t.PromptRequest, mcp_pool_pb2.GetPromptRequest)
_COMPLETION_REQUEST = _Alike(t.CompletionRequest, mcp_pool_pb2.CompleteRequest, "ref_kind")
_FEATURE_REPLY = _Alike(t.FeatureReply, mcp_pool_pb2.FeatureReply)

server_offers, server_offers_pb = _SERVER_OFFERS.value, _SERVER_OFFERS.message
resource_read_request, resource_read_request_pb = _RESOURCE_READ.value, _RESOURCE_READ.message
prompt_request, prompt_request_pb = _PROMPT_REQUEST.value, _PROMPT_REQUEST.message
feature_reply, feature_reply_pb = _FEATURE_REPLY.value, _FEATURE_REPLY.message


def feature_kind(value: int) -> t.FeatureKind:
    """The kind of a ``FeatureKind`` number.

    Raises:
        ValueError: unspecified, or a kind this side does not know.
    """
    return t.FeatureKind(_enum_name(mcp_pool_pb2.FeatureKind, value, _KIND_PREFIX))


def feature_kind_pb(kind: t.FeatureKind) -> Any:
    return _enum_value(mcp_pool_pb2.FeatureKind, kind.value, _KIND_PREFIX)


def server_feature(m: mcp_pool_pb2.ServerFeature) -> t.ServerFeature:
    return _SERVER_FEATURE.value(m, kind=feature_kind(m.kind))


def server_feature_pb(x: t.ServerFeature) -> mcp_pool_pb2.ServerFeature:
    return _SERVER_FEATURE.message(x, kind=feature_kind_pb(x.kind))


def _known_features(ms: Iterable[mcp_pool_pb2.ServerFeature]) -> tuple[t.ServerFeature, ...]:
    # A kind a newer pool added is skipped, not misread.
    known = {feature_kind_pb(k) for k in t.FeatureKind}
    return tuple(server_feature(m) for m in ms if m.kind in known)


def feature_list(m: mcp_pool_pb2.ListFeaturesResponse) -> t.FeatureList:
    return _FEATURE_LIST.value(
        m,
        features=_known_features(m.features),
        shard=shard_info(m.shard),
        offers=tuple(server_offers(o) for o in m.offers),
    )


def feature_list_pb(x: t.FeatureList) -> mcp_pool_pb2.ListFeaturesResponse:
    return _FEATURE_LIST.message(
        x,
        features=[server_feature_pb(f) for f in x.features],
        shard=shard_info_pb(x.shard),
        offers=[server_offers_pb(o) for o in x.offers],
    )


def feature_snapshot(m: mcp_pool_pb2.WatchFeaturesResponse) -> t.FeatureSnapshot:
    known = {feature_kind_pb(k) for k in t.FeatureKind}
    return _FEATURE_SNAPSHOT.value(
        m,
        features=_known_features(m.features),
        offers=tuple(server_offers(o) for o in m.offers),
        changed_kinds=tuple(feature_kind(k) for k in m.changed_kinds if k in known),
        shard=shard_info(m.shard),
    )


def feature_snapshot_pb(x: t.FeatureSnapshot) -> mcp_pool_pb2.WatchFeaturesResponse:
    return _FEATURE_SNAPSHOT.message(
        x,
        features=[server_feature_pb(f) for f in x.features],
        offers=[server_offers_pb(o) for o in x.offers],
        changed_kinds=[feature_kind_pb(k) for k in x.changed_kinds],
        shard=shard_info_pb(x.shard),
    )


def completion_request(m: mcp_pool_pb2.CompleteRequest) -> t.CompletionRequest:
    """Raises ValueError: no (known) reference kind."""
    return _COMPLETION_REQUEST.value(m, ref_kind=feature_kind(m.ref_kind))


def completion_request_pb(x: t.CompletionRequest) -> mcp_pool_pb2.CompleteRequest:
    return _COMPLETION_REQUEST.message(x, ref_kind=feature_kind_pb(x.ref_kind))


# --- Discovery ----------------------------------------------------------------------------------


def surface(name: str) -> int:
    """The ``ToolSurface`` value of a :class:`~toolscout.client.types.ToolSurface` (or its name;
    ``""`` = the server's default).

    Raises:
        ValueError: any other name.
    """
    known = t.ToolSurface.parse(name)
    if not known:
        return discovery_pb2.TOOL_SURFACE_UNSPECIFIED
    value: int = discovery_pb2.ToolSurface.Value(f"TOOL_SURFACE_{known.upper()}")
    return value


def _surface_of(value: int) -> t.ToolSurface | Literal[""]:
    # TOOL_SURFACE_STABLE -> ToolSurface.STABLE; unspecified, or a number this side does not know
    # (a newer peer), -> "" (the default).
    name = _enum_name(discovery_pb2.ToolSurface, value, "TOOL_SURFACE_") if value else ""
    return t.ToolSurface(name) if name in _SURFACES else ""


def _deferral_of(name: str) -> t.Deferral | Literal[""]:
    # The proto carries the deferral mode as its lowercase name; one this side does not know -> "".
    return t.Deferral(name) if name in _DEFERRALS else ""


_SURFACES = frozenset(s.value for s in t.ToolSurface)
_DEFERRALS = frozenset(d.value for d in t.Deferral)


def toolset_fields(ref: t.ToolsetRef) -> dict[str, str]:
    """The request fields naming a toolset (``toolset``, or the inline filter's ``toolset_json``)."""
    return {"toolset": ref.name, "toolset_json": ref.filter_json}


def toolset_of(m: Any) -> t.ToolsetRef:
    """The toolset a request names, as sent (a receiver validates it: both set is an error)."""
    return t.ToolsetRef(name=m.toolset, filter_json=m.toolset_json)


_PLAN_REQUEST = _Alike(t.PlanRequest, discovery_pb2.PlanToolsRequest, "toolset", "surface")
_TOOL_PLAN = _Alike(
    t.ToolPlan,
    discovery_pb2.PlanToolsResponse,
    *(
        "loaded_tools",
        "search_tool",
        "manifest_placement",
        "tokens",
        "deferred_tools",
        "call_tool",
        "surface",
        "read_result_tool",
        "found_tools",
    ),
)
_SEARCH_REQUEST = _Alike(t.SearchRequest, discovery_pb2.SearchToolsRequest, "toolset", "surface")
_TOOL_MATCH = _Alike(t.ToolMatch, discovery_pb2.ToolMatch, "tool")
_SEARCH_RESULT = _Alike(
    t.SearchResult, discovery_pb2.SearchToolsResponse, "mode", "matches", "newly_loaded", "not_found", "plan"
)
_MANIFEST = _Alike(t.Manifest, discovery_pb2.GetManifestResponse, "servers")
_SERVER_TOKENS = _Alike(t.ServerTokens, discovery_pb2.ServerTokens)


def plan_request(m: discovery_pb2.PlanToolsRequest) -> t.PlanRequest:
    return _PLAN_REQUEST.value(m, toolset=toolset_of(m), surface=_surface_of(m.surface))


def plan_request_pb(x: t.PlanRequest) -> discovery_pb2.PlanToolsRequest:
    return _PLAN_REQUEST.message(x, **toolset_fields(x.toolset), surface=surface(x.surface))


def _tool_or_none(m: Any, name: str) -> t.Tool | None:
    return tool(getattr(m, name)) if m.HasField(name) else None


def _tool_pb_or_none(x: t.Tool | None) -> common_pb2.Tool | None:
    return tool_pb(x) if x is not None else None


def tool_plan(m: discovery_pb2.PlanToolsResponse) -> t.ToolPlan:
    return _TOOL_PLAN.value(
        m,
        loaded_tools=tools(m.loaded_tools),
        search_tool=_tool_or_none(m, "search_tool"),
        manifest_placement=_enum_name(
            discovery_pb2.ManifestPlacement, m.manifest_placement, "MANIFEST_PLACEMENT_"
        ),
        tokens=token_accounting(m.tokens),
        deferred_tools=tools(m.deferred_tools),
        call_tool=_tool_or_none(m, "call_tool"),
        surface=_surface_of(m.surface) or t.ToolSurface.APPEND,
        read_result_tool=_tool_or_none(m, "read_result_tool"),
        found_tools=tools(m.found_tools),
    )


def tool_plan_pb(x: t.ToolPlan) -> discovery_pb2.PlanToolsResponse:
    return _TOOL_PLAN.message(
        x,
        loaded_tools=tools_pb(x.loaded_tools),
        search_tool=_tool_pb_or_none(x.search_tool),
        manifest_placement=_enum_value(
            discovery_pb2.ManifestPlacement, x.manifest_placement, "MANIFEST_PLACEMENT_"
        ),
        tokens=token_accounting_pb(x.tokens),
        deferred_tools=tools_pb(x.deferred_tools),
        call_tool=_tool_pb_or_none(x.call_tool),
        surface=surface(x.surface),
        read_result_tool=_tool_pb_or_none(x.read_result_tool),
        found_tools=tools_pb(x.found_tools),
    )


def watch_plan(m: discovery_pb2.WatchPlanResponse) -> t.ToolPlan:
    return tool_plan(m.plan)


def search_request(m: discovery_pb2.SearchToolsRequest) -> t.SearchRequest:
    return _SEARCH_REQUEST.value(m, toolset=toolset_of(m), surface=_surface_of(m.surface))


def search_request_pb(x: t.SearchRequest) -> discovery_pb2.SearchToolsRequest:
    return _SEARCH_REQUEST.message(x, **toolset_fields(x.toolset), surface=surface(x.surface))


def _tool_match(m: discovery_pb2.ToolMatch) -> t.ToolMatch:
    # bm25_score and similarity are optional: unset (a ranking without them) reads as None.
    return _TOOL_MATCH.value(
        m,
        tool=tool(m.tool),
        bm25_score=m.bm25_score if m.HasField("bm25_score") else None,
        similarity=m.similarity if m.HasField("similarity") else None,
    )


def search_result(m: discovery_pb2.SearchToolsResponse) -> t.SearchResult:
    matches = tuple(_tool_match(x) for x in m.matches)
    # With include_plan the newly loaded definitions are not sent twice: they are the matches
    # that were not loaded already (as they always are).
    newly = tools(m.newly_loaded) or tuple(x.tool for x in matches if not x.already_loaded)
    return _SEARCH_RESULT.value(
        m,
        mode=_enum_name(discovery_pb2.SearchMode, m.mode, "SEARCH_MODE_"),
        matches=matches,
        newly_loaded=newly,
        not_found=tuple(t.NameSuggestion(name=n.name, closest=tuple(n.closest)) for n in m.not_found),
        plan=tool_plan(m.plan) if m.HasField("plan") else None,
    )


def search_result_pb(x: t.SearchResult) -> discovery_pb2.SearchToolsResponse:
    return _SEARCH_RESULT.message(
        x,
        mode=_enum_value(discovery_pb2.SearchMode, x.mode, "SEARCH_MODE_"),
        matches=[_TOOL_MATCH.message(m, tool=tool_pb(m.tool)) for m in x.matches],
        # See SearchToolsResponse.newly_loaded: with a plan they would travel twice.
        newly_loaded=tools_pb(x.newly_loaded) if x.plan is None else [],
        not_found=[discovery_pb2.NameSuggestion(name=s.name, closest=s.closest) for s in x.not_found],
        plan=tool_plan_pb(x.plan) if x.plan is not None else None,
    )


def manifest_request_pb(toolset: t.ToolsetRef, provider: str) -> discovery_pb2.GetManifestRequest:
    return discovery_pb2.GetManifestRequest(**toolset_fields(toolset), provider=provider)


def manifest(m: discovery_pb2.GetManifestResponse) -> t.Manifest:
    return _MANIFEST.value(m, servers=tuple(_SERVER_TOKENS.value(s) for s in m.servers))


def manifest_pb(x: t.Manifest) -> discovery_pb2.GetManifestResponse:
    return _MANIFEST.message(x, servers=[_SERVER_TOKENS.message(s) for s in x.servers])


# --- Orchestrator -------------------------------------------------------------------------------

_TOOL_CALL = _Alike(t.ToolCall, orchestrator_pb2.ToolCall)
_CHAT_MESSAGE = _Alike(t.ChatMessage, orchestrator_pb2.Message, "tool_calls", "attachments", "loaded_tools")
_TOKEN_USAGE = _Alike(t.TokenUsage, orchestrator_pb2.TokenUsage)
_TOOL_CALL_COUNT = _Alike(t.ToolCallCount, orchestrator_pb2.ToolCallCount)
_DISCOVERY_STATS = _Alike(t.DiscoveryStats, orchestrator_pb2.DiscoveryStats, "deferral")
_RESULT_TOKENS = _Alike(t.ResultTokens, orchestrator_pb2.ResultTokens)
_CHAT_STATS = _Alike(
    t.ChatStats, orchestrator_pb2.ChatStats, "usage", "tool_calls", "discovery", "result_tokens"
)
_CHAT_RESULT = _Alike(t.ChatResult, orchestrator_pb2.ChatResponse, "messages", "stats", "stop_reason")
_TOOL_CALL_FINISHED = _Alike(t.ToolCallFinished, orchestrator_pb2.ToolCallFinished, "call")
_MODEL_INFO = _Alike(t.ModelInfo, orchestrator_pb2.ModelInfo, "deferral")
_TOOLSET_SERVER = _Alike(t.ToolsetServer, orchestrator_pb2.ToolsetServer)
_TOOLSET_INFO = _Alike(t.ToolsetInfo, orchestrator_pb2.ToolsetInfo, "servers")

tool_call = _TOOL_CALL.value
tool_call_pb = _TOOL_CALL.message
token_usage = _TOKEN_USAGE.value
token_usage_pb = _TOKEN_USAGE.message


def model_info(m: orchestrator_pb2.ModelInfo) -> t.ModelInfo:
    return _MODEL_INFO.value(m, deferral=_deferral_of(m.deferral))


def model_info_pb(x: t.ModelInfo) -> orchestrator_pb2.ModelInfo:
    return _MODEL_INFO.message(x, deferral=x.deferral)


def chat_message(m: orchestrator_pb2.Message) -> t.ChatMessage:
    return _CHAT_MESSAGE.value(
        m,
        tool_calls=tuple(tool_call(c) for c in m.tool_calls),
        attachments=tuple(content_block(b) for b in m.attachments),
        loaded_tools=tuple(m.loaded_tools.names) if m.HasField("loaded_tools") else None,
    )


def chat_message_pb(msg: t.ChatMessage) -> orchestrator_pb2.Message:
    return _CHAT_MESSAGE.message(
        msg,
        tool_calls=[tool_call_pb(c) for c in msg.tool_calls],
        attachments=[content_block_pb(b) for b in msg.attachments],
        loaded_tools=None
        if msg.loaded_tools is None
        else orchestrator_pb2.LoadedTools(names=msg.loaded_tools),
    )


def chat_stats(s: orchestrator_pb2.ChatStats) -> t.ChatStats:
    return _CHAT_STATS.value(
        s,
        usage=token_usage(s.usage),
        tool_calls=tuple(_TOOL_CALL_COUNT.value(c) for c in s.tool_calls),
        discovery=_DISCOVERY_STATS.value(s.discovery, deferral=_deferral_of(s.discovery.deferral)),
        result_tokens=tuple(_RESULT_TOKENS.value(r) for r in s.result_tokens),
    )


def chat_stats_pb(x: t.ChatStats) -> orchestrator_pb2.ChatStats:
    return _CHAT_STATS.message(
        x,
        usage=token_usage_pb(x.usage),
        tool_calls=[_TOOL_CALL_COUNT.message(c) for c in x.tool_calls],
        discovery=_DISCOVERY_STATS.message(x.discovery, deferral=x.discovery.deferral),
        result_tokens=[_RESULT_TOKENS.message(r) for r in x.result_tokens],
    )


def chat_result(m: orchestrator_pb2.ChatResponse) -> t.ChatResult:
    return _CHAT_RESULT.value(
        m,
        messages=tuple(chat_message(x) for x in m.messages),
        stats=chat_stats(m.stats),
        stop_reason=_enum_name(orchestrator_pb2.StopReason, m.stop_reason, "STOP_REASON_"),
    )


def chat_result_pb(x: t.ChatResult) -> orchestrator_pb2.ChatResponse:
    return _CHAT_RESULT.message(
        x,
        messages=[chat_message_pb(m) for m in x.messages],
        stats=chat_stats_pb(x.stats),
        stop_reason=_enum_value(orchestrator_pb2.StopReason, x.stop_reason, "STOP_REASON_"),
    )


_EVENTS: dict[str, Callable[[orchestrator_pb2.ChatEvent], t.ChatEvent]] = {
    "text_delta": lambda m: t.TextDelta(text=m.text_delta.text),
    "reasoning_delta": lambda m: t.ReasoningDelta(text=m.reasoning_delta.text),
    "assistant_message": lambda m: t.AssistantMessage(message=chat_message(m.assistant_message)),
    "tool_call_started": lambda m: t.ToolCallStarted(
        call=tool_call(m.tool_call_started.call), server=m.tool_call_started.server
    ),
    "tool_call_finished": lambda m: _TOOL_CALL_FINISHED.value(
        m.tool_call_finished, call=tool_call(m.tool_call_finished.call)
    ),
    "tools_discovered": lambda m: t.ToolsDiscovered(tools=tuple(m.tools_discovered.tools)),
    "usage": lambda m: t.UsageUpdate(usage=token_usage(m.usage)),
    "final": lambda m: t.ChatFinished(result=chat_result(m.final)),
}


def chat_event(m: orchestrator_pb2.ChatEvent) -> t.ChatEvent | None:
    """The typed event, or ``None`` for an event kind this client does not know (a newer server)."""
    kind = m.WhichOneof("event")
    convert = _EVENTS.get(kind) if kind else None
    return convert(m) if convert else None


def chat_event_pb(e: t.ChatEvent) -> orchestrator_pb2.ChatEvent:
    pb = orchestrator_pb2
    event: dict[str, Any]
    match e:
        case t.TextDelta():
            event = {"text_delta": pb.TextDelta(text=e.text)}
        case t.ReasoningDelta():
            event = {"reasoning_delta": pb.ReasoningDelta(text=e.text)}
        case t.AssistantMessage():
            event = {"assistant_message": chat_message_pb(e.message)}
        case t.ToolCallStarted():
            event = {"tool_call_started": pb.ToolCallStarted(call=tool_call_pb(e.call), server=e.server)}
        case t.ToolCallFinished():
            event = {"tool_call_finished": _TOOL_CALL_FINISHED.message(e, call=tool_call_pb(e.call))}
        case t.ToolsDiscovered():
            event = {"tools_discovered": pb.ToolsDiscovered(tools=e.tools)}
        case t.UsageUpdate():
            event = {"usage": token_usage_pb(e.usage)}
        case t.ChatFinished():
            event = {"final": chat_result_pb(e.result)}
    return pb.ChatEvent(**event)


def chat_request(
    messages: str | Sequence[t.ChatMessage], model: str, fields: t.ChatFields
) -> orchestrator_pb2.ChatRequest:
    """The ``ChatRequest`` of ``chat`` / ``stream_chat`` (``messages`` may be one user message)."""
    if isinstance(messages, str):
        messages = [t.ChatMessage.user(messages)]
    return orchestrator_pb2.ChatRequest(
        messages=[chat_message_pb(x) for x in messages],
        model=model,
        system=fields.get("system", ""),
        **toolset_fields(toolset_ref(fields.get("toolset", ""), fields, stacklevel=4)),
        meta_json=t.json_object_text(fields.get("meta")),
        discovered_tools=list(fields.get("discovered_tools", ())),
        max_iterations=fields.get("max_iterations", 0),
        tool_result_format=fields.get("tool_result_format", ""),
        conversation_id=fields.get("conversation_id", ""),
    )


def toolset_info(m: orchestrator_pb2.ToolsetInfo) -> t.ToolsetInfo:
    return _TOOLSET_INFO.value(m, servers=tuple(_TOOLSET_SERVER.value(s) for s in m.servers))


def toolset_info_pb(x: t.ToolsetInfo) -> orchestrator_pb2.ToolsetInfo:
    return _TOOLSET_INFO.message(x, servers=[_TOOLSET_SERVER.message(s) for s in x.servers])
