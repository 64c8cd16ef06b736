"""What discovery and the orchestrator need to know about a sharded pool, from the shared config.

Where each shard is reached (``toolscout.pool.shards``) and the configured placement of the servers
that are pinned or run on every shard; the sharded client in ``toolscout.client`` places the rest
by the same hash the pool uses.
"""

from __future__ import annotations

from toolscout.client import ServerPlacement

from toolscout_kit.config import ShardSettings, ToolscoutConfig
from toolscout_kit.errors import ConfigError

__all__ = ["SHARD_CHANNEL_OPTIONS", "server_placements", "shard_targets"]

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
