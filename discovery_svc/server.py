"""Wiring: the discovery service, its gRPC server and the pool catalog follower."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

from toolscout.client import (
    AsyncPoolClient,
    AsyncShardedPoolClient,
    Tool,
    ToolscoutClientError,
    authorization_required,
)
from toolscout.discovery.v1 import discovery_pb2_grpc

from discovery_svc.catalog import Catalog
from discovery_svc.catalog_follower import CatalogFollower
from discovery_svc.engine import DiscoveryEngine
from discovery_svc.hybrid_stage import hybrid_stage_from_config
from discovery_svc.metrics import DiscoveryMetrics
from discovery_svc.servicer import DiscoveryServicer
from discovery_svc.user_index import ListUserTools, UserIndexes
from toolscout_kit.config import ToolscoutConfig
from toolscout_kit.logging import get_logger
from toolscout_kit.server import RunningServer, ServiceBinding, ServiceStart
from toolscout_kit.service_clients import PoolShards
from toolscout_kit.shards import server_placements, sharded_pool_client

__all__ = ["SERVICE_NAME", "build_server"]

SERVICE_NAME = "toolscout.discovery.v1.Discovery"

_log = get_logger(__name__)


async def build_server(
    config: ToolscoutConfig,
    *,
    listen: str | None = None,
    metrics_port: int | None = None,
    pool_target: str | None = None,
    pool_targets: Sequence[str] | None = None,
) -> RunningServer:
    """Starts discovery: NOT_SERVING until the first catalog arrives from the pool.

    The pool is followed shard by shard and merged into one catalog: a sharded pool's shards
    (``toolscout.pool.shards``, or ``pool_targets``: one address per shard), or the one pool at
    ``pool_target``.

    Raises:
        ConfigError: the address or metrics port cannot be bound, TLS files cannot be read, the pool
            is sharded without shard addresses, or hybrid search has an embedder that cannot work
            (e.g. the local model without the ``toolscout[embeddings]`` extra).
    """
    settings = config.toolscout.discovery
    shards = PoolShards(config, "discovery", pool_target or settings.pool_target, pool_targets)
    start = ServiceStart(config, "discovery", listen=listen, metrics_port=metrics_port)
    metrics = DiscoveryMetrics(start.registry)
    tracing = start.tracing
    hybrid = await asyncio.to_thread(hybrid_stage_from_config, config, metrics)
    # What per_user servers list to each principal (their searches), asked of the shard that runs
    # each server through the shards' own clients.
    pool = sharded_pool_client(config, shards.targets, shards.clients)
    users = UserIndexes(config, _user_tools_of(pool)) if config.per_user_servers else None
    service = DiscoveryEngine(config, metrics=metrics, hybrid=hybrid, users=users)
    binding = ServiceBinding(
        SERVICE_NAME,
        discovery_pb2_grpc.add_DiscoveryServicer_to_server,
        DiscoveryServicer(service, tracing),
        endless_streams=("WatchPlan",),
    )
    running = await start.serve(binding)
    running.add_cleanup(service.close)  # runs last: after the follower below has stopped
    await running.set_status(SERVICE_NAME, False)
    await running.set_status("", False)
    _follow_pool(running, service, shards, config, metrics, pool)
    return running


# Seconds to wait for the pool to list one per_user server's tools for a principal.
_USER_TOOLS_DEADLINE = 15.0


def _user_tools_of(pool: AsyncShardedPoolClient) -> ListUserTools:
    """The pool's ``ListTools`` of one ``per_user`` server as one principal sees it."""

    async def list_user_tools(server: str, principal: str) -> tuple[Tool, ...] | None:
        try:
            catalog = await pool.list_tools([server], principal=principal, deadline=_USER_TOOLS_DEADLINE)
        except ToolscoutClientError as err:
            if authorization_required(err) is not None:
                return None
            raise
        return catalog.tools

    return list_user_tools


def _follow_pool(
    running: RunningServer,
    service: DiscoveryEngine,
    shards: PoolShards,
    config: ToolscoutConfig,
    metrics: DiscoveryMetrics,
    pool: AsyncShardedPoolClient,
) -> None:
    """Follows the pool's catalog into ``service`` (shard by shard, merged): discovery turns SERVING
    with the first one. A config reload with a new shard count follows the new shards."""
    background: set[asyncio.Task[None]] = set()

    async def after_catalog() -> None:
        await running.set_status(SERVICE_NAME, True)
        await running.set_status("", True)
        try:
            # Build the all-tools state now so the first request does not pay for it.
            await service.warm()
        except Exception:
            _log.exception("warming the discovery index failed")

    def on_catalog(catalog: Catalog) -> None:
        if service.set_catalog(catalog):
            task = asyncio.create_task(after_catalog())
            background.add(task)
            task.add_done_callback(background.discard)

    def shard_clients(addresses: list[str]) -> dict[int, AsyncPoolClient]:
        # A shard still at the same address keeps its client (and its catalog stream).
        return {index: shards.client(address) for index, address in enumerate(addresses)}

    follower = CatalogFollower(
        shard_clients(shards.targets),
        on_catalog,
        # A server that vanishes from every shard while configured is moving between shards
        # (resharding): its tools stay, unavailable. One pool drops what it drops.
        configured=config.servers if shards.sharded else (),
        metrics=metrics,
    )
    follow_task = asyncio.create_task(follower.run(), name="discovery-pool-follower")

    async def reshard(new_config: ToolscoutConfig) -> None:
        addresses = shards.new_targets(new_config)
        if addresses is not None:
            await shards.forget(await follower.reshard(shard_clients(addresses), new_config.servers))
            pool.reshard([shards.client(a) for a in addresses], server_placements(new_config))

    async def cleanup() -> None:
        for task in (follow_task, *background):
            task.cancel()
        for task in (follow_task, *background):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await shards.close()

    running.add_reload(reshard)
    running.add_cleanup(cleanup)
