"""What the services calling a sharded pool need to know about it, from the shared config.

Where each shard is reached (``toolscout.pool.shards``) and the configured placement of the servers
that are pinned or run on every shard; the sharded client in ``toolscout.client`` places the rest
by the same hash the pool uses. :class:`ShardClients` and :func:`sharded_pool_client` are how the
orchestrator and the MCP gateway call tools on it (through :mod:`toolscout_kit.service_clients`). :class:`ShardIdentity` says which shard one pool
process is: the pool runs by it, and ``toolscout up`` starts its pool shards with it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from toolscout.client import AsyncPoolClient, AsyncShardedPoolClient, Placement, ServerPlacement

from toolscout_kit.channels import create_channel
from toolscout_kit.config import SecuritySettings, ShardSettings, ToolscoutConfig
from toolscout_kit.errors import ConfigError

__all__ = [
    "SHARD_CHANNEL_OPTIONS",
    "ShardClients",
    "ShardIdentity",
    "placement_for",
    "server_placements",
    "shard_targets",
    "sharded_pool_client",
]

# Channels to single shards reconnect quickly: a shard that restarts (same address, same servers)
# is called again within ~2 s, not after gRPC's default reconnect backoff of up to 120 s, during
# which calls for its servers fail at once. One shard is one address: no other pod to fall back to.
SHARD_CHANNEL_OPTIONS = (
    ("grpc.initial_reconnect_backoff_ms", 250),
    ("grpc.min_reconnect_backoff_ms", 250),
    ("grpc.max_reconnect_backoff_ms", 2000),
)


def shard_targets(shards: ShardSettings) -> list[str] | None:
    """The address of every shard, or None for an unsharded pool reached at the callers' ``pool_target``.

    Raises:
        ConfigError: the pool is sharded but neither ``addresses`` nor ``address_pattern`` is set.
    """
    if shards.count == 1 and not shards.addresses and shards.address_pattern is None:
        return None
    targets = [shards.address(k) for k in range(shards.count)]
    found = [t for t in targets if t]
    if len(found) != shards.count:
        raise ConfigError(
            f"toolscout.pool.shards.count is {shards.count}: set toolscout.pool.shards.addresses "
            "(one per shard) or address_pattern (with {ordinal}) so that callers reach every shard"
        )
    return found


def server_placements(config: ToolscoutConfig) -> dict[str, ServerPlacement]:
    """The placement of every configured server that is pinned or runs on every shard."""
    return {
        name: ServerPlacement(placement=server.placement, shard=server.shard)
        for name, server in config.servers.items()
        if server.placement == "all" or server.shard is not None
    }


def placement_for(config: ToolscoutConfig, count: int | None = None) -> Placement:
    """The owners of every configured server over ``count`` shards (default: the configured count).

    A pin beyond ``count`` (the count shrank below it; the config check reports it on reload) falls
    back to the hash owner.
    """
    rules = {
        name: ServerPlacement(placement=server.placement, shard=server.shard)
        for name, server in config.servers.items()
    }
    return Placement(config.toolscout.pool.shards.count if count is None else count, rules, strict=False)


class ShardClients:
    """One pool client per shard address, reused across config reloads (issue 15)."""

    def __init__(self, security: SecuritySettings) -> None:
        self._security = security
        self._clients: dict[str, AsyncPoolClient] = {}

    def get(self, address: str) -> AsyncPoolClient:
        client = self._clients.get(address)
        if client is None:
            # Each tool call is bounded by its server's call_timeout in the pool and by the caller's
            # deadline; the library's default CallTool deadline would cut servers configured longer.
            client = AsyncPoolClient(
                create_channel(address, self._security, options=SHARD_CHANNEL_OPTIONS),
                deadlines={"CallTool": None},
                owns_channel=True,
            )
            self._clients[address] = client
        return client

    async def forget(self, unused: list[AsyncPoolClient]) -> None:
        for client in unused:
            self._clients = {a: c for a, c in self._clients.items() if c is not client}
            await client.close()

    async def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.close()


def sharded_pool_client(
    config: ToolscoutConfig, targets: list[str], clients: ShardClients
) -> AsyncShardedPoolClient:
    """A client routing each tool call to the shard at ``targets[k]`` that runs its server."""
    pattern = config.toolscout.pool.shards.address_pattern

    def open_shard(index: int) -> AsyncPoolClient | None:
        # A refusal names a shard beyond the configured count (the count grew before this
        # process reloaded its config): reachable when shards are addressed by pattern.
        return clients.get(pattern.replace("{ordinal}", str(index))) if pattern else None

    return AsyncShardedPoolClient(
        [clients.get(t) for t in targets], placement=server_placements(config), open_shard=open_shard
    )


_SPEC = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


@dataclass(frozen=True)
class ShardIdentity:
    """This pool process's shard: ``index`` of ``count`` (``str()`` gives ``"K/N"``)."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            raise ValueError(f"shard {self.index}/{self.count} does not exist: need 0 <= K < N and N >= 1")

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    @classmethod
    def parse(cls, spec: str) -> ShardIdentity:
        """``"K/N"`` (as given to ``--shard``).

        Raises:
            ConfigError: not of the form ``K/N`` with ``0 <= K < N``.
        """
        match = _SPEC.match(spec)
        if match is None:
            raise ConfigError(f"--shard {spec!r}: expected K/N, e.g. 0/3 for the first of three shards")
        index, count = int(match.group(1)), int(match.group(2))
        if count < 1 or index >= count:
            raise ConfigError(f"--shard {spec!r}: shard {index} does not exist among {count} (0 <= K < N)")
        return cls(index, count)

    @classmethod
    def from_pod_name(cls, pod_name: str, statefulset: str, count: int) -> ShardIdentity:
        """The shard of a StatefulSet pod: ``<statefulset>-<K>`` is shard ``K`` of ``count``.

        Raises:
            ConfigError: the pod name is not ``<statefulset>-<K>``, or ``K`` is not below ``count``.
        """
        prefix = f"{statefulset}-"
        ordinal = pod_name.removeprefix(prefix)
        if not pod_name.startswith(prefix) or not ordinal.isdigit():
            raise ConfigError(
                f"pod name {pod_name!r} is not a pod of the StatefulSet {statefulset!r} "
                f"(expected {statefulset}-<ordinal>; see toolscout.pool.shards.statefulset)"
            )
        index = int(ordinal)
        if index >= count:
            raise ConfigError(
                f"pod {pod_name!r} is shard {index} but toolscout.pool.shards.count is {count}: "
                "scale the StatefulSet and the count together"
            )
        return cls(index, count)
