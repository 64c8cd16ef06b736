"""What the gateway knows of a toolset: discovery's plans, followed through ``WatchPlan``.

The gateway keeps no catalog of its own. For each toolset endpoint it follows discovery's plan
stream (the same plans the orchestrator asks for, through the same client library), so a new
catalog version reaches it as soon as discovery has installed it, and what it lists is exactly
what discovery plans: the eager tools, the one ``search_tools`` / ``call_tool`` pair of the
stable surface, and every deferred tool's definition (for ``all`` mode, for validating
``call_tool`` arguments and for routing the call to the pool shard that runs the tool).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from toolscout.client import (
    AsyncDiscoveryClient,
    GatewayMode,
    NotFoundError,
    PlanRequest,
    Tool,
    ToolPlan,
    ToolscoutClientError,
    ToolsetRef,
    ToolSurface,
)

from mcp_gateway_svc.errors import GatewayUnavailableError
from toolscout_kit.logging import get_logger

__all__ = ["PlanFollower", "ToolsetView"]

_log = get_logger(__name__)

_INITIAL_BACKOFF = 0.25
_MAX_BACKOFF = 5.0


@dataclass(frozen=True, slots=True)
class ToolsetView:
    """One catalog version of a toolset as the gateway serves it (from a stable-surface plan)."""

    version: str
    eager: tuple[Tool, ...]
    # The stable surface's pair; None when nothing is deferred (then every tool is eager).
    search_tool: Tool | None
    call_tool: Tool | None
    deferred: tuple[Tool, ...]
    by_name: Mapping[str, Tool]
    eager_names: frozenset[str]
    # Discovery's read_result (meta mode lists it beside call_tool).
    read_result: Tool | None = None
    # The full manifest of the deferred tools (search_tools' description holds a short one).
    manifest: str = ""
    # The lists that depend on the view alone and their signatures (tool_lists), by mode: building
    # and hashing 50,000 tools takes tens of milliseconds, once per catalog version is enough.
    lists: dict[GatewayMode, tuple[Tool, ...]] = field(default_factory=dict, compare=False, repr=False)
    signatures: dict[GatewayMode, int] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_plan(cls, plan: ToolPlan) -> ToolsetView:
        tools = {t.llm_name: t for t in (*plan.loaded_tools, *plan.deferred_tools)}
        return cls(
            version=plan.catalog_version,
            eager=plan.loaded_tools,
            search_tool=plan.search_tool,
            call_tool=plan.call_tool,
            deferred=plan.deferred_tools,
            by_name=MappingProxyType(tools),
            eager_names=frozenset(t.llm_name for t in plan.loaded_tools),
            read_result=plan.read_result_tool,
            manifest=plan.manifest,
        )


OnPlan = Callable[[ToolPlan], Awaitable[None]]


class PlanFollower:
    """Follows one (toolset, surface) plan stream, reconnecting with backoff when it breaks."""

    def __init__(
        self,
        discovery: AsyncDiscoveryClient,
        toolset: ToolsetRef,
        *,
        surface: ToolSurface,
        include_deferred_tools: bool,
        on_plan: OnPlan | None = None,
    ) -> None:
        self._discovery = discovery
        self.toolset = toolset
        self._request = PlanRequest(toolset, surface=surface, include_deferred_tools=include_deferred_tools)
        self._on_plan = on_plan
        self.current: ToolPlan | None = None
        # True while the plan stream is open (a plan arrived on it and it has not broken since).
        self.connected = False
        # Why there is no plan (yet): shown to callers instead of an empty tool list.
        self.problem = "discovery has not answered yet"
        self._arrived = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"gateway-plan-{self.toolset.key or '_all'}")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def plan(self, wait: float) -> ToolPlan:
        """The current plan, waiting up to ``wait`` seconds for the first one.

        Raises:
            GatewayUnavailableError: no plan within ``wait`` (discovery unreachable, or the toolset
                is unknown to it).
        """
        if self.current is None:
            self.start()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), wait)
        if self.current is None:
            raise GatewayUnavailableError(f"the tool catalog is not available: {self.problem}")
        return self.current

    async def _run(self) -> None:
        backoff = _INITIAL_BACKOFF
        while True:
            known = self.current.catalog_version if self.current is not None else ""
            try:
                async for plan in self._discovery.watch(self._request, known_version=known):
                    backoff = _INITIAL_BACKOFF
                    self.connected = True
                    self.current = plan
                    self._arrived.set()
                    if self._on_plan is not None:
                        try:
                            await self._on_plan(plan)
                        except Exception:
                            _log.exception("applying a new plan failed", toolset=self.toolset.key)
            except NotFoundError as err:
                self.problem = err.message
                _log.warning(
                    "discovery does not know this toolset", toolset=self.toolset.key, error=err.message
                )
            except ToolscoutClientError as err:
                self.problem = "discovery is not reachable"
                _log.warning("following discovery's plan failed", toolset=self.toolset.key, error=err.message)
            self.connected = False
            await asyncio.sleep(backoff * random.uniform(0.8, 1.2))  # noqa: S311 - jitter, not crypto
            backoff = min(backoff * 2, _MAX_BACKOFF)
