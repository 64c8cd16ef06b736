"""The gateway's endpoints: ``/mcp`` (the default toolset, or every tool) and ``/mcp/<toolset>``.

Each endpoint serves one toolset in one mode. It follows discovery's stable-surface plan of its
toolset (and, in progressive mode, the append-surface ``search_tools``) from the first request on,
and announces every change of what it lists: on the ``subscriptions/listen`` streams of 2026-07-28
clients, and on the standalone stream of each open session of the handshake revisions whose own
list changed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ServerEvent, ToolsListChanged
from toolscout.client import AsyncDiscoveryClient, GatewayMode, Tool, ToolPlan, ToolsetRef, ToolSurface

from mcp_gateway_svc.listing import ResultLimits, ServedTools
from mcp_gateway_svc.metrics import GatewayMetrics
from mcp_gateway_svc.sessions import SessionRegistry
from mcp_gateway_svc.tool_lists import list_signature
from mcp_gateway_svc.views import PlanFollower, ToolsetView
from toolscout_kit.logging import get_logger

__all__ = ["Endpoint", "Endpoints", "modern_mode"]

_log = get_logger(__name__)

# Seconds a request waits for an endpoint's first plan (discovery starting, or a new endpoint).
PLAN_WAIT = 10.0


def modern_mode(mode: GatewayMode) -> GatewayMode:
    """The mode a 2026-07-28 client gets: the revision has no session to hold a progressive
    session's loaded tools, so a progressive endpoint serves it the meta surface (stateless)."""
    return GatewayMode.META if mode == GatewayMode.PROGRESSIVE else mode


class Endpoint:
    """One endpoint: its toolset, mode, plans and change announcements."""

    def __init__(
        self,
        key: str,
        toolset: ToolsetRef,
        mode: GatewayMode,
        discovery: AsyncDiscoveryClient,
        sessions: SessionRegistry,
        metrics: GatewayMetrics,
        limits: ResultLimits | None = None,
        description: str = "",
    ) -> None:
        self.key = key
        self.toolset = toolset
        self.mode: GatewayMode = mode
        self._discovery = discovery
        self._sessions = sessions
        self._metrics = metrics
        self._limits = limits or ResultLimits()
        self._description = description
        self._stable = PlanFollower(
            discovery, toolset, surface=ToolSurface.STABLE, include_deferred_tools=True, on_plan=self._on_plan
        )
        # Progressive mode's search_tools (the endpoint's mode, or a client's: started on first use).
        self._append: PlanFollower | None = None
        if mode == GatewayMode.PROGRESSIVE:
            self._progressive()
        self.view: ToolsetView | None = None
        self._served: tuple[str, ServedTools] | None = None
        self._bus = InMemorySubscriptionBus()
        # Serves subscriptions/listen (2026-07-28) for this endpoint.
        self.listen = ListenHandler(self._bus)

    @property
    def following(self) -> bool:
        """Whether discovery's plan of this endpoint's toolset is followed live right now."""
        return self._stable.connected

    @property
    def path(self) -> str:
        return f"/mcp/{self.key}" if self.key else "/mcp"

    def _progressive(self) -> PlanFollower:
        if self._append is None:
            self._append = PlanFollower(
                self._discovery, self.toolset, surface=ToolSurface.APPEND, include_deferred_tools=False
            )
        return self._append

    def start(self) -> None:
        self._stable.start()
        if self._append is not None:
            self._append.start()

    def served(self, view: ToolsetView) -> ServedTools:
        """The MCP definitions of ``view``'s tools as served (built once per catalog version)."""
        served = self._served
        if served is None or served[0] != view.version:
            tools = ServedTools([*view.eager, *view.deferred], self._limits, self._description)
            served = self._served = (view.version, tools)
        return served[1]

    async def close(self) -> None:
        self.listen.close()
        await self._stable.close()
        if self._append is not None:
            await self._append.close()

    async def current(self) -> ToolsetView:
        """The toolset as of the latest catalog version (waiting for the first plan).

        Raises:
            GatewayUnavailableError: discovery has not answered (or does not know the toolset).
        """
        if self.view is None:
            self.view = ToolsetView.from_plan(await self._stable.plan(PLAN_WAIT))
        return self.view

    async def publish(self, event: ServerEvent) -> None:
        """Delivers ``event`` to this endpoint's ``subscriptions/listen`` streams (2026-07-28)."""
        await self._bus.publish(event)

    async def progressive_search_tool(self) -> Tool | None:
        """Discovery's append-surface search_tools (progressive mode).

        Raises:
            GatewayUnavailableError: discovery has not answered.
        """
        return (await self._progressive().plan(PLAN_WAIT)).search_tool

    async def _on_plan(self, plan: ToolPlan) -> None:
        old, new = self.view, ToolsetView.from_plan(plan)
        self.view = new
        if old is None or old.version == new.version:
            return
        # 2026-07-28 clients of this endpoint are served meta or all (by their names).
        if any(list_signature(old, m) != list_signature(new, m) for m in (GatewayMode.META, GatewayMode.ALL)):
            self._metrics.list_changed.labels("catalog").inc()
            await self._bus.publish(ToolsListChanged())
        search = self._append.current.search_tool if self._append and self._append.current else None
        for session in self._sessions.of_endpoint(self.key):
            if session.outbound is None or session.listed is None:
                continue
            now = list_signature(new, session.mode, session.loaded, search, session.per_user)
            if now == session.listed:
                continue
            session.listed = now
            self._metrics.list_changed.labels("catalog").inc()
            # The client may have closed its standalone stream: the notification is advisory.
            with contextlib.suppress(Exception):
                await session.outbound.send_tool_list_changed()
        _log.info("catalog change announced", endpoint=self.path, catalog_version=new.version)


class Endpoints:
    """Every endpoint of the gateway, created on first use."""

    def __init__(
        self,
        *,
        toolsets: Mapping[str, GatewayMode],
        default_toolset: str,
        default_mode: GatewayMode,
        discovery: AsyncDiscoveryClient,
        sessions: SessionRegistry,
        metrics: GatewayMetrics,
        limits: ResultLimits | None = None,
        descriptions: Mapping[str, str] | None = None,
    ) -> None:
        self._toolsets = dict(toolsets)
        self._limits = limits or ResultLimits()
        self._descriptions = dict(descriptions or {})
        self._default_toolset = default_toolset
        self._default_mode = default_mode
        self._discovery = discovery
        self._sessions = sessions
        self._metrics = metrics
        self._open: dict[str, Endpoint] = {}

    def toolset_of(self, key: str) -> str | None:
        """The toolset endpoint ``key`` serves ("" = /mcp), or None when there is no such toolset."""
        if not key:
            return self._default_toolset
        return key if key in self._toolsets else None

    def get(self, key: str) -> Endpoint | None:
        endpoint = self._open.get(key)
        if endpoint is None:
            toolset = self.toolset_of(key)
            if toolset is None:
                return None
            mode = self._toolsets.get(toolset, self._default_mode) if toolset else self._default_mode
            endpoint = Endpoint(
                key,
                ToolsetRef.named(toolset),
                mode,
                self._discovery,
                self._sessions,
                self._metrics,
                self._limits,
                self._descriptions.get(toolset, ""),
            )
            endpoint.start()
            self._open[key] = endpoint
        return endpoint

    def opened(self) -> list[Endpoint]:
        return list(self._open.values())

    async def close(self) -> None:
        for endpoint in self._open.values():
            await endpoint.close()
