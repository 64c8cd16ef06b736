"""The servers one pool shard runs: placement, a supervisor each, start, stop and resharding.

:class:`ShardServers` decides which configured servers are this shard's (an unsharded pool is
shard 0 of 1 and runs them all), runs one :class:`~mcp_pool_svc.supervisor.Supervisor` task per
server, and applies a new shard count (:meth:`ShardServers.reshard`): only the servers whose owner
changed are started or stopped, and a server leaving this shard first finishes the calls it has,
while new ones are refused (:class:`~mcp_pool_svc.errors.NotOwnerError`, naming the owners) and
go to its new owner. It answers "which supervisor runs this server here", and nothing about
catalogs or calls: those are :class:`~mcp_pool_svc.pool.McpPool`'s.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import anyio
from toolscout.client import ServerStatus, ShardInfo

from mcp_pool_svc.catalog import Catalog
from mcp_pool_svc.errors import NotOwnerError, UnknownServerError
from mcp_pool_svc.metrics import PoolMetrics
from mcp_pool_svc.placement import ShardIdentity
from mcp_pool_svc.supervisor import ServerState, Supervisor
from toolscout_kit.config import RemoteServerConfig, StdioServerConfig, ToolscoutConfig
from toolscout_kit.logging import get_logger
from toolscout_kit.shards import placement_for

__all__ = ["ReshardResult", "ShardServers", "SupervisorFactory"]

log = get_logger(__name__)

# A new supervisor for a server (its name and configuration).
SupervisorFactory = Callable[[str, StdioServerConfig | RemoteServerConfig], Supervisor]


@dataclass(frozen=True)
class ReshardResult:
    """What a reshard changed on this shard: the servers it started and the ones it handed over."""

    shard: ShardIdentity | None
    started: tuple[str, ...]
    stopped: tuple[str, ...]


class ShardServers:
    """The supervisors of the servers placed on one shard, and of those it is handing over."""

    def __init__(
        self,
        config: ToolscoutConfig,
        shard: ShardIdentity,
        *,
        new_supervisor: SupervisorFactory,
        catalog: Catalog,
        metrics: PoolMetrics,
        notify: Callable[[str], None],
        stop_timeout: float,
    ) -> None:
        """``notify(server)`` runs when a server joins or leaves this shard; ``stop_timeout``: how
        long a stopping supervisor gets to close its session."""
        self.config = config
        self._shard: ShardIdentity | None = shard
        # Kept when a reshard leaves this shard out (its index beyond the new count).
        self.index = shard.index
        self._placement = placement_for(config, shard.count)
        self._new = new_supervisor
        self._catalog = catalog
        self._metrics = metrics
        self._notify = notify
        self._stop_timeout = stop_timeout
        self._started = False
        self.running = {name: self._new(name, config.servers[name]) for name in self._owned()}
        # Servers handed to another shard, finishing their calls before they stop.
        self._leaving: dict[str, Supervisor] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._metrics.shard(shard.index, shard.count)

    @property
    def shard(self) -> ShardIdentity | None:
        """This shard; None once a reshard left it out (its index is beyond the new count)."""
        return self._shard

    @property
    def count(self) -> int:
        return self._placement.count

    def info(self) -> ShardInfo:
        """The shard that answers (after a reshard that left it out: its old index of the new count)."""
        return ShardInfo(index=self.index, count=self._placement.count)

    def result_budget(self, server: str) -> int | None:
        """The server's configured ``result_budget`` (None: none, or not configured)."""
        config = self.config.servers.get(server)
        return config.result_budget if config is not None else None

    def owners(self, server: str) -> tuple[int, ...]:
        """The shards that run ``server`` under the current count."""
        return self._placement.owners(server)

    def _owned(self) -> list[str]:
        if self._shard is None:
            return []
        return self._placement.servers_for(self._shard.index)

    def start(self) -> None:
        """Starts a supervisor task for every server of this shard."""
        self._started = True
        for sup in self.running.values():
            self._launch(sup)

    def starting(self) -> int:
        """How many servers of this shard are still STARTING."""
        return sum(s.state is ServerState.STARTING for s in self.running.values())

    def _launch(self, sup: Supervisor) -> None:
        self._metrics.server_up(sup.name, False)
        self._tasks[sup.name] = asyncio.create_task(sup.run(), name=f"supervisor-{sup.name}")

    async def stop(self) -> None:
        """Stops every supervisor (running or leaving) and waits, bounded, for their tasks."""
        for sup in [*self.running.values(), *self._leaving.values()]:
            sup.request_stop()
        tasks = list(self._tasks.values())
        if tasks:
            _done, pending = await asyncio.wait(tasks, timeout=self._stop_timeout)
            for task in pending:
                task.cancel()
            if pending:
                log.warning("mcp_servers_stop_slow", servers=self._names(pending), seconds=self._stop_timeout)
                _done, pending = await asyncio.wait(pending, timeout=self._stop_timeout)
            if pending:
                log.error("mcp_servers_stop_stuck", servers=self._names(pending), seconds=self._stop_timeout)
        self._tasks.clear()

    def _names(self, tasks: set[asyncio.Task[None]]) -> list[str]:
        """The servers whose supervisor tasks are among ``tasks``, sorted."""
        return sorted(name for name, task in self._tasks.items() if task in tasks)

    async def reshard(self, config: ToolscoutConfig) -> ReshardResult:
        """Applies the shard count and placement of ``config`` to the servers this shard started with.

        Starts the servers newly placed here and hands over those placed elsewhere now: a call for
        one of them is refused from this moment (:class:`NotOwnerError`, not sent), the calls it
        already has run to their end (each bounded by its ``call_timeout``), then it stops and its
        tools leave this shard's catalog. Servers whose owner did not change are not touched. A
        shard whose index is beyond the new count hands over everything.
        """
        count = config.toolscout.pool.shards.count
        index = self.index
        known = {name: server for name, server in config.servers.items() if name in self.config.servers}
        self.config = self.config.model_copy(update={"servers": {**self.config.servers, **known}})
        before = set(self.running)
        self._placement = placement_for(self.config, count)
        self._shard = ShardIdentity(index, count) if index < count else None
        after = set(self._owned())
        self._metrics.shard(index, count)
        started = sorted(after - before)
        stopped = sorted(before - after)
        log.info("pool_reshard", shard=index, count=count, starting=started, handing_over=stopped)
        for name in stopped:
            self._leaving[name] = self.running.pop(name)
        for name in started:
            # A server handed over and back before it was stopped keeps its running supervisor.
            sup = self._leaving.pop(name, None)
            if sup is None or sup.stop_requested:
                sup = self._new(name, self.config.servers[name])
                self.running[name] = sup
                if self._started:
                    self._launch(sup)
            else:
                self.running[name] = sup
        self._metrics.servers_moved(len(started), len(stopped))
        for name in started:
            self._notify(name)
        await asyncio.gather(*(self._hand_over(name) for name in stopped))
        return ReshardResult(self._shard, tuple(started), tuple(stopped))

    async def _hand_over(self, name: str) -> None:
        sup = self._leaving.get(name)
        if sup is None:
            return
        with anyio.move_on_after(sup.config.call_timeout):
            await sup.wait_idle()
        if self._leaving.get(name) is not sup:
            return  # placed here again meanwhile
        sup.request_stop()
        task = self._tasks.get(name)
        if task is not None:
            await asyncio.wait({task}, timeout=self._stop_timeout)
            if not task.done():
                task.cancel()
        if self._leaving.get(name) is sup:
            del self._leaving[name]
            self._tasks.pop(name, None)
            sup.listing.handed_over()
            if self._catalog.drop(name):
                self._metrics.catalog_tools(name, 0)
            self._metrics.server_up(name, False)
            self._notify(name)

    def supervisor(self, server: str, *, leaving: bool = False) -> Supervisor:
        """The supervisor running ``server`` here (with ``leaving``: or handing it over).

        Raises:
            UnknownServerError: the server is not configured.
            NotOwnerError: another shard runs it.
        """
        sup = self.running.get(server) or (self._leaving.get(server) if leaving else None)
        if sup is None:
            if server in self.config.servers:
                raise self.not_owner(server)
            known = ", ".join(sorted(self.config.servers)) or "none configured"
            raise UnknownServerError(f"unknown MCP server {server!r} (servers: {known})")
        return sup

    def not_owner(self, server: str) -> NotOwnerError:
        """The refusal of a call for ``server``, which other shards run."""
        owners = self._placement.owners(server)
        count = self._placement.count
        where = f"shard {owners[0]}" if len(owners) == 1 else "shards " + ", ".join(map(str, owners))
        return NotOwnerError(
            f"MCP server {server!r} runs on pool {where} of {count}, not on this shard ({self.index}); "
            "the call was not sent",
            server=server,
            owners=owners,
            count=count,
        )

    def status(self, sup: Supervisor) -> ServerStatus:
        """The supervisor's status with where the server is placed."""
        rule = self._placement.rule(sup.name)
        return dataclasses.replace(
            sup.status(), shards=self._placement.owners(sup.name), placement=rule.placement
        )
