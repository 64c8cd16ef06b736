"""Protobuf messages ⇄ the dataclasses in :mod:`toolscout.client.types` (and request builders).

Shared by the async and the sync clients so both return exactly the same values.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from toolscout.client import types as t
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


def json_object_text(value: Mapping[str, Any] | str | None, what: str) -> str:
    """A JSON object as wire text; a str is passed through for the server to validate."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(dict(value), ensure_ascii=False, separators=(",", ":"))


def toolset_fields(toolset: str | Mapping[str, Any], toolset_json: str = "") -> dict[str, str]:
    """The request fields naming a toolset: a configured name, or an inline filter (a mapping in
    the shape of a config ``tool_sets`` entry, or its JSON text), sent as ``toolset_json``."""
    if isinstance(toolset, str):
        return {"toolset": toolset, "toolset_json": toolset_json}
    if toolset_json:
        raise ValueError("give an inline toolset once: as a mapping in `toolset` or as `toolset_json`")
    return {"toolset": "", "toolset_json": json_object_text(toolset, "toolset")}


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


# --- McpPool ------------------------------------------------------------------------------------


def server_status(m: mcp_pool_pb2.ServerStatus) -> t.ServerStatus:
    return t.ServerStatus(
        name=m.name,
        transport=m.transport,
        state=_enum_name(mcp_pool_pb2.ServerState, m.state, "SERVER_STATE_"),
        tool_count=m.tool_count,
        restarts=m.restarts,
        last_error=m.last_error,
        state_since_unix=m.state_since_unix,
        defer_loading=m.defer_loading,
        health_service=m.health_service,
        server_info=m.server_info,
        next_retry_unix=m.next_retry_unix,
        protocol_version=m.protocol_version,
        shards=tuple(m.shards),
        placement=m.placement or "owner",
        tool_cache_ttl_seconds=m.tool_cache_ttl_seconds,
        change_notifications=m.change_notifications,
        serialize_writes=m.serialize_writes,
        serialized_tools=m.serialized_tools,
        unannotated_tools=m.unannotated_tools,
    )


def shard_info(m: mcp_pool_pb2.ShardInfo) -> t.ShardInfo:
    # An older pool sends no shard: it is the only one.
    return t.ShardInfo(index=m.index, count=m.count or 1)


def tool_catalog(m: mcp_pool_pb2.ListToolsResponse) -> t.ToolCatalog:
    return t.ToolCatalog(tools=tools(m.tools), catalog_version=m.catalog_version, shard=shard_info(m.shard))


def catalog_snapshot(m: mcp_pool_pb2.WatchCatalogResponse) -> t.CatalogSnapshot:
    return t.CatalogSnapshot(
        catalog_version=m.catalog_version,
        tools=tools(m.tools),
        changed_servers=tuple(m.changed_servers),
        shard=shard_info(m.shard),
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


def call_tool_request(
    name: str,
    arguments: Mapping[str, Any] | str | None,
    *,
    server: str,
    meta: Mapping[str, Any] | str | None,
    timeout_seconds: float,
) -> mcp_pool_pb2.CallToolRequest:
    # With a server the name is the tool's own name on it; otherwise it is the LLM-facing name.
    if server:
        req = mcp_pool_pb2.CallToolRequest(server=server, tool=name)
    else:
        req = mcp_pool_pb2.CallToolRequest(llm_name=name)
    req.arguments_json = json_object_text(arguments, "arguments")
    req.meta_json = json_object_text(meta, "meta")
    req.timeout_seconds = timeout_seconds
    return req


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


def plan_tools_request(
    toolset: str | Mapping[str, Any],
    toolset_json: str,
    *,
    discovered_tools: Sequence[str],
    provider: str,
    include_deferred_names: bool,
    include_deferred_tools: bool,
    surface_name: str,
) -> discovery_pb2.PlanToolsRequest:
    return discovery_pb2.PlanToolsRequest(
        **toolset_fields(toolset, toolset_json),
        discovered_tools=list(discovered_tools),
        provider=provider,
        include_deferred_names=include_deferred_names,
        include_deferred_tools=include_deferred_tools,
        surface=surface(surface_name),  # type: ignore[arg-type]  # the generated enum type is an int
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
        surface=_enum_name(discovery_pb2.ToolSurface, m.surface, "TOOL_SURFACE_") if m.surface else "append",
    )


def watch_plan(m: discovery_pb2.WatchPlanResponse) -> t.ToolPlan:
    return tool_plan(m.plan)


def search_tools_request(
    query: str,
    *,
    toolset: str | Mapping[str, Any],
    server_name: str,
    tool_names: Sequence[str],
    arguments_json: str,
    loaded_tools: Sequence[str],
    max_results: int,
    offset: int,
    include_plan: bool,
    discovered_tools: Sequence[str],
    provider: str,
    compact_text: bool = False,
    toolset_json: str = "",
    surface_name: str = "",
) -> discovery_pb2.SearchToolsRequest:
    return discovery_pb2.SearchToolsRequest(
        **toolset_fields(toolset, toolset_json),
        query=query,
        server_name=server_name,
        tool_names=list(tool_names),
        arguments_json=arguments_json,
        loaded_tools=list(loaded_tools),
        max_results=max_results,
        offset=offset,
        include_plan=include_plan,
        discovered_tools=list(discovered_tools),
        provider=provider,
        compact_text=compact_text,
        surface=surface(surface_name),  # type: ignore[arg-type]  # the generated enum type is an int
    )


def search_result(m: discovery_pb2.SearchToolsResponse) -> t.SearchResult:
    return t.SearchResult(
        mode=_enum_name(discovery_pb2.SearchMode, m.mode, "SEARCH_MODE_"),
        matches=tuple(
            t.ToolMatch(
                tool=tool(x.tool),
                already_loaded=x.already_loaded,
                score=x.score,
                bm25_score=x.bm25_score if x.HasField("bm25_score") else None,
                similarity=x.similarity if x.HasField("similarity") else None,
                exact_name=x.exact_name,
            )
            for x in m.matches
        ),
        newly_loaded=tools(m.newly_loaded),
        result_text=m.result_text,
        not_found=tuple(t.NameSuggestion(name=n.name, closest=tuple(n.closest)) for n in m.not_found),
        total_matches=m.total_matches,
        catalog_version=m.catalog_version,
        plan=tool_plan(m.plan) if m.HasField("plan") else None,
        structured_content_json=m.structured_content_json,
        ranking=m.ranking,
    )


def manifest(m: discovery_pb2.GetManifestResponse) -> t.Manifest:
    return t.Manifest(
        manifest=m.manifest,
        tokens=m.tokens,
        budget_tokens=m.budget_tokens,
        deferred_servers=m.deferred_servers,
        deferred_tools=m.deferred_tools,
        catalog_version=m.catalog_version,
        servers=tuple(
            t.ServerTokens(
                server=x.server,
                tools=x.tools,
                deferred_tools=x.deferred_tools,
                all_tokens=x.all_tokens,
                loaded_tokens=x.loaded_tokens,
            )
            for x in m.servers
        ),
        encoding=m.encoding,
        estimate=m.estimate,
    )


# --- Orchestrator -------------------------------------------------------------------------------


def tool_call(m: orchestrator_pb2.ToolCall) -> t.ToolCall:
    return t.ToolCall(id=m.id, name=m.name, arguments_json=m.arguments_json)


def chat_message(m: orchestrator_pb2.Message) -> t.ChatMessage:
    return t.ChatMessage(
        role=m.role,
        content=m.content,
        tool_calls=tuple(tool_call(c) for c in m.tool_calls),
        tool_call_id=m.tool_call_id,
        name=m.name,
        reasoning=m.reasoning,
        attachments=tuple(content_block(b) for b in m.attachments),
        is_error=m.is_error,
        loaded_tools=tuple(m.loaded_tools.names) if m.HasField("loaded_tools") else None,
        native_items_json=tuple(m.native_items_json),
        not_loaded=m.not_loaded,
    )


def chat_message_pb(msg: t.ChatMessage) -> orchestrator_pb2.Message:
    loaded = None if msg.loaded_tools is None else orchestrator_pb2.LoadedTools(names=msg.loaded_tools)
    return orchestrator_pb2.Message(
        role=msg.role,
        content=msg.content,
        tool_calls=[
            orchestrator_pb2.ToolCall(id=c.id, name=c.name, arguments_json=c.arguments_json)
            for c in msg.tool_calls
        ],
        tool_call_id=msg.tool_call_id,
        name=msg.name,
        reasoning=msg.reasoning,
        attachments=[content_block_pb(b) for b in msg.attachments],
        is_error=msg.is_error,
        loaded_tools=loaded,
        native_items_json=list(msg.native_items_json),
        not_loaded=msg.not_loaded,
    )


def token_usage(m: orchestrator_pb2.TokenUsage) -> t.TokenUsage:
    return t.TokenUsage(
        input_tokens=m.input_tokens,
        output_tokens=m.output_tokens,
        cached_input_tokens=m.cached_input_tokens,
        cache_write_input_tokens=m.cache_write_input_tokens,
    )


def chat_result(m: orchestrator_pb2.ChatResponse) -> t.ChatResult:
    s = m.stats
    d = s.discovery
    return t.ChatResult(
        messages=tuple(chat_message(x) for x in m.messages),
        loaded_tools=tuple(m.loaded_tools),
        stats=t.ChatStats(
            usage=token_usage(s.usage),
            llm_calls=s.llm_calls,
            tool_calls=tuple(
                t.ToolCallCount(tool=c.tool, server=c.server, calls=c.calls, errors=c.errors)
                for c in s.tool_calls
            ),
            discovery=t.DiscoveryStats(
                search_calls=d.search_calls,
                tools_discovered=d.tools_discovered,
                definition_tokens_sent=d.definition_tokens_sent,
                definition_tokens_all=d.definition_tokens_all,
                tokens_saved=d.tokens_saved,
                encoding=d.encoding,
                estimate=d.estimate,
                deferred_call_rejections=d.deferred_call_rejections,
                deferral=d.deferral,
                native_fallback_reason=d.native_fallback_reason,
            ),
            iterations=s.iterations,
            duration_seconds=s.duration_seconds,
        ),
        stop_reason=_enum_name(orchestrator_pb2.StopReason, m.stop_reason, "STOP_REASON_"),
        error=m.error,
        tools_disabled_fallback=m.tools_disabled_fallback,
        model=m.model,
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


def chat_request(
    messages: str | Sequence[t.ChatMessage],
    *,
    model: str,
    system: str,
    toolset: str | Mapping[str, Any],
    meta: Mapping[str, Any] | str | None,
    discovered_tools: Sequence[str],
    max_iterations: int,
    tool_result_format: str,
    toolset_json: str = "",
) -> orchestrator_pb2.ChatRequest:
    if isinstance(messages, str):
        messages = [t.ChatMessage.user(messages)]
    return orchestrator_pb2.ChatRequest(
        messages=[chat_message_pb(x) for x in messages],
        model=model,
        system=system,
        **toolset_fields(toolset, toolset_json),
        meta_json=json_object_text(meta, "meta"),
        discovered_tools=list(discovered_tools),
        max_iterations=max_iterations,
        tool_result_format=tool_result_format,
    )


def model_info(m: orchestrator_pb2.ModelInfo) -> t.ModelInfo:
    return t.ModelInfo(
        name=m.name,
        client=m.client,
        provider=m.provider,
        model=m.model,
        base_url=m.base_url,
        template=m.template,
        api=m.api,
        deferral=m.deferral,
        strict_tools=m.strict_tools,
    )


def toolset_info(m: orchestrator_pb2.ToolsetInfo) -> t.ToolsetInfo:
    return t.ToolsetInfo(
        name=m.name,
        description=m.description,
        servers=tuple(t.ToolsetServer(server=s.server, mode=s.mode, tools=tuple(s.tools)) for s in m.servers),
    )
