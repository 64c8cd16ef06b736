"""Wires the orchestrator: config → providers, prompts, gRPC seams → loop → servicer → server."""

from __future__ import annotations

from collections.abc import Sequence

from toolscout.client import AsyncDiscoveryClient, Deferral
from toolscout.orchestrator.v1 import orchestrator_pb2_grpc

from orchestrator_svc.downstream import ClientDiscovery, ClientPool
from orchestrator_svc.loop import ChatLoop
from orchestrator_svc.metrics import OrchestratorMetrics
from orchestrator_svc.prompts import SystemPrompts, check_templates
from orchestrator_svc.providers.deferral import FALLBACK_REASONS, resolve_for_model
from orchestrator_svc.providers.registry import ModelRegistry
from orchestrator_svc.servicer import OrchestratorServicer
from toolscout_kit.channels import create_channel
from toolscout_kit.config import ToolscoutConfig
from toolscout_kit.logging import get_logger
from toolscout_kit.metrics import new_registry
from toolscout_kit.server import RunningServer, ServiceBinding, start_server
from toolscout_kit.shards import ShardClients, server_placements, shard_targets, sharded_pool_client
from toolscout_kit.tracing import tracing_for

__all__ = ["SERVICE_NAME", "build_server"]

SERVICE_NAME = "toolscout.orchestrator.v1.Orchestrator"

_log = get_logger(__name__)


async def build_server(
    config: ToolscoutConfig,
    *,
    listen: str | None = None,
    metrics_port: int | None = None,
    pool_target: str | None = None,
    discovery_target: str | None = None,
    pool_targets: Sequence[str] | None = None,
) -> RunningServer:
    """Starts the orchestrator; the overrides replace the config's settings (tests use port 0).

    Tool calls go to the pool shard that runs the tool's server (``toolscout.pool.shards``, or
    ``pool_targets``: one address per shard; else the one pool at ``pool_target``).

    Raises:
        ConfigError: the address cannot be bound, a model's template does not load, or the pool is
            sharded without shard addresses.
    """
    check_templates(config)
    tracing = tracing_for(config, "orchestrator")
    settings = config.toolscout.orchestrator
    security = config.toolscout.security
    targets = list(pool_targets) if pool_targets else shard_targets(config.toolscout.pool.shards)
    shard_clients = ShardClients(security)
    pool = sharded_pool_client(config, targets or [pool_target or settings.pool_target], shard_clients)
    discovery = AsyncDiscoveryClient(
        create_channel(discovery_target or settings.discovery_target, security), owns_channel=True
    )
    registry = new_registry()
    models = ModelRegistry(config)
    metrics = OrchestratorMetrics(registry)
    metrics.expect_native_models(
        (
            name
            for name, m in config.models.items()
            if resolve_for_model(m, config.clients[m.client], settings)[0] == Deferral.NATIVE
        ),
        FALLBACK_REASONS,
    )
    loop = ChatLoop(
        models=models,
        discovery=ClientDiscovery(discovery),
        pool=ClientPool(pool),
        prompts=SystemPrompts(config.resolve_path(settings.templates_dir), settings.default_system_prompt),
        settings=settings,
        metrics=metrics,
        tracing=tracing,
        results=config.toolscout.results,
    )
    servicer = OrchestratorServicer(loop, models, config)
    binding = ServiceBinding(SERVICE_NAME, orchestrator_pb2_grpc.add_OrchestratorServicer_to_server, servicer)
    try:
        server = await start_server(
            [binding],
            settings,
            security,
            registry=registry,
            listen=listen,
            metrics_port=metrics_port,
            tracing=tracing,
        )
    except BaseException:
        await shard_clients.close()
        await discovery.close()
        await tracing.shutdown()
        raise

    async def close_clients() -> None:
        await models.aclose()
        await pool.close()
        await shard_clients.close()
        await discovery.close()

    async def reshard(new_config: ToolscoutConfig) -> None:
        addresses = shard_targets(new_config.toolscout.pool.shards)
        if addresses is None and targets is None:
            return
        if addresses is None:
            _log.warning("the pool is no longer sharded in the config: restart the orchestrator to apply it")
            return
        unused = pool.reshard([shard_clients.get(a) for a in addresses], server_placements(new_config))
        await shard_clients.forget(unused)
        _log.info("routing tool calls to pool shards", shards=len(addresses))

    server.add_reload(reshard)
    server.add_cleanup(close_clients)
    return server
