"""The MCP handlers of what the servers behind the gateway offer besides tools: thin adapters
from an MCP request (its endpoint, principal and session) to :class:`ServedFeatures`
(:mod:`mcp_gateway_svc.server_features`, where the rules live). ``resources/list`` and
``resources/read`` stay :class:`~mcp_gateway_svc.handlers.McpHandlers`' own: they serve the
gateway's resources too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from toolscout.client import FeatureKind

from mcp_gateway_svc.endpoints import Endpoint
from mcp_gateway_svc.relay import host_round
from mcp_gateway_svc.server_features import MODELS, ServedFeatures
from mcp_gateway_svc.sessions import Session

__all__ = ["FeatureHandlers", "RequestInfo"]


class RequestInfo(Protocol):
    """What the handlers read of a request (:class:`mcp_gateway_svc.handlers.RequestInfo`)."""

    @property
    def endpoint(self) -> Endpoint: ...
    @property
    def principal(self) -> str: ...
    @property
    def session(self) -> Session | None: ...


class FeatureHandlers:
    """The handlers of resource templates, prompts, completion, logging and subscriptions."""

    def __init__(
        self, features: ServedFeatures, info_of: Callable[[ServerRequestContext[Any, Any]], RequestInfo]
    ) -> None:
        """``info_of(ctx)``: the request's endpoint, principal and session (put in its scope by
        the HTTP front)."""
        self._features = features
        self._info_of = info_of

    def register(self, server: Server[Any]) -> None:
        """Registers the handlers of what the servers behind offer besides tools on ``server``
        (resources/list and resources/read stay the gateway's, which serve its own resources too).
        Added after the server is made: the SDK warns at construction about logging/setLevel,
        deprecated at 2026-07-28 but served to the handshake revisions."""
        for method, params_type, handler in (
            ("resources/templates/list", types.PaginatedRequestParams, self._list_templates),
            ("resources/subscribe", types.SubscribeRequestParams, self._subscribe),
            ("resources/unsubscribe", types.UnsubscribeRequestParams, self._unsubscribe),
            ("prompts/list", types.PaginatedRequestParams, self._list_prompts),
            ("prompts/get", types.GetPromptRequestParams, self._get_prompt),
            ("completion/complete", types.CompleteRequestParams, self._complete),
            ("logging/setLevel", types.SetLevelRequestParams, self._set_level),
        ):
            server.add_request_handler(method, params_type, handler)  # type: ignore[arg-type]

    async def _listed_page(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: types.PaginatedRequestParams | None,
        kind: FeatureKind,
    ) -> tuple[list[Any], str | None]:
        info = self._info_of(ctx)
        if info.session is not None:
            info.session.outbound = ctx.session  # list_changed reaches it from now on
        where = f"{info.endpoint.key}/{kind.value}"
        cursor = params.cursor if params is not None else None
        return await self._features.listing(
            kind, MODELS[kind], info.endpoint.toolset.name, where, cursor, principal=info.principal
        )

    async def _list_templates(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        listed, next_cursor = await self._listed_page(ctx, params, FeatureKind.RESOURCE_TEMPLATE)
        return types.ListResourceTemplatesResult(resource_templates=listed, next_cursor=next_cursor)

    async def _list_prompts(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        listed, next_cursor = await self._listed_page(ctx, params, FeatureKind.PROMPT)
        return types.ListPromptsResult(prompts=listed, next_cursor=next_cursor)

    async def _get_prompt(
        self, ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        info = self._info_of(ctx)
        return await self._features.get_prompt(
            params.name, params.arguments, info.endpoint.toolset.name, info.principal, host_round(ctx, params)
        )

    async def _complete(
        self, ctx: ServerRequestContext[Any, Any], params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        info = self._info_of(ctx)
        return await self._features.complete(params, info.endpoint.toolset.name, info.principal)

    async def _set_level(
        self, ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        info = self._info_of(ctx)
        return await self._features.set_level(params.level, info.endpoint.toolset.name, info.session)

    async def _subscribe(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        info = self._info_of(ctx)
        if info.session is not None:
            info.session.outbound = ctx.session
        return await self._features.subscribe(str(params.uri), info.session, ctx.session, info.principal)

    async def _unsubscribe(
        self, ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        return await self._features.unsubscribe(str(params.uri), self._info_of(ctx).session)
