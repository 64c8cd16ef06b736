"""The MCP side of the gateway: ``tools/list`` and ``tools/call`` on the SDK's lowlevel ``Server``.

One SDK ``Server`` per mode, all with the same handlers: the endpoint a request came to (toolset,
mode, tenant, session) travels in the HTTP request's scope, put there by the HTTP front
(:mod:`mcp_gateway_svc.front`). The gateway is a translator, like a servicer: an MCP request
becomes a call through the client library (discovery's ``SearchTools``, the pool's ``CallTool``)
and its answer an MCP result. Beside tools it serves resources of its own: the full manifest on the
meta and progressive servers (:mod:`mcp_gateway_svc.resources`) and, on every server, the tool
results the pool kept behind a handle (``toolscout://results/…``, :mod:`mcp_gateway_svc.results`).
The MCP servers' resources, resource templates, prompts, completion, logging and resource
subscriptions are served beside them (:mod:`mcp_gateway_svc.server_features`).

``call_tool`` (meta and progressive) is an adapter over :mod:`toolscout_kit.call_tool`, which
reads the call, checks it and writes every refusal the model reads, as it does for the
orchestrator.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import mcp_types as types
from mcp.server import CacheHint, NotificationOptions, Server, ServerRequestContext
from mcp.server.caching import CacheableMethod
from mcp.server.context import CallNext, HandlerResult
from mcp.server.models import InitializationOptions
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from opentelemetry import trace
from toolscout.client import (
    CALL_TOOL_NAME,
    READ_RESULT_NAME,
    SEARCH_TOOL_NAME,
    AsyncDiscoveryClient,
    CallProgress,
    CallToolResult,
    GatewayMode,
    InvalidArgumentError,
    NotFoundError,
    SearchRequest,
    Tool,
    ToolscoutClientError,
    ToolSurface,
)
from toolscout.client.aio import ProgressCallback

from mcp_gateway_svc import capabilities, lean, server_features
from mcp_gateway_svc.calls import LoginAsker, ToolCaller, error_result, mcp_result, rpc, text_result
from mcp_gateway_svc.endpoints import Endpoint, modern_mode
from mcp_gateway_svc.errors import GatewayUnavailableError
from mcp_gateway_svc.feature_handlers import FeatureHandlers
from mcp_gateway_svc.input_rounds import HostRound
from mcp_gateway_svc.metrics import GatewayMetrics
from mcp_gateway_svc.relay import asked_log_level, host_relay, host_round
from mcp_gateway_svc.resources import MANIFEST_URI, gateway_resources, read_gateway_resource
from mcp_gateway_svc.results import RESULT_URI_PREFIX, KeptResults, ResultOwner
from mcp_gateway_svc.sessions import Session
from mcp_gateway_svc.tool_lists import (
    CursorError,
    list_signature,
    page,
    shared_signature,
    signature,
    tools_for,
)
from mcp_gateway_svc.user_login import UserLogin, base_url, sign_in_instructions
from mcp_gateway_svc.user_tools import UserTools, UserToolViews, tools_as_seen_by
from mcp_gateway_svc.views import ToolsetView
from toolscout_kit.call_tool import Refusal, UnknownHint, not_loaded, read_call, unknown_tool
from toolscout_kit.logging import get_logger
from toolscout_kit.tracing import NO_TRACING, SpanKind, Tracing, exemplar, extract_context

__all__ = ["REQUEST_INFO_KEY", "McpHandlers", "RequestInfo"]

_log = get_logger(__name__)

# Where the HTTP front leaves the request's endpoint, tenant and session in the ASGI scope.
REQUEST_INFO_KEY = "toolscout.gateway"
# Seconds to look up the names closest to an unknown tool (a nicety: never holds up the answer long).
_CLOSEST_DEADLINE = 2.0
# A list may be cached this long by a 2026-07-28 client (changes are announced).
_LIST_TTL_MS = 30_000
# The lists that carry that hint (ttlMs / cacheScope): every list whose changes are announced.
_HINTED_LISTS: tuple[CacheableMethod, ...] = (
    "tools/list",
    "resources/list",
    "resources/templates/list",
    "prompts/list",
)


@dataclass(frozen=True, slots=True)
class RequestInfo:
    endpoint: Endpoint
    # The name of the token's environment variable ("" without tokens): the tenant.
    principal: str
    # The handshake-era session the request belongs to.
    session: Session | None = None
    # The mode the request is served in (the session's, or the one its client's name picked);
    # "" = the endpoint's.
    chosen_mode: GatewayMode | Literal[""] = ""

    @property
    def mode(self) -> GatewayMode:
        return self.chosen_mode or self.endpoint.mode


@dataclass(frozen=True, slots=True)
class LeanTarget:
    """What a lean ``tools/call`` runs: the catalog tool, its arguments, the mode it is served in,
    and whether it came through ``call_tool`` (its failures are then results)."""

    tool: Tool
    arguments: Mapping[str, Any]
    mode: GatewayMode
    wrapped: bool


@dataclass(frozen=True, slots=True)
class _ToolCall:
    """One ``tools/call`` request: the SDK's context, the endpoint and session it came through, the
    mode it is served in, the toolset view it is answered from and the caller's ``_meta``."""

    ctx: ServerRequestContext[Any, Any]
    info: RequestInfo
    mode: GatewayMode
    view: ToolsetView
    meta: dict[str, Any] | None
    # A 2026-07-28 host: its answers and state of an input_required round (None: a handshake-era host).
    host_round: HostRound | None = None


def _info(ctx: ServerRequestContext[Any, Any]) -> RequestInfo:
    request = ctx.request
    info = getattr(request, "scope", {}).get(REQUEST_INFO_KEY) if request is not None else None
    if not isinstance(info, RequestInfo):
        # Only reachable if the SDK is served without the front: never expose anything then.
        raise MCPError(types.INTERNAL_ERROR, "this server is reached through its /mcp endpoints")
    return info


def _client_name(ctx: ServerRequestContext[Any, Any]) -> str:
    """The host's ``clientInfo.name``: of the session, or of the ``initialize`` being answered."""
    params = ctx.session.client_params
    if params is not None:
        return params.client_info.name
    info = ctx.params.get("clientInfo") if ctx.method == "initialize" and ctx.params else None
    name = info.get("name") if isinstance(info, Mapping) else None
    return name if isinstance(name, str) else ""


def _mode(info: RequestInfo, ctx: ServerRequestContext[Any, Any]) -> GatewayMode:
    mode = info.mode
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
    """A lowlevel SDK server whose handshake advertises ``tools.listChanged``: every list can change
    (a catalog change), and every mode delivers it (session streams, ``subscriptions/listen``).

    The streamable-HTTP manager builds its ``InitializeResult`` from
    ``create_initialization_options()`` with no arguments, so the flag is this method's default.
    """

    announces_changes = True
    # What the servers behind the gateway offer (None: only tools and the gateway's own resources).
    features: server_features.ServedFeatures | None = None

    def get_capabilities(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
        *,
        protocol_version: str | None = None,
    ) -> types.ServerCapabilities:
        """The SDK's capabilities (from the handlers) as the endpoint being served advertises them
        (:mod:`mcp_gateway_svc.capabilities`; outside a request, every server's)."""
        options = notification_options or NotificationOptions(
            tools_changed=self.announces_changes, prompts_changed=True, resources_changed=True
        )
        caps = super().get_capabilities(
            options, experimental_capabilities, extensions, protocol_version=protocol_version
        )
        if self.features is None:
            return caps
        return capabilities.trimmed(caps, capabilities.EndpointFeatures(self.features.offered(""), True))

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        options = notification_options or NotificationOptions(
            tools_changed=self.announces_changes, prompts_changed=True, resources_changed=True
        )
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
        results: KeptResults | None = None,
        result_budget: Callable[[str], int] | None = None,
        features: server_features.ServedFeatures | None = None,
        user_tools: UserToolViews | None = None,
        user_login: UserLogin | None = None,
    ) -> None:
        """``results`` serves kept results (resources/read, read_result); ``result_budget`` is
        the result budget of a host by its clientInfo.name (None: results are not shaped);
        ``features`` the servers' resources, prompts, completion and logging (None: not served);
        ``user_tools`` what ``per_user`` servers list to each caller, and ``user_login`` their
        login links (None: no ``per_user`` servers)."""
        self._features = features
        self._user_tools = user_tools
        self._login = user_login
        self._discovery = discovery
        self._caller = caller
        self._results = results
        # A host's budget, by its name (its globs matched once per name; bounded).
        self._result_budget: Callable[[str], int] | None = (
            functools.lru_cache(maxsize=1024)(result_budget) if result_budget is not None else None
        )
        self._metrics = metrics
        self._tracing = tracing
        # With tokens, a list may be cached only within one authorization context.
        self._cache_scope: Any = "private" if private_lists else "public"

    def end_calls(self) -> int:
        """Ends the tool calls still waiting for the pool (:meth:`ToolCaller.end_calls`)."""
        return self._caller.end_calls()

    async def close(self) -> None:
        """Stops following the pool's features."""
        if self._features is not None:
            await self._features.follower.close()

    def server(self, *, handshake_only: bool = False, resources: bool = False) -> Server[Any]:
        """An SDK server; ``resources``: it serves the gateway's own manifest (and advertises it).

        ``server/discover`` is answered in every mode. With ``handshake_only`` (progressive mode,
        whose surface needs a session to hold what searches loaded) it names only the handshake
        revisions, which tells a client negotiating its revision to open a session with
        ``initialize`` (the SDKs fall back so); a client pinned to 2026-07-28 gets the meta surface.
        """
        serves_resources = resources or self._results is not None or self._features is not None
        server = _GatewayServer(
            "toolscout",
            version=_version(),
            cache_hints=dict.fromkeys(_HINTED_LISTS, CacheHint(ttl_ms=_LIST_TTL_MS, scope=self._cache_scope)),
            # The SDK would otherwise run tools/list on every 2026-07-28 tools/call to check
            # Mcp-Param-* headers against the tool's schema. The gateway declares no such headers
            # (arguments are checked against the tool's schema in call_tool), so there is nothing
            # to look up: a whole listing per call was most of a call's cost in "all" mode.
            get_tool_input_schema=_no_header_schema,
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            on_subscriptions_listen=self.listen,
            # The manifest (meta, progressive) and kept tool results (every mode); serving them is
            # what advertises the resources capability.
            on_list_resources=self.list_resources if serves_resources else None,
            on_read_resource=self.read_resource if serves_resources else None,
        )
        if not self._tracing.enabled:
            # The SDK's only default middleware is its OpenTelemetry span; with tracing off it built
            # a span, its attributes and the host's trace context per request for nothing (~0.1 ms
            # of a tools/call). The SDK's way to opt out: drop it from the list.
            server.middleware.clear()
        server.features = self._features
        if self._features is not None:
            FeatureHandlers(self._features, _info).register(server)
        # After the SDK's own OpenTelemetry middleware, which makes a host's `_meta` trace context
        # current (its span records nothing: no global provider is installed).
        if self._tracing.enabled:
            server.middleware.append(self._trace)
        server.middleware.append(self._count)
        if self._features is not None:
            server.middleware.append(self._endpoint_capabilities)
        if self._user_tools is not None:
            server.middleware.append(self._sign_in_guidance)
        if handshake_only:
            server.add_request_handler("server/discover", types.RequestParams, _handshake_discover(server))
        return server

    # --- handlers --------------------------------------------------------------------------

    async def _trace(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """A SERVER span per MCP request (OpenTelemetry's MCP conventions), continuing the host's
        trace: from the request's ``_meta`` (current already), else its HTTP ``traceparent``.

        Beside the SDK's ``OpenTelemetryMiddleware``, not instead of it: the SDK's stays first and
        makes the ``_meta`` context current, but it records through OpenTelemetry's *global*
        provider (``get_tracer("mcp-python-sdk")``), while every toolscout service has a provider
        of its own (its ``service.name``, sampler, exporter: :mod:`toolscout_kit.tracing`) and
        ``toolscout up`` runs four services in one process; a global one would put every MCP span
        of the process, the pool's client spans too, under one service. Its span also lacks the
        HTTP ``traceparent`` fallback, the endpoint's toolset and mode, the session id and the
        opt-in argument capture that this one records.
        """
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

    async def _endpoint_capabilities(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Capabilities are the endpoint's (:mod:`mcp_gateway_svc.capabilities`): the answers that
        name them (``initialize``, ``server/discover``) are built with the endpoint's view, and a
        request of a capability the endpoint does not advertise answers -32601. The pool's first
        feature snapshot is waited for first (bounded: without it the capabilities name tools and
        the gateway's own resources only)."""
        method = ctx.method
        if self._features is None or (
            method not in capabilities.ADVERTISING_METHODS and method not in capabilities.GATED_METHODS
        ):
            return await call_next(ctx)
        request = ctx.request
        info = getattr(request, "scope", {}).get(REQUEST_INFO_KEY) if request is not None else None
        if not isinstance(info, RequestInfo):
            return await call_next(ctx)
        await self._features.follower.wait_first()
        served = capabilities.EndpointFeatures(
            self._features.offered(info.endpoint.toolset.name), self._own_resources(ctx, info)
        )
        capabilities.require(method, served)
        with capabilities.serving(served):
            return await call_next(ctx)

    def _own_resources(self, ctx: ServerRequestContext[Any, Any], info: RequestInfo) -> bool:
        """Whether the gateway serves resources of its own on the request's endpoint: the manifest
        (meta, progressive), or tool results kept behind a handle (results shaped for this host)."""
        if _mode(info, ctx) != GatewayMode.ALL:
            return True
        if self._results is None or self._result_budget is None:
            return False
        return self._result_budget(_client_name(ctx)) > 0

    async def _sign_in_guidance(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """``initialize`` (and ``server/discover``) instructions name each ``per_user`` server of
        the endpoint the caller has not signed in to, with its login link: what a host shows
        before any call (the server's tools are not listed to them until they sign in)."""
        result = await call_next(ctx)
        if ctx.method not in ("initialize", "server/discover") or not isinstance(result, dict):
            return result
        request = ctx.request
        info = getattr(request, "scope", {}).get(REQUEST_INFO_KEY) if request is not None else None
        if not isinstance(info, RequestInfo) or not info.principal:
            return result
        try:
            user = await self._seen_by(info, await _view(info.endpoint))
        except MCPError:
            return result
        if user is None or not user.unsigned:
            return result
        scope = getattr(request, "scope", {})
        links = [
            (server, self._login.link(base_url(scope), info.principal, server) if self._login else "")
            for server in user.unsigned
        ]
        text = sign_in_instructions(links)
        return {
            **result,
            "instructions": f"{result['instructions']}\n\n{text}" if result.get("instructions") else text,
        }

    async def _seen_by(self, info: RequestInfo, view: ToolsetView) -> UserTools | None:
        """What the ``per_user`` servers list to the caller (None: nothing differs from the plan)."""
        if self._user_tools is None or not info.principal:
            return None
        return await self._user_tools.of(info.principal, view.version, info.endpoint.toolset.name)

    async def _count(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        request = ctx.request
        info = getattr(request, "scope", {}).get(REQUEST_INFO_KEY) if request is not None else None
        if isinstance(info, RequestInfo) and info.session is not None and info.session.outbound is None:
            # The session's peer (its handshake: revision, capabilities, name), from its first
            # message after initialize on: what the lean path reads (mcp_gateway_svc.lean).
            info.session.outbound = ctx.session
        if ctx.request_id is None:
            return await call_next(ctx)
        mode = info.mode if isinstance(info, RequestInfo) else GatewayMode.META
        return await self._metrics.counted(ctx.method, mode, call_next(ctx))

    async def listen(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        info = _info(ctx)
        served = info.endpoint.listen(ctx, params)
        uris = params.notifications.resource_subscriptions or ()
        if self._features is None or not uris:
            return await served
        return await self._features.listen(info.endpoint, info.principal, uris, served)

    async def list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        info = _info(ctx)
        mode = _mode(info, ctx)
        # Kept results are reached by the links their tool results gave, never listed.
        own = gateway_resources(await _view(info.endpoint)) if mode != GatewayMode.ALL else []
        if self._features is None:
            return types.ListResourcesResult(resources=own)
        cursor = params.cursor if params is not None else None
        where = f"{info.endpoint.key}/{mode}/resources"
        return await self._features.list_resources(
            info.endpoint.toolset.name, where, cursor, own, info.principal
        )

    async def read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        info = _info(ctx)
        uri = str(params.uri)
        if uri.startswith(RESULT_URI_PREFIX) and self._results is not None:
            return await self._results.read_resource(uri, self._owner(ctx, info))
        if uri == MANIFEST_URI or self._features is None:
            return read_gateway_resource(await _view(info.endpoint), uri)
        return await self._features.read(
            uri, info.endpoint.toolset.name, info.principal, host_round(ctx, params)
        )

    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        info = _info(ctx)
        mode = _mode(info, ctx)
        view, tools, user = await self._tools(info, mode)
        cursor = params.cursor if params is not None else None
        version = view.version if user is None else user.version(view.version)
        try:
            shown, next_cursor = page(tools, cursor, version=version, where=f"{info.endpoint.key}/{mode}")
        except CursorError as err:
            raise MCPError(types.INVALID_PARAMS, str(err)) from None
        session = info.session
        if session is not None and not cursor:
            # A caller's own list: what of it follows the catalog (the endpoint compares that part).
            session.per_user = user.servers if user is not None else frozenset()
            session.listed = (
                shared_signature(tools, session.per_user)
                if user is not None
                else signature(tools)
                if mode == GatewayMode.PROGRESSIVE
                else list_signature(view, mode)
            )
            session.outbound = ctx.session
        served = info.endpoint.served(view)
        ready = mode == GatewayMode.ALL
        if ready:
            await served.prepare_search_ready()
        # A tool listed to this caller has its own definition (not the stack's search-ready one).
        mine = user.by_name if user is not None else {}
        return types.ListToolsResult(
            tools=[served.definition(t, search_ready=ready and t.llm_name not in mine) for t in shown],
            next_cursor=next_cursor,
        )

    async def _tools(
        self, info: RequestInfo, mode: GatewayMode
    ) -> tuple[ToolsetView, Sequence[Tool], UserTools | None]:
        """The view, what ``mode`` lists to the caller, and what ``per_user`` servers list to them
        (None: the plan's lists, unchanged)."""
        view = await _view(info.endpoint)
        search: Tool | None = None
        loaded: Sequence[str] = ()
        if mode == GatewayMode.PROGRESSIVE:
            try:
                search = await info.endpoint.progressive_search_tool()
            except GatewayUnavailableError as err:
                raise MCPError(types.INTERNAL_ERROR, err.message) from None
            loaded = info.session.loaded if info.session is not None else []
        user = await self._seen_by(info, view)
        if user is not None and self._user_tools is not None:
            return view, tools_as_seen_by(view, mode, user, self._user_tools.config, loaded, search), user
        if mode != GatewayMode.PROGRESSIVE:
            return view, tools_for(view, mode), None
        return view, tools_for(view, mode, loaded, search), None

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        info = _info(ctx)
        meta = dict(params.meta) if params.meta else None
        call = _ToolCall(
            ctx, info, _mode(info, ctx), await _view(info.endpoint), meta, host_round(ctx, params)
        )
        if info.session is not None:
            info.session.outbound = ctx.session
        name = params.name
        arguments = params.arguments or {}
        if call.view.search_tool is not None and name == SEARCH_TOOL_NAME:
            return await self._search(call, arguments)
        if call.view.call_tool is not None and name == CALL_TOOL_NAME:
            return await self._call_through(call, arguments)
        if name == READ_RESULT_NAME and self._results is not None and name not in call.view.by_name:
            return await self._results.read_tool(arguments, self._owner(ctx, info))
        return await self._call(call, name, arguments)

    # --- the lean path (mcp_gateway_svc.lean) ---------------------------------------------

    def lean_target(self, info: RequestInfo, call: lean.LeanCall) -> LeanTarget | None:
        """The catalog tool a plain ``tools/call`` runs, or None when the SDK's path answers it as
        :meth:`call_tool` does: a search, a kept result, a ``call_tool`` call it refuses, an unknown
        tool, one run only as a task or not loaded yet, a ``per_user`` server's tool, no plan yet,
        tracing on (its spans are the SDK middleware's)."""
        view = info.endpoint.view
        if self._tracing.enabled or view is None:
            return None
        modern = call.protocol_version in MODERN_PROTOCOL_VERSIONS
        mode = modern_mode(info.mode) if modern else info.mode
        name, arguments, wrapped = call.name, call.arguments, False
        if view.search_tool is not None and name == SEARCH_TOOL_NAME:
            return None
        if view.call_tool is not None and name == CALL_TOOL_NAME:
            target = read_call(arguments, search_through=True)
            if isinstance(target, Refusal) or target.name == SEARCH_TOOL_NAME:
                return None
            name, arguments, wrapped = target.name, dict(target.arguments), True
        elif name == READ_RESULT_NAME and self._results is not None and name not in view.by_name:
            return None
        tool = view.by_name.get(name)
        if (
            tool is None
            or tool.task_support == "required"
            or _not_loaded(mode, view, name, info.session)
            # what a per_user server lists to this caller: the SDK path looks it up
            or (self._user_tools is not None and self._user_tools.config.per_user(tool.server))
        ):
            return None
        return LeanTarget(tool, arguments, mode, wrapped)

    async def lean_call(
        self, info: RequestInfo, call: lean.LeanCall, target: LeanTarget
    ) -> types.CallToolResult | types.InputRequiredResult | CallToolResult:
        """Runs ``target`` as :meth:`call_tool` would, counted as the SDK path counts a request;
        a result of the MCP server as the pool answered it (:meth:`ToolCaller.call`).

        Raises:
            MCPError: as :meth:`ToolCaller.call`.
        """
        run = self._caller.call(
            target.tool,
            target.arguments,
            mode=target.mode,
            meta=call.meta,
            owner=self._owner_of(call.client_name, info),
            protocol_errors=not target.wrapped,
            principal=info.principal,
            # A host that can show a URL elicitation declared elicitation: not a lean call.
            asker=LoginAsker(call.base_url),
            host_round=HostRound(None, None, call.declared_json) if call.declared_json is not None else None,
        )
        return await self._metrics.counted("tools/call", info.mode, run)

    # --- kept results ----------------------------------------------------------------------

    def _owner(self, ctx: ServerRequestContext[Any, Any], info: RequestInfo) -> ResultOwner:
        """The host's result budget and what its kept results are bound to: the principal, and
        the session when the endpoint keeps one (stateless meta: the principal alone)."""
        return self._owner_of(_client_name(ctx), info)

    def _owner_of(self, client_name: str, info: RequestInfo) -> ResultOwner:
        budget = self._result_budget(client_name) if self._result_budget is not None else 0
        conversation = info.session.sid if info.session is not None else ""
        return ResultOwner(budget, info.principal, conversation)

    # --- search_tools ----------------------------------------------------------------------

    async def _search(self, call: _ToolCall, arguments: Mapping[str, Any]) -> types.CallToolResult:
        ctx, info, mode = call.ctx, call.info, call.mode
        started = time.perf_counter()
        progressive = mode == GatewayMode.PROGRESSIVE
        session = info.session
        try:
            request = SearchRequest(
                toolset=info.endpoint.toolset,
                arguments_json=json.dumps(arguments),
                loaded_tools=tuple(session.loaded) if progressive and session is not None else (),
                surface=ToolSurface.APPEND if progressive else ToolSurface.STABLE,
                # A per_user server's tools are found as it lists them to the caller.
                principal=info.principal if self._user_tools is not None else "",
            )
            result = await rpc(self._discovery.search(request))
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

    async def _call_through(
        self, call: _ToolCall, arguments: Mapping[str, Any]
    ) -> types.CallToolResult | types.InputRequiredResult:
        """A ``call_tool`` call, read by the contract's owner (:mod:`toolscout_kit.call_tool`); the
        search_tools it may name runs here like a direct search."""
        target = read_call(arguments, search_through=True)
        if isinstance(target, Refusal):
            return error_result(target.text)
        if target.name == SEARCH_TOOL_NAME:
            return await self._search(call, target.arguments)
        return await self._call(call, target.name, target.arguments, wrapped=True)

    async def _call(
        self, call: _ToolCall, name: str, arguments: Mapping[str, Any], *, wrapped: bool = False
    ) -> types.CallToolResult | types.InputRequiredResult:
        """Calls a catalog tool; ``wrapped``: through ``call_tool``, whose caller gets every failure of
        the inner tool as a result (a JSON-RPC error would say ``call_tool`` itself was refused)."""
        tool = call.view.by_name.get(name)
        user = None
        if self._user_tools is not None and (tool is None or self._user_tools.config.per_user(tool.server)):
            # A tool a per_user server lists to this caller (perhaps to them only).
            user = await self._seen_by(call.info, call.view)
            tool = (user.by_name.get(name) if user is not None else None) or tool
        if tool is None:
            self._metrics.tool_call(call.mode, "unknown_tool", 0.0)
            return await self._unknown(call.info, call.view, name, call.mode)
        if tool.task_support == "required":
            # The tasks extension is not served: such a tool cannot be run through the gateway.
            message = (
                f"tool '{name}' runs only as a task (execution.taskSupport 'required'), and this "
                "gateway does not run tasks"
            )
            if wrapped:
                return error_result(message)
            raise MCPError(types.METHOD_NOT_FOUND, message)
        session = call.info.session
        if _not_loaded(call.mode, call.view, name, session) and not (
            user is not None
            and name in user.by_name
            and self._user_tools is not None
            and not self._user_tools.config.deferred(tool.server, tool.name)
        ):
            # As the orchestrator: a deferred tool is called once a search has found it.
            self._metrics.tool_call(call.mode, "not_loaded", 0.0)
            return text_result(not_loaded(name).text, is_error=True)
        log_level = asked_log_level(call.ctx, call.meta, session.log_level if session is not None else "")
        relay = host_relay(call.ctx, progress=_asks_for_progress(call.meta), log_level=log_level)
        result = await self._caller.call(
            tool,
            arguments,
            mode=call.mode,
            meta=call.meta,
            owner=self._owner(call.ctx, call.info),
            protocol_errors=not wrapped,
            progress=_progress_relay(call.ctx) if _asks_for_progress(call.meta) else None,
            relay=relay,
            log_level=log_level if relay is not None else "",
            principal=call.info.principal,
            asker=_asker(call.ctx),
            host_round=call.host_round,
        )
        return mcp_result(result) if isinstance(result, CallToolResult) else result

    async def _unknown(
        self, info: RequestInfo, view: ToolsetView, name: str, mode: GatewayMode
    ) -> types.CallToolResult:
        closest: tuple[str, ...] = ()
        try:
            request = SearchRequest(
                toolset=info.endpoint.toolset,
                tool_names=(name,),
                principal=info.principal if self._user_tools is not None else "",
            )
            found = await rpc(self._discovery.search(request, deadline=_CLOSEST_DEADLINE))
            closest = (
                found.not_found[0].closest
                if found.not_found
                else tuple(m.tool.llm_name for m in found.matches)
            )
        except ToolscoutClientError:
            closest = ()  # the answer stands without suggestions
        # An "all" endpoint lists every tool and no search_tools: point at what it does list.
        searchable = view.search_tool is not None and mode != GatewayMode.ALL
        hint = UnknownHint.SEARCH if searchable else UnknownHint.TOOLS_LIST
        return error_result(unknown_tool(name, hint, closest=closest).text)


def _not_loaded(mode: GatewayMode, view: ToolsetView, name: str, session: Session | None) -> bool:
    """A progressive session's deferred tool that no search of the session has found yet."""
    return (
        mode == GatewayMode.PROGRESSIVE
        and view.search_tool is not None
        and name not in view.eager_names
        and (session is None or name not in session.loaded)
    )


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


def _asks_for_progress(meta: Mapping[str, Any] | None) -> bool:
    """Whether a request's ``_meta`` carries a progress token (the SDK names the key in snake case)."""
    return meta is not None and ("progress_token" in meta or "progressToken" in meta)


def _progress_relay(ctx: ServerRequestContext[Any, Any]) -> ProgressCallback:
    """Relays a call's progress to the host that asked for it, on its request (under its token)."""

    async def relay(progress: CallProgress) -> None:
        await ctx.session.report_progress(progress.progress, progress.total, progress.message or None)

    return relay


def _handshake_discover(server: Server[Any]) -> Any:
    """A ``server/discover`` handler naming the handshake revisions only (see :meth:`McpHandlers.server`)."""

    async def discover(
        ctx: ServerRequestContext[Any, Any], params: types.RequestParams | None
    ) -> types.DiscoverResult:
        return types.DiscoverResult(
            supported_versions=list(HANDSHAKE_PROTOCOL_VERSIONS),
            capabilities=server.get_capabilities(protocol_version=ctx.protocol_version),
        )

    return discover


def _version() -> str:
    try:
        return importlib.metadata.version("toolscout")
    except importlib.metadata.PackageNotFoundError:
        return "0"
