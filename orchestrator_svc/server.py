"""Wires the orchestrator: config → providers, prompts, gRPC seams → loop → servicer → server."""

from __future__ import annotations

from collections.abc import Sequence

from toolscout.client import Deferral
from toolscout.orchestrator.v1 import orchestrator_pb2_grpc

from orchestrator_svc.loop import ChatLoop
from orchestrator_svc.metrics import OrchestratorMetrics
from orchestrator_svc.prompts import SystemPrompts, check_templates
from orchestrator_svc.providers.deferral import FALLBACK_REASONS, resolve_for_model
from orchestrator_svc.providers.registry import ModelRegistry
from orchestrator_svc.seams import ClientDiscovery, ClientPool
from orchestrator_svc.servicer import OrchestratorServicer
from toolscout_kit.config import ToolscoutConfig
from toolscout_kit.server import RunningServer, ServiceBinding, ServiceStart
from toolscout_kit.service_clients import Downstream
from toolscout_kit.tracing import Tracing

__all__ = ["SERVICE_NAME", "build_server"]

SERVICE_NAME = "toolscout.orchestrator.v1.Orchestrator"


def _chat_loop(
    config: ToolscoutConfig,
    downstream: Downstream,
    models: ModelRegistry,
    metrics: OrchestratorMetrics,
    tracing: Tracing,
) -> ChatLoop:
    """The provider tool loop over the downstream services, with the models' prompts."""
    settings = config.toolscout.orchestrator
    metrics.expect_native_models(
        (
            name
            for name, m in config.models.items()
            if resolve_for_model(m, config.clients[m.client], settings)[0] == Deferral.NATIVE
        ),
        FALLBACK_REASONS,
    )
    return ChatLoop(
        models=models,
        discovery=ClientDiscovery(downstream.discovery),
        pool=ClientPool(downstream.pool),
        prompts=SystemPrompts(config.resolve_path(settings.templates_dir), settings.default_system_prompt),
        settings=settings,
        metrics=metrics,
        tracing=tracing,
        results=config.toolscout.results,
        per_user=bool(config.per_user_servers),
    )


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
    start = ServiceStart(config, "orchestrator", listen=listen, metrics_port=metrics_port)
    tracing = start.tracing
    settings = config.toolscout.orchestrator
    downstream = Downstream(
        config,
        "the orchestrator",
        pool_target=pool_target or settings.pool_target,
        discovery_target=discovery_target or settings.discovery_target,
        pool_targets=pool_targets,
    )
    models = ModelRegistry(config)
    loop = _chat_loop(config, downstream, models, OrchestratorMetrics(start.registry), tracing)
    servicer = OrchestratorServicer(loop, models, config)
    binding = ServiceBinding(SERVICE_NAME, orchestrator_pb2_grpc.add_OrchestratorServicer_to_server, servicer)
    server = await start.serve(binding, undo=[downstream.close])
    server.add_reload(downstream.reshard)
    # Chats still running when the grace ends are answered ABORTED (outcome unknown), not cut by
    # gRPC's own cancellation.
    server.add_drain(servicer.drain)
    server.add_cleanup(downstream.close)
    server.add_cleanup(models.aclose)  # runs first: the providers' clients before the services'
    return server
