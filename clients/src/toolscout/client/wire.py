"""Protobuf messages ⇄ the values in :mod:`toolscout.client.types`, in both directions.

The one converter between the wire and the shared vocabulary: the clients use it to send requests
and read answers, and every toolscout service's servicer uses it to read requests and answer, so
a field is mapped in one place. ``x(message)`` reads a value from its message, ``x_pb(value)``
writes it. Enums travel as lowercase names (``"ready"``); a number this side does not know (a
newer peer) keeps its number.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

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


# --- common -------------------------------------------------------------------------------------


def tool(m: common_pb2.Tool) -> t.Tool:
    return t.Tool(
        server=m.server,
        name=m.name,
        llm_name=m.llm_name,
        title=m.title,
        description=m.description,
        input_schema_json=m.input_schema_json,
        output_schema_json=m.output_schema_json,
        annotations_json=m.annotations_json,
        available=m.available,
    )


def tools(ms: Iterable[common_pb2.Tool]) -> tuple[t.Tool, ...]:
    return tuple(tool(m) for m in ms)


def tool_pb(x: t.Tool) -> common_pb2.Tool:
    return common_pb2.Tool(
        server=x.server,
        name=x.name,
        llm_name=x.llm_name,
        title=x.title,
        description=x.description,
        input_schema_json=x.input_schema_json,
        output_schema_json=x.output_schema_json,
        annotations_json=x.annotations_json,
        available=x.available,
    )


def tools_pb(xs: Iterable[t.Tool]) -> list[common_pb2.Tool]:
    return [tool_pb(x) for x in xs]


def content_block(m: common_pb2.ContentBlock) -> t.ContentBlock:
    return t.ContentBlock(
        type=m.type,
        text=m.text,
        data=m.data,
        mime_type=m.mime_type,
        uri=m.uri,
        name=m.name,
        raw_json=m.raw_json,
    )


def content_block_pb(b: t.ContentBlock) -> common_pb2.ContentBlock:
    return common_pb2.ContentBlock(
        type=b.type,
        text=b.text,
        data=b.data,
        mime_type=b.mime_type,
        uri=b.uri,
        name=b.name,
        raw_json=b.raw_json,
    )


def token_accounting(m: common_pb2.TokenAccounting) -> t.TokenAccounting:
    return t.TokenAccounting(
        all_definitions_tokens=m.all_definitions_tokens,
        sent_tokens=m.sent_tokens,
        saved_tokens=m.saved_tokens,
        encoding=m.encoding,
        estimate=m.estimate,
    )


def token_accounting_pb(x: t.TokenAccounting) -> common_pb2.TokenAccounting:
    return common_pb2.TokenAccounting(
        all_definitions_tokens=x.all_definitions_tokens,
        sent_tokens=x.sent_tokens,
        saved_tokens=x.saved_tokens,
        encoding=x.encoding,
        estimate=x.estimate,
    )


# --- McpPool ------------------------------------------------------------------------------------

# ServerStatus fields that travel as they are (state, shards and placement are converted).
_STATUS_FIELDS = (
    "name",
    "transport",
    "tool_count",
    "restarts",
    "last_error",
    "state_since_unix",
    "defer_loading",
    "health_service",
    "server_info",
    "next_retry_unix",
    "protocol_version",
    "tool_cache_ttl_seconds",
    "change_notifications",
    "serialize_writes",
    "serialized_tools",
    "unannotated_tools",
)


def server_status(m: mcp_pool_pb2.ServerStatus) -> t.ServerStatus:
    return t.ServerStatus(
        state=_enum_name(mcp_pool_pb2.ServerState, m.state, "SERVER_STATE_"),
        shards=tuple(m.shards),
        placement=m.placement or "owner",
        **{f: getattr(m, f) for f in _STATUS_FIELDS},
    )


def server_status_pb(x: t.ServerStatus) -> mcp_pool_pb2.ServerStatus:
    return mcp_pool_pb2.ServerStatus(
        state=_enum_value(mcp_pool_pb2.ServerState, x.state, "SERVER_STATE_"),
        shards=list(x.shards),
        placement=x.placement,
        **{f: getattr(x, f) for f in _STATUS_FIELDS},
    )


def shard_info(m: mcp_pool_pb2.ShardInfo) -> t.ShardInfo:
    # An older pool sends no shard: it is the only one.
    return t.ShardInfo(index=m.index, count=m.count or 1)


def shard_info_pb(x: t.ShardInfo) -> mcp_pool_pb2.ShardInfo:
    return mcp_pool_pb2.ShardInfo(index=x.index, count=x.count)


def tool_catalog(m: mcp_pool_pb2.ListToolsResponse) -> t.ToolCatalog:
    return t.ToolCatalog(tools=tools(m.tools), catalog_version=m.catalog_version, shard=shard_info(m.shard))


def tool_catalog_pb(x: t.ToolCatalog) -> mcp_pool_pb2.ListToolsResponse:
    return mcp_pool_pb2.ListToolsResponse(
        tools=tools_pb(x.tools), catalog_version=x.catalog_version, shard=shard_info_pb(x.shard)
    )


def catalog_snapshot(m: mcp_pool_pb2.WatchCatalogResponse) -> t.CatalogSnapshot:
    return t.CatalogSnapshot(
        catalog_version=m.catalog_version,
        tools=tools(m.tools),
        changed_servers=tuple(m.changed_servers),
        shard=shard_info(m.shard),
    )


def catalog_snapshot_pb(x: t.CatalogSnapshot) -> mcp_pool_pb2.WatchCatalogResponse:
    return mcp_pool_pb2.WatchCatalogResponse(
        catalog_version=x.catalog_version,
        tools=tools_pb(x.tools),
        changed_servers=list(x.changed_servers),
        shard=shard_info_pb(x.shard),
    )


def call_tool_result(m: mcp_pool_pb2.CallToolResponse) -> t.CallToolResult:
    return t.CallToolResult(
        content=tuple(content_block(b) for b in m.content),
        structured_content_json=m.structured_content_json,
        is_error=m.is_error,
        truncated=m.truncated,
        server=m.server,
        tool=m.tool,
        duration_seconds=m.duration_seconds,
    )


def call_tool_result_pb(x: t.CallToolResult) -> mcp_pool_pb2.CallToolResponse:
    return mcp_pool_pb2.CallToolResponse(
        content=[content_block_pb(b) for b in x.content],
        structured_content_json=x.structured_content_json,
        is_error=x.is_error,
        truncated=x.truncated,
        server=x.server,
        tool=x.tool,
        duration_seconds=x.duration_seconds,
    )


def call_request(m: mcp_pool_pb2.CallToolRequest) -> t.CallRequest:
    return t.CallRequest(
        llm_name=m.llm_name,
        server=m.server,
        tool=m.tool,
        arguments_json=m.arguments_json,
        meta_json=m.meta_json,
        timeout_seconds=m.timeout_seconds,
    )


def call_request_pb(x: t.CallRequest) -> mcp_pool_pb2.CallToolRequest:
    return mcp_pool_pb2.CallToolRequest(
        llm_name=x.llm_name,
        server=x.server,
        tool=x.tool,
        arguments_json=x.arguments_json,
        meta_json=x.meta_json,
        timeout_seconds=x.timeout_seconds,
    )


# --- Discovery ----------------------------------------------------------------------------------


def surface(name: str) -> int:
    """The ``ToolSurface`` value of ``"append"`` / ``"stable"`` (``""`` = the server's default).

    Raises:
        ValueError: any other name.
    """
    if not name:
        return discovery_pb2.TOOL_SURFACE_UNSPECIFIED
    try:
        value: int = discovery_pb2.ToolSurface.Value(f"TOOL_SURFACE_{name.upper()}")
    except ValueError:
        raise ValueError(f"unknown tool surface {name!r} (append, stable)") from None
    return value


def _surface_name(value: int) -> str:
    return _enum_name(discovery_pb2.ToolSurface, value, "TOOL_SURFACE_") if value else ""


def toolset_fields(ref: t.ToolsetRef) -> dict[str, str]:
    """The request fields naming a toolset (``toolset``, or the inline filter's ``toolset_json``)."""
    return {"toolset": ref.name, "toolset_json": ref.filter_json}


def toolset_of(m: Any) -> t.ToolsetRef:
    """The toolset a request names, as sent (a receiver validates it: both set is an error)."""
    return t.ToolsetRef(name=m.toolset, filter_json=m.toolset_json)


def plan_request(m: discovery_pb2.PlanToolsRequest) -> t.PlanRequest:
    return t.PlanRequest(
        toolset=toolset_of(m),
        discovered_tools=tuple(m.discovered_tools),
        provider=m.provider,
        include_deferred_names=m.include_deferred_names,
        include_deferred_tools=m.include_deferred_tools,
        surface=_surface_name(m.surface),
    )


def plan_request_pb(x: t.PlanRequest) -> discovery_pb2.PlanToolsRequest:
    return discovery_pb2.PlanToolsRequest(
        **toolset_fields(x.toolset),
        discovered_tools=list(x.discovered_tools),
        provider=x.provider,
        include_deferred_names=x.include_deferred_names,
        include_deferred_tools=x.include_deferred_tools,
        surface=surface(x.surface),  # type: ignore[arg-type]  # the generated enum type is an int
    )


def tool_plan(m: discovery_pb2.PlanToolsResponse) -> t.ToolPlan:
    return t.ToolPlan(
        loaded_tools=tools(m.loaded_tools),
        has_search_tool=m.has_search_tool,
        search_tool=tool(m.search_tool) if m.HasField("search_tool") else None,
        manifest=m.manifest,
        manifest_placement=_enum_name(
            discovery_pb2.ManifestPlacement, m.manifest_placement, "MANIFEST_PLACEMENT_"
        ),
        manifest_system_message=m.manifest_system_message,
        total_tools=m.total_tools,
        loaded_count=m.loaded_count,
        deferred_count=m.deferred_count,
        catalog_version=m.catalog_version,
        tokens=token_accounting(m.tokens),
        deferred_tool_names=tuple(m.deferred_tool_names),
        dropped_tools=tuple(m.dropped_tools),
        discovered_tools=tuple(m.discovered_tools),
        deferred_tools=tools(m.deferred_tools),
        call_tool=tool(m.call_tool) if m.HasField("call_tool") else None,
        surface=_surface_name(m.surface) or "append",
    )


def tool_plan_pb(x: t.ToolPlan) -> discovery_pb2.PlanToolsResponse:
    return discovery_pb2.PlanToolsResponse(
        loaded_tools=tools_pb(x.loaded_tools),
        has_search_tool=x.has_search_tool,
        search_tool=tool_pb(x.search_tool) if x.search_tool is not None else None,
        manifest=x.manifest,
        manifest_placement=_enum_value(
            discovery_pb2.ManifestPlacement, x.manifest_placement, "MANIFEST_PLACEMENT_"
        ),
        manifest_system_message=x.manifest_system_message,
        total_tools=x.total_tools,
        loaded_count=x.loaded_count,
        deferred_count=x.deferred_count,
        catalog_version=x.catalog_version,
        tokens=token_accounting_pb(x.tokens),
        deferred_tool_names=list(x.deferred_tool_names),
        dropped_tools=list(x.dropped_tools),
        discovered_tools=list(x.discovered_tools),
        deferred_tools=tools_pb(x.deferred_tools),
        call_tool=tool_pb(x.call_tool) if x.call_tool is not None else None,
        surface=surface(x.surface or "append"),  # type: ignore[arg-type]  # the generated enum type is an int
    )


def watch_plan(m: discovery_pb2.WatchPlanResponse) -> t.ToolPlan:
    return tool_plan(m.plan)


def search_request(m: discovery_pb2.SearchToolsRequest) -> t.SearchRequest:
    return t.SearchRequest(
        query=m.query,
        toolset=toolset_of(m),
        server_name=m.server_name,
        tool_names=tuple(m.tool_names),
        arguments_json=m.arguments_json,
        loaded_tools=tuple(m.loaded_tools),
        max_results=m.max_results,
        offset=m.offset,
        include_plan=m.include_plan,
        discovered_tools=tuple(m.discovered_tools),
        provider=m.provider,
        compact_text=m.compact_text,
        surface=_surface_name(m.surface),
    )


def search_request_pb(x: t.SearchRequest) -> discovery_pb2.SearchToolsRequest:
    return discovery_pb2.SearchToolsRequest(
        **toolset_fields(x.toolset),
        query=x.query,
        server_name=x.server_name,
        tool_names=list(x.tool_names),
        arguments_json=x.arguments_json,
        loaded_tools=list(x.loaded_tools),
        max_results=x.max_results,
        offset=x.offset,
        include_plan=x.include_plan,
        discovered_tools=list(x.discovered_tools),
        provider=x.provider,
        compact_text=x.compact_text,
        surface=surface(x.surface),  # type: ignore[arg-type]  # the generated enum type is an int
    )


def search_result(m: discovery_pb2.SearchToolsResponse) -> t.SearchResult:
    matches = tuple(
        t.ToolMatch(
            tool=tool(x.tool),
            already_loaded=x.already_loaded,
            score=x.score,
            bm25_score=x.bm25_score if x.HasField("bm25_score") else None,
            similarity=x.similarity if x.HasField("similarity") else None,
            exact_name=x.exact_name,
        )
        for x in m.matches
    )
    # With include_plan the newly loaded definitions are not sent twice: they are the matches
    # that were not loaded already (as they always are).
    newly = tools(m.newly_loaded) or tuple(x.tool for x in matches if not x.already_loaded)
    return t.SearchResult(
        mode=_enum_name(discovery_pb2.SearchMode, m.mode, "SEARCH_MODE_"),
        matches=matches,
        newly_loaded=newly,
        result_text=m.result_text,
        not_found=tuple(t.NameSuggestion(name=n.name, closest=tuple(n.closest)) for n in m.not_found),
        total_matches=m.total_matches,
        catalog_version=m.catalog_version,
        plan=tool_plan(m.plan) if m.HasField("plan") else None,
        structured_content_json=m.structured_content_json,
        ranking=m.ranking,
    )


def search_result_pb(x: t.SearchResult) -> discovery_pb2.SearchToolsResponse:
    return discovery_pb2.SearchToolsResponse(
        mode=_enum_value(discovery_pb2.SearchMode, x.mode, "SEARCH_MODE_"),
        matches=[
            discovery_pb2.ToolMatch(
                tool=tool_pb(m.tool),
                already_loaded=m.already_loaded,
                score=m.score,
                bm25_score=m.bm25_score,
                similarity=m.similarity,
                exact_name=m.exact_name,
            )
            for m in x.matches
        ],
        # See SearchToolsResponse.newly_loaded: with a plan they would travel twice.
        newly_loaded=tools_pb(x.newly_loaded) if x.plan is None else [],
        result_text=x.result_text,
        not_found=[discovery_pb2.NameSuggestion(name=s.name, closest=s.closest) for s in x.not_found],
        total_matches=x.total_matches,
        catalog_version=x.catalog_version,
        plan=tool_plan_pb(x.plan) if x.plan is not None else None,
        structured_content_json=x.structured_content_json,
        ranking=x.ranking,
    )


def manifest_request_pb(toolset: t.ToolsetRef, provider: str) -> discovery_pb2.GetManifestRequest:
    return discovery_pb2.GetManifestRequest(**toolset_fields(toolset), provider=provider)


_SERVER_TOKENS = ("server", "tools", "deferred_tools", "all_tokens", "loaded_tokens")


def manifest(m: discovery_pb2.GetManifestResponse) -> t.Manifest:
    return t.Manifest(
        manifest=m.manifest,
        tokens=m.tokens,
        budget_tokens=m.budget_tokens,
        deferred_servers=m.deferred_servers,
        deferred_tools=m.deferred_tools,
        catalog_version=m.catalog_version,
        servers=tuple(t.ServerTokens(**{f: getattr(x, f) for f in _SERVER_TOKENS}) for x in m.servers),
        encoding=m.encoding,
        estimate=m.estimate,
    )


def manifest_pb(x: t.Manifest) -> discovery_pb2.GetManifestResponse:
    return discovery_pb2.GetManifestResponse(
        manifest=x.manifest,
        tokens=x.tokens,
        budget_tokens=x.budget_tokens,
        deferred_servers=x.deferred_servers,
        deferred_tools=x.deferred_tools,
        catalog_version=x.catalog_version,
        servers=[discovery_pb2.ServerTokens(**{f: getattr(s, f) for f in _SERVER_TOKENS}) for s in x.servers],
        encoding=x.encoding,
        estimate=x.estimate,
    )


# --- Orchestrator -------------------------------------------------------------------------------


def tool_call(m: orchestrator_pb2.ToolCall) -> t.ToolCall:
    return t.ToolCall(id=m.id, name=m.name, arguments_json=m.arguments_json)


def tool_call_pb(x: t.ToolCall) -> orchestrator_pb2.ToolCall:
    return orchestrator_pb2.ToolCall(id=x.id, name=x.name, arguments_json=x.arguments_json)


# The fields a Message carries as they are (the rest are converted).
_MESSAGE_FIELDS = ("role", "content", "tool_call_id", "name", "reasoning", "is_error", "not_loaded")


def chat_message(m: orchestrator_pb2.Message) -> t.ChatMessage:
    return t.ChatMessage(
        **{f: getattr(m, f) for f in _MESSAGE_FIELDS},
        tool_calls=tuple(tool_call(c) for c in m.tool_calls),
        attachments=tuple(content_block(b) for b in m.attachments),
        loaded_tools=tuple(m.loaded_tools.names) if m.HasField("loaded_tools") else None,
        native_items_json=tuple(m.native_items_json),
    )


def chat_message_pb(msg: t.ChatMessage) -> orchestrator_pb2.Message:
    return orchestrator_pb2.Message(
        **{f: getattr(msg, f) for f in _MESSAGE_FIELDS},
        tool_calls=[tool_call_pb(c) for c in msg.tool_calls],
        attachments=[content_block_pb(b) for b in msg.attachments],
        loaded_tools=None
        if msg.loaded_tools is None
        else orchestrator_pb2.LoadedTools(names=msg.loaded_tools),
        native_items_json=list(msg.native_items_json),
    )


_USAGE = ("input_tokens", "output_tokens", "cached_input_tokens", "cache_write_input_tokens")
_DISCOVERY_STATS = (
    "search_calls",
    "tools_discovered",
    "definition_tokens_sent",
    "definition_tokens_all",
    "tokens_saved",
    "encoding",
    "estimate",
    "deferred_call_rejections",
    "deferral",
    "native_fallback_reason",
)


def token_usage(m: orchestrator_pb2.TokenUsage) -> t.TokenUsage:
    return t.TokenUsage(**{f: getattr(m, f) for f in _USAGE})


def token_usage_pb(x: t.TokenUsage) -> orchestrator_pb2.TokenUsage:
    return orchestrator_pb2.TokenUsage(**{f: getattr(x, f) for f in _USAGE})


def chat_stats(s: orchestrator_pb2.ChatStats) -> t.ChatStats:
    return t.ChatStats(
        usage=token_usage(s.usage),
        llm_calls=s.llm_calls,
        tool_calls=tuple(
            t.ToolCallCount(tool=c.tool, server=c.server, calls=c.calls, errors=c.errors)
            for c in s.tool_calls
        ),
        discovery=t.DiscoveryStats(**{f: getattr(s.discovery, f) for f in _DISCOVERY_STATS}),
        iterations=s.iterations,
        duration_seconds=s.duration_seconds,
    )


def chat_stats_pb(x: t.ChatStats) -> orchestrator_pb2.ChatStats:
    return orchestrator_pb2.ChatStats(
        usage=token_usage_pb(x.usage),
        llm_calls=x.llm_calls,
        tool_calls=[
            orchestrator_pb2.ToolCallCount(tool=c.tool, server=c.server, calls=c.calls, errors=c.errors)
            for c in x.tool_calls
        ],
        discovery=orchestrator_pb2.DiscoveryStats(**{f: getattr(x.discovery, f) for f in _DISCOVERY_STATS}),
        iterations=x.iterations,
        duration_seconds=x.duration_seconds,
    )


def chat_result(m: orchestrator_pb2.ChatResponse) -> t.ChatResult:
    return t.ChatResult(
        messages=tuple(chat_message(x) for x in m.messages),
        loaded_tools=tuple(m.loaded_tools),
        stats=chat_stats(m.stats),
        stop_reason=_enum_name(orchestrator_pb2.StopReason, m.stop_reason, "STOP_REASON_"),
        error=m.error,
        tools_disabled_fallback=m.tools_disabled_fallback,
        model=m.model,
    )


def chat_result_pb(x: t.ChatResult) -> orchestrator_pb2.ChatResponse:
    return orchestrator_pb2.ChatResponse(
        messages=[chat_message_pb(m) for m in x.messages],
        loaded_tools=list(x.loaded_tools),
        stats=chat_stats_pb(x.stats),
        stop_reason=_enum_value(orchestrator_pb2.StopReason, x.stop_reason, "STOP_REASON_"),
        error=x.error,
        tools_disabled_fallback=x.tools_disabled_fallback,
        model=x.model,
    )


def _tool_call_finished(f: orchestrator_pb2.ToolCallFinished) -> t.ToolCallFinished:
    return t.ToolCallFinished(
        call=tool_call(f.call),
        server=f.server,
        duration_seconds=f.duration_seconds,
        is_error=f.is_error,
        result_preview=f.result_preview,
    )


_EVENTS: dict[str, Callable[[orchestrator_pb2.ChatEvent], t.ChatEvent]] = {
    "text_delta": lambda m: t.TextDelta(text=m.text_delta.text),
    "reasoning_delta": lambda m: t.ReasoningDelta(text=m.reasoning_delta.text),
    "assistant_message": lambda m: t.AssistantMessage(message=chat_message(m.assistant_message)),
    "tool_call_started": lambda m: t.ToolCallStarted(
        call=tool_call(m.tool_call_started.call), server=m.tool_call_started.server
    ),
    "tool_call_finished": lambda m: _tool_call_finished(m.tool_call_finished),
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
            finished = pb.ToolCallFinished(
                call=tool_call_pb(e.call),
                server=e.server,
                duration_seconds=e.duration_seconds,
                is_error=e.is_error,
                result_preview=e.result_preview,
            )
            event = {"tool_call_finished": finished}
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
    )


_MODEL_INFO = (
    "name",
    "client",
    "provider",
    "model",
    "base_url",
    "template",
    "api",
    "deferral",
    "strict_tools",
)


def model_info(m: orchestrator_pb2.ModelInfo) -> t.ModelInfo:
    return t.ModelInfo(**{f: getattr(m, f) for f in _MODEL_INFO})


def model_info_pb(x: t.ModelInfo) -> orchestrator_pb2.ModelInfo:
    return orchestrator_pb2.ModelInfo(**{f: getattr(x, f) for f in _MODEL_INFO})


def toolset_info(m: orchestrator_pb2.ToolsetInfo) -> t.ToolsetInfo:
    return t.ToolsetInfo(
        name=m.name,
        description=m.description,
        servers=tuple(t.ToolsetServer(server=s.server, mode=s.mode, tools=tuple(s.tools)) for s in m.servers),
    )


def toolset_info_pb(x: t.ToolsetInfo) -> orchestrator_pb2.ToolsetInfo:
    return orchestrator_pb2.ToolsetInfo(
        name=x.name,
        description=x.description,
        servers=[
            orchestrator_pb2.ToolsetServer(server=s.server, mode=s.mode, tools=s.tools) for s in x.servers
        ],
    )
