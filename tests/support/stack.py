"""The three services in-process on 127.0.0.1:0, wired to each other, for integration tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from toolscout_kit.config import ToolscoutConfig
from toolscout_kit.server import RunningServer

if TYPE_CHECKING:
    from mcp_pool_svc.pool import McpPool

__all__ = ["Stack", "running_stack"]


@dataclass
class Stack:
    pool: RunningServer
    discovery: RunningServer
    orchestrator: RunningServer | None


@asynccontextmanager
async def running_stack(
    config: ToolscoutConfig, *, orchestrator: bool = True, pool_object: McpPool | None = None
) -> AsyncIterator[Stack]:
    """Starts pool → discovery → orchestrator (each on a free port) and stops them in reverse;
    ``pool_object``: the pool the pool service hosts (tests that look inside it)."""
    from discovery_svc.server import build_server as build_discovery
    from mcp_pool_svc.server import build_server as build_pool
    from orchestrator_svc.server import build_server as build_orchestrator

    pool = await build_pool(config, listen="127.0.0.1:0", metrics_port=0, pool=pool_object)
    started: list[RunningServer] = [pool]
    try:
        discovery = await build_discovery(
            config, listen="127.0.0.1:0", metrics_port=0, pool_target=pool.address
        )
        started.append(discovery)
        orch = None
        if orchestrator:
            orch = await build_orchestrator(
                config,
                listen="127.0.0.1:0",
                metrics_port=0,
                pool_target=pool.address,
                discovery_target=discovery.address,
            )
            started.append(orch)
        yield Stack(pool, discovery, orch)
    finally:
        for server in reversed(started):
            await server.stop(0.5)
