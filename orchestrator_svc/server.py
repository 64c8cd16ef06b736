"""Wires the orchestrator: config → providers, prompts, gRPC seams → loop → servicer → server."""

from __future__ import annotations

from toolscout.client import AsyncDiscoveryClient, AsyncPoolClient
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
from toolscout_kit.metrics import new_registry
from toolscout_kit.server import RunningServer, ServiceBinding, start_server

__all__ = ["SERVICE_NAME", "build_server"]

SERVICE_NAME = "toolscout.orchestrator.v1.Orchestrator"


async def build_server(
    config: ToolscoutConfig,
    *,
    listen: str | None = None,
    metrics_port: int | None = None,
    pool_target: str | None = None,
    discovery_target: str | None = None,
) -> RunningServer:
    """Starts the orchestrator; the overrides replace the config's settings (tests use port 0).

    Raises:
        ConfigError: the address cannot be bound, or a model's template does not load.
    """
    check_templates(config)
    settings = config.toolscout.orchestrator
    security = config.toolscout.security
    # Each tool call is bounded by its server's call_timeout in the pool and by the chat's deadline;
    # the client library's default CallTool deadline would cut servers configured for longer calls.
    pool = AsyncPoolClient(
        create_channel(pool_target or settings.pool_target, security),
        deadlines={"CallTool": None},
        owns_channel=True,
    )
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
            if resolve_for_model(m, config.clients[m.client], settings)[0] == "native"
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
    )
    servicer = OrchestratorServicer(loop, models, config)
    binding = ServiceBinding(SERVICE_NAME, orchestrator_pb2_grpc.add_OrchestratorServicer_to_server, servicer)
    try:
        server = await start_server(
            [binding], settings, security, registry=registry, listen=listen, metrics_port=metrics_port
        )
    except BaseException:
        await pool.close()
        await discovery.close()
        raise

    async def close_clients() -> None:
        await models.aclose()
        await pool.close()
        await discovery.close()

    server.add_cleanup(close_clients)
    return server
