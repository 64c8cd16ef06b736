"""The client-library clients a service calls, built from the config once, resharded once, closed once.

The orchestrator and the MCP gateway call the pool (each tool call to the shard that runs its
server) and discovery; discovery follows the pool shard by shard. All three reach the pool the same
way (:class:`PoolShards`): every shard's address from ``toolscout.pool.shards`` (or the caller's
``pool_targets``), else the one pool at the caller's ``pool_target``; one client per address,
reused across config reloads; and one rule for a reload that changes the shard count
(:meth:`PoolShards.new_targets`): a sharded pool follows the new addresses, a pool that is no longer
sharded needs a restart of its callers.
"""

from __future__ import annotations

from collections.abc import Sequence

from toolscout.client import AsyncDiscoveryClient, AsyncPoolClient, AsyncShardedPoolClient

from toolscout_kit.channels import create_channel
from toolscout_kit.config import ToolscoutConfig
from toolscout_kit.logging import get_logger
from toolscout_kit.shards import ShardClients, server_placements, shard_targets, sharded_pool_client

__all__ = ["Downstream", "PoolShards"]

_log = get_logger(__name__)


class PoolShards:
    """Where one service reaches the pool, and a client per shard address."""

    def __init__(
        self, config: ToolscoutConfig, service: str, pool_target: str, pool_targets: Sequence[str] | None
    ) -> None:
        """``service`` names the caller in log lines ("discovery", "the orchestrator").

        Raises:
        ConfigError: the pool is sharded without shard addresses.
        """
        targets = list(pool_targets) if pool_targets else shard_targets(config.toolscout.pool.shards)
        self.sharded = targets is not None
        self.targets = targets or [pool_target]
        self.clients = ShardClients(config.toolscout.security)
        self._service = service

    def client(self, address: str) -> AsyncPoolClient:
        """The client of the shard at ``address`` (the same one while the address stays)."""
        return self.clients.get(address)

    def new_targets(self, new_config: ToolscoutConfig) -> list[str] | None:
        """Every shard's address after a config reload, or None when the caller keeps what it has:
        the pool is not sharded, or no longer is (which takes a restart of the caller: logged)."""
        addresses = shard_targets(new_config.toolscout.pool.shards)
        if addresses is None:
            if self.sharded:
                _log.warning(
                    f"the pool is no longer sharded in the config: restart {self._service} to apply it"
                )
            return None
        self.sharded = True
        _log.info("following pool shards", shards=len(addresses))
        return addresses

    async def forget(self, unused: list[AsyncPoolClient]) -> None:
        """Closes the clients of shards no longer called."""
        await self.clients.forget(unused)

    async def close(self) -> None:
        await self.clients.close()


class Downstream:
    """The pool (routing each tool call to the shard that runs its server) and discovery, as the
    orchestrator and the gateway call them."""

    def __init__(
        self,
        config: ToolscoutConfig,
        service: str,
        *,
        pool_target: str,
        discovery_target: str,
        pool_targets: Sequence[str] | None = None,
    ) -> None:
        """``service`` names the caller in log lines ("the gateway").

        Raises:
            ConfigError: the pool is sharded without shard addresses.
        """
        self.shards = PoolShards(config, service, pool_target, pool_targets)
        self.pool: AsyncShardedPoolClient = sharded_pool_client(
            config, self.shards.targets, self.shards.clients
        )
        self.discovery = AsyncDiscoveryClient(
            create_channel(discovery_target, config.toolscout.security), owns_channel=True
        )

    async def reshard(self, new_config: ToolscoutConfig) -> None:
        """A config reload: tool calls follow a new shard count and placement."""
        addresses = self.shards.new_targets(new_config)
        if addresses is None:
            return
        unused = self.pool.reshard([self.shards.client(a) for a in addresses], server_placements(new_config))
        await self.shards.forget(unused)

    async def close(self) -> None:
        await self.pool.close()
        await self.shards.close()
        await self.discovery.close()
