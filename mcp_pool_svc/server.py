"""Wires the pool into a gRPC server: McpPool service, per-server health, shutdown cleanup, resharding."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from toolscout.client import ServerStatus
from toolscout.mcp_pool.v1 import mcp_pool_pb2_grpc

from mcp_pool_svc.metrics import PoolMetrics
from mcp_pool_svc.placement import ShardIdentity, resolve_identity
from mcp_pool_svc.pool import McpPool
from mcp_pool_svc.servicer import CallStreams, McpPoolServicer
from mcp_pool_svc.supervisor import HEALTH_PREFIX
from toolscout_kit.config import ToolscoutConfig
from toolscout_kit.metrics import grpc_server_metrics
from toolscout_kit.server import RunningServer, ServiceBinding, ServiceStart

__all__ = ["SERVICE_NAME", "build_server"]

SERVICE_NAME = "toolscout.mcp_pool.v1.McpPool"
# How long start-up waits for the servers' first connection before serving anyway.
_STARTUP_WAIT = 10.0


async def build_server(
    config: ToolscoutConfig,
    *,
    listen: str | None = None,
    metrics_port: int | None = None,
    pool: McpPool | None = None,
    on_server_change: Callable[[ServerStatus], None] | None = None,
    shard: ShardIdentity | None = None,
    shard_spec: str | None = None,
    pod_name: str | None = None,
) -> RunningServer:
    """Starts the pool and a server hosting it; ``stop()`` on the result also stops the pool.

    Servers are connected in parallel; the gRPC port opens once each has connected or failed
    once (bounded), so the first ListTools already has what is reachable. ``on_server_change``
    receives a server's status on each of its state or catalog changes, from the first
    connection attempt on (``toolscout up`` prints progress with it). ``pool`` lets tests
    inspect the pool they serve.

    A sharded pool runs only its shard's servers: ``shard``, or ``shard_spec`` ("K/N", from
    ``--shard``), or ``pod_name`` (a StatefulSet pod ``<statefulset>-<K>``). A config reload
    (:meth:`RunningServer.reload`) applies a new shard count and placement (:meth:`McpPool.reshard`).

    Raises:
        ConfigError: the shard is malformed, disagrees with ``toolscout.pool.shards``, or is missing
            while the pool is sharded; or the address cannot be bound.
    """
    start = ServiceStart(config, "pool", listen=listen, metrics_port=metrics_port)
    tracing = start.tracing
    if pool is None:
        identity = shard or resolve_identity(config.toolscout.pool.shards, spec=shard_spec, pod_name=pod_name)
        pool = McpPool(config, shard=identity, metrics=PoolMetrics(start.registry), tracing=tracing)
    if on_server_change is not None:
        hook = on_server_change
        pool.add_listener(lambda server: hook(pool.server_status(server)))
    try:
        # Cancelled or failed at any point (Ctrl-C during start-up): no MCP server process stays.
        await pool.start(wait=_STARTUP_WAIT)
    except BaseException:
        await pool.stop()
        await tracing.shutdown()
        raise
    streams = CallStreams(pool, grpc_server_metrics(start.registry))
    servicer = McpPoolServicer(pool, streams)
    binding = ServiceBinding(
        SERVICE_NAME,
        mcp_pool_pb2_grpc.add_McpPoolServicer_to_server,
        servicer,
        endless_streams=("WatchCatalog",),
    )
    running = await start.serve(binding, undo=[pool.stop])
    # Calls still running when the grace ends are answered "outcome unknown" (ABORTED), not left
    # for gRPC to cancel with UNAVAILABLE, which would tell the caller they were never sent.
    running.add_drain(pool.drain)
    # CallToolStream streams stop reading, answer what they read, and end (not held to the grace).
    running.add_drain(streams.drain)
    running.add_cleanup(pool.stop)

    async def reshard(new_config: ToolscoutConfig) -> None:
        await pool.reshard(new_config)  # (what moved is the pool's own log line)

    running.add_reload(reshard)
    await _report_server_health(running, pool)
    return running


async def _report_server_health(running: RunningServer, pool: McpPool) -> None:
    """Each MCP server's health (``HEALTH_PREFIX`` + its name) follows its state from now on; a
    server handed to another shard reports NOT_SERVING here."""
    pending: set[asyncio.Task[None]] = set()

    def report(server: str) -> None:
        # Health updates are async; keep a reference so the task is not collected mid-flight.
        task = asyncio.create_task(running.set_status(HEALTH_PREFIX + server, pool.is_serving(server)))
        pending.add(task)
        task.add_done_callback(pending.discard)

    for name in pool.server_names:
        await running.set_status(HEALTH_PREFIX + name, pool.is_serving(name))
    pool.add_listener(report)
