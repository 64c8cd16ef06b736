"""The MCP side of the gateway: ``tools/list`` and ``tools/call`` on the SDK's lowlevel ``Server``.

One SDK ``Server`` per mode, all with the same handlers: the endpoint a request came to (toolset,
mode, tenant, session) travels in the HTTP request's scope, put there by the HTTP front
(:mod:`mcp_gateway_svc.front`). The gateway is a translator, like a servicer: an MCP request
becomes a call through the client library (discovery's ``SearchTools``, the pool's ``CallTool``)
and its answer an MCP result. Only tools are served; the gateway advertises no resources or
prompts (the pool does not carry them).
"""

from __future__ import annotations

import importlib.metadata
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.server import CacheHint, NotificationOptions, Server, ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.server.models import InitializationOptions
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from opentelemetry import trace
from toolscout.client import (
    CALL_TOOL_NAME,
    SEARCH_TOOL_NAME,
    AsyncDiscoveryClient,
    InvalidArgumentError,
    NotFoundError,
    SearchRequest,
    Tool,
    ToolscoutClientError,
)

from mcp_gateway_svc.calls import LoginAsker, ToolCaller, error_result, text_result
from mcp_gateway_svc.endpoints import Endpoint, modern_mode
from mcp_gateway_svc.errors import GatewayUnavailableError
from mcp_gateway_svc.metrics import GatewayMetrics
from mcp_gateway_svc.sessions import Session
from mcp_gateway_svc.tool_lists import listed_tools, mcp_tool, signature
from mcp_gateway_svc.user_login import base_url
from mcp_gateway_svc.views import ToolsetView
from toolscout_kit.arguments import call_tool_target
from toolscout_kit.logging import get_logger
from toolscout_kit.tracing import NO_TRACING, SpanKind, Tracing, exemplar, extract_context

__all__ = ["REQUEST_INFO_KEY", "McpHandlers", "RequestInfo"]

_log = get_logger(__name__)

# Where the HTTP front leaves the request's endpoint, tenant and session in the ASGI scope.
REQUEST_INFO_KEY = "toolscout.gateway"
# Seconds to look up the names closest to an unknown tool (a nicety: never holds up the answer long).
_CLOSEST_DEADLINE = 2.0
# A tools/list result may be cached this long by a 2026-07-28 client (changes are announced).
_LIST_TTL_MS = 30_000


@dataclass(frozen=True, slots=True)
class RequestInfo:
    endpoint: Endpoint
    # The name of the token's environment variable ("" without tokens): the tenant.
    principal: str
    # The handshake-era session the request belongs to (progressive and all endpoints).
    session: Session | None = None


@dataclass(frozen=True, slots=True)
class _ToolCall:
    """One ``tools/call`` request: the SDK's context, the endpoint and session it came through, the
    mode it is served in, the toolset view it is answered from and the caller's ``_meta``."""

    ctx: ServerRequestContext[Any, Any]
    info: RequestInfo
    mode: str
    view: ToolsetView
    meta: dict[str, Any] | None


def _info(ctx: ServerRequestContext[Any, Any]) -> RequestInfo:
    request = ctx.request
    info = getattr(request, "scope", {}).get(REQUEST_INFO_KEY) if request is not None else None
    if not isinstance(info, RequestInfo):
        # Only reachable if the SDK is served without the front: never expose anything then.
        raise MCPError(types.INTERNAL_ERROR, "this server is reached through its /mcp endpoints")
    return info


def _mode(info: RequestInfo, ctx: ServerRequestContext[Any, Any]) -> str:
    mode = info.endpoint.mode
    return modern_mode(mode) if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS else mode


async def _view(endpoint: Endpoint) -> ToolsetView:
    try:
        return await endpoint.current()
    except GatewayUnavailableError as err:
        raise MCPError(types.INTERNAL_ERROR, err.message) from None


def _asker(ctx: ServerRequestContext[Any, Any]) -> LoginAsker:
    """Where a login link goes besides the result: the gateway's base URL, and a URL-mode
    elicitation (2025-11-25) when the host declared that capability."""
    request = ctx.request
    scope = getattr(request, "scope", {}) if request is not None else {}
    url_mode = types.ClientCapabilities(
        elicitation=types.ElicitationCapability(url=types.UrlElicitationCapability())
    )
    can_elicit = ctx.request_id is not None and ctx.session.check_client_capability(url_mode)

    async def elicit(message: str, url: str, elicitation_id: str) -> None:
        await ctx.session.elicit_url(message, url, elicitation_id, related_request_id=ctx.request_id)

    return LoginAsker(base_url(scope), elicit if can_elicit else None)


class _GatewayServer(Server[Any]):
    """A lowlevel SDK server whose handshake advertises ``tools.listChanged`` when it can deliver it.

    The streamable-HTTP manager builds its ``InitializeResult`` from
    ``create_initialization_options()`` with no arguments, so the flag is this method's default.
    """

    announces_changes = False

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        options = notification_options or NotificationOptions(tools_changed=self.announces_changes)
        return super().create_initialization_options(options, experimental_capabilities, extensions)


class McpHandlers:
    """tools/list, tools/call and subscriptions/listen for every endpoint."""

    def __init__(
        self,
        discovery: AsyncDiscoveryClient,
        caller: ToolCaller,
        metrics: GatewayMetrics,
        *,
        private_lists: bool,
        tracing: Tracing = NO_TRACING,
    ) -> None:
        self._discovery = discovery
        self._caller = caller
        self._metrics = metrics
        self._tracing = tracing
        # With tokens, a list may be cached only within one authorization context.
        self._cache_scope: Any = "private" if private_lists else "public"

    def server(self, *, sessions: bool, discoverable: bool = True) -> Server[Any]:
        """An SDK server; ``sessions``: its legacy clients keep sessions (list_changed is delivered).

        ``discoverable`` False refuses ``server/discover`` (METHOD_NOT_FOUND), as a server of the
        handshake revisions does: a client negotiating its revision then opens a session with
        ``initialize``. Progressive mode needs that session to hold what its searches loaded.
        """
        server = _GatewayServer(
            "toolscout",
            version=_version(),
            cache_hints={"tools/list": CacheHint(ttl_ms=_LIST_TTL_MS, scope=self._cache_scope)},
            # The SDK would otherwise run tools/list on every 2026-07-28 tools/call to check
            # Mcp-Param-* headers against the tool's schema. The gateway declares no such headers
            # (arguments are checked against the tool's schema in call_tool), so there is nothing
            # to look up: a whole listing per call was most of a call's cost in "all" mode.
            get_tool_input_schema=_no_header_schema,
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            on_subscriptions_listen=self.listen,
        )
        server.announces_changes = sessions
        # After the SDK's own OpenTelemetry middleware, which makes a host's `_meta` trace context
        # current (its span records nothing: no global provider is installed).
        if self._tracing.enabled:
            server.middleware.append(self._trace)
        server.middleware.append(self._count)
        if not discoverable:
            server.add_request_handler("server/discover", types.RequestParams, _refuse_discover)
        return server

    # --- handlers --------------------------------------------------------------------------

    async def _trace(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """A SERVER span per MCP request (OpenTelemetry's MCP conventions), continuing the host's
        trace: from the request's ``_meta`` (current already), else its HTTP ``traceparent``."""
        if ctx.request_id is None:
            return await call_next(ctx)
        request = ctx.request
        parent = None
        if not trace.get_current_span().get_span_context().is_valid and request is not None:
            parent = extract_context(request.headers.items())
        name = ctx.params.get("name") if ctx.params else None
        target = name if isinstance(name, str) else None
        attributes = _request_attributes(ctx, target)
        with self._tracing.span(
            f"{ctx.method} {target}" if target else ctx.method,
            kind=SpanKind.SERVER,
            attributes=attributes,
            parent=parent,
        ) as span:
            if target is not None and ctx.params:
                self._tracing.content(span, "gen_ai.tool.call.arguments", ctx.params.get("arguments"))
            result = await call_next(ctx)
            if isinstance(result, types.CallToolResult) and result.is_error:
                span.set_attribute("error.type", "tool_error")
            return result

    async def _count(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.request_id is None:
            return await call_next(ctx)
        request = ctx.request
        info = getattr(request, "scope", {}).get(REQUEST_INFO_KEY) if request is not None else None
        mode = info.endpoint.mode if isinstance(info, RequestInfo) else "meta"
        outcome = "cancelled"
        try:
            result = await call_next(ctx)
            outcome = "ok"
            return result
        except Exception:
            outcome = "error"
            raise
        finally:
            self._metrics.request(ctx.method, mode, outcome)

    async def listen(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        return await _info(ctx).endpoint.listen(ctx, params)

    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        info = _info(ctx)
        mode = _mode(info, ctx)
        tools = await self._tools(info, mode)
        session = info.session
        if session is not None:
            session.listed = signature(tools)
            session.outbound = ctx.session
        return types.ListToolsResult(tools=[mcp_tool(t) for t in tools])

    async def _tools(self, info: RequestInfo, mode: str) -> list[Tool]:
        view = await _view(info.endpoint)
        if mode != "progressive":
            return listed_tools(view, mode)
        try:
            search = await info.endpoint.progressive_search_tool()
        except GatewayUnavailableError as err:
            raise MCPError(types.INTERNAL_ERROR, err.message) from None
        loaded = info.session.loaded if info.session is not None else []
        return listed_tools(view, mode, loaded, search)

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        info = _info(ctx)
        meta = dict(params.meta) if params.meta else None
        call = _ToolCall(ctx, info, _mode(info, ctx), await _view(info.endpoint), meta)
        if info.session is not None:
            info.session.outbound = ctx.session
        name = params.name
        arguments = params.arguments or {}
        if call.view.search_tool is not None and name == SEARCH_TOOL_NAME:
            return await self._search(call, arguments)
        if call.view.call_tool is not None and name == CALL_TOOL_NAME:
            return await self._call_through(call, arguments)
        return await self._call(call, name, arguments)

    # --- search_tools ----------------------------------------------------------------------

    async def _search(self, call: _ToolCall, arguments: Mapping[str, Any]) -> types.CallToolResult:
        ctx, info, mode = call.ctx, call.info, call.mode
        started = time.perf_counter()
        progressive = mode == "progressive"
        session = info.session
        try:
            request = SearchRequest(
                toolset=info.endpoint.toolset,
                arguments_json=json.dumps(arguments),
                loaded_tools=tuple(session.loaded) if progressive and session is not None else (),
                surface="append" if progressive else "stable",
            )
            result = await self._discovery.search(request)
        except (InvalidArgumentError, NotFoundError) as err:
            # Written for the model: what was wrong with its arguments, or the valid server names.
            return error_result(err.message)
        except ToolscoutClientError as err:
            _log.warning("search_tools failed", error=err.message)
            return error_result("search_tools is unavailable right now (discovery did not answer); try again")
        finally:
            self._metrics.search_seconds.labels(mode).observe(time.perf_counter() - started, exemplar())
        if progressive and session is not None and result.newly_loaded:
            session.loaded.extend(t.llm_name for t in result.newly_loaded if t.llm_name not in session.loaded)
            self._metrics.list_changed.labels("search").inc()
            # On this request's own stream, so it arrives before the result, GET stream or not.
            await ctx.session.send_notification(types.ToolListChangedNotification(), ctx.request_id)
        structured = result.structured_content if result.structured_content_json else None
        return text_result(result.result_text, structured=structured)

    # --- calls -----------------------------------------------------------------------------

    async def _call_through(self, call: _ToolCall, arguments: Mapping[str, Any]) -> types.CallToolResult:
        target = call_tool_target(arguments)
        if isinstance(target, str):
            return error_result(target)
        name, inner = target
        if name == SEARCH_TOOL_NAME:
            return await self._search(call, inner)
        if name == CALL_TOOL_NAME:
            return error_result(f"{CALL_TOOL_NAME} calls the tools search_tools finds, not itself")
        return await self._call(call, name, inner)

    async def _call(self, call: _ToolCall, name: str, arguments: Mapping[str, Any]) -> types.CallToolResult:
        tool = call.view.by_name.get(name)
        if tool is None:
            self._metrics.tool_call(call.mode, "unknown_tool", 0.0)
            return await self._unknown(call.info.endpoint, call.view, name, call.mode)
        return await self._caller.call(
            tool,
            arguments,
            mode=call.mode,
            meta=call.meta,
            principal=call.info.principal,
            asker=_asker(call.ctx),
        )

    async def _unknown(
        self, endpoint: Endpoint, view: ToolsetView, name: str, mode: str
    ) -> types.CallToolResult:
        closest: tuple[str, ...] = ()
        try:
            request = SearchRequest(toolset=endpoint.toolset, tool_names=(name,))
            found = await self._discovery.search(request, deadline=_CLOSEST_DEADLINE)
            closest = (
                found.not_found[0].closest
                if found.not_found
                else tuple(m.tool.llm_name for m in found.matches)
            )
        except ToolscoutClientError:
            closest = ()  # the answer stands without suggestions
        hint = f" (closest: {', '.join(closest)})" if closest else ""
        # An "all" endpoint lists every tool and no search_tools: point at what it does list.
        searchable = view.search_tool is not None and mode != "all"
        where = "Find tools with search_tools." if searchable else "See tools/list."
        return error_result(f"unknown tool '{name}'{hint}. {where}")


def _request_attributes(ctx: ServerRequestContext[Any, Any], target: str | None) -> dict[str, Any]:
    request = ctx.request
    attributes: dict[str, Any] = {
        "mcp.method.name": ctx.method,
        "mcp.protocol.version": ctx.protocol_version or "",
        "jsonrpc.request.id": str(ctx.request_id),
        "network.transport": "tcp",
        "network.protocol.name": "http",
    }
    if ctx.method == "tools/call":
        attributes["gen_ai.operation.name"] = "execute_tool"
        if target is not None:
            attributes["gen_ai.tool.name"] = target
    info = getattr(request, "scope", {}).get(REQUEST_INFO_KEY) if request is not None else None
    if isinstance(info, RequestInfo):
        attributes["toolscout.toolset"] = info.endpoint.toolset
        attributes["toolscout.gateway.mode"] = info.endpoint.mode
    session = request.headers.get("mcp-session-id") if request is not None else None
    if session:
        attributes["mcp.session.id"] = session
    return attributes


def _no_header_schema(name: str) -> None:
    return None


async def _refuse_discover(
    ctx: ServerRequestContext[Any, Any], params: types.RequestParams
) -> types.DiscoverResult:
    raise MCPError(
        types.METHOD_NOT_FOUND,
        "this endpoint keeps what a session's searches loaded: open a session with initialize "
        "(revisions 2024-11-05 to 2025-11-25)",
    )


def _version() -> str:
    try:
        return importlib.metadata.version("toolscout")
    except importlib.metadata.PackageNotFoundError:
        return "0"
