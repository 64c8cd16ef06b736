"""Discovery end to end: real MCP servers (our examples, mcp-server-time) → real pool → discovery."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from toolscout.discovery.v1 import discovery_pb2, discovery_pb2_grpc

from discovery_svc.server import SERVICE_NAME
from discovery_svc.server import build_server as build_discovery
from mcp_pool_svc.pool import McpPool
from mcp_pool_svc.server import build_server as build_pool
from mcp_pool_svc.supervisor import ServerState
from tests.support.mcp_servers import example_server_config, time_server_config
from toolscout_kit.config import ToolscoutConfig, parse_config

pytestmark = pytest.mark.e2e
WAIT = 30.0


def _config(tmp_path: Path) -> ToolscoutConfig:
    return parse_config(
        {
            "servers": {
                "weather": example_server_config("weather", defer_loading=True),
                "text": example_server_config("text", defer_loading=True, always_load=["slugify"]),
                "time": time_server_config(),
            },
            "tool_sets": {
                "forecasts": {"servers": {"weather": ["get_forecast", "get_alerts"], "time": True}}
            },
            "tool_discovery": {"enabled": True},
        },
        base_dir=tmp_path,
    )


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[tuple[discovery_pb2_grpc.DiscoveryStub, str]]:
    config = _config(tmp_path)
    pool = McpPool(config)
    pool_server = await build_pool(config, listen="127.0.0.1:0", metrics_port=-1, pool=pool)
    discovery = await build_discovery(
        config, listen="127.0.0.1:0", metrics_port=-1, pool_target=pool_server.address
    )
    try:
        await pool.wait_until(
            lambda: all(
                pool.server_status(s).state is ServerState.READY for s in ("weather", "text", "time")
            ),
            WAIT,
        )
        version = pool.catalog.version
        async with grpc.aio.insecure_channel(discovery.address) as channel:
            watch = health_pb2_grpc.HealthStub(channel).Watch(
                health_pb2.HealthCheckRequest(service=SERVICE_NAME), timeout=WAIT
            )
            async for reply in watch:
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    watch.cancel()
                    break
            stub = discovery_pb2_grpc.DiscoveryStub(channel)
            await _until_version(stub, version)
            yield stub, version
    finally:
        await discovery.stop(0)
        await pool_server.stop(1)


async def _until_version(stub: Any, version: str) -> None:
    """Discovery follows the pool's WatchCatalog stream: wait (bounded) until it has caught up."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT
    while True:
        seen = (await stub.GetManifest(discovery_pb2.GetManifestRequest(), timeout=WAIT)).catalog_version
        if seen == version or loop.time() > deadline:
            assert seen == version
            return
        # The catalog arrives over another gRPC stream; poll, bounded by the deadline.
        await asyncio.sleep(0.02)


async def test_plan_and_search_over_a_real_pool_and_real_mcp_servers(stack: Any) -> None:
    stub, version = stack
    plan = await stub.PlanTools(discovery_pb2.PlanToolsRequest(), timeout=WAIT)
    loaded = {(t.server, t.name) for t in plan.loaded_tools}
    assert ("text", "slugify") in loaded  # always_load of a deferred server
    assert any(server == "time" for server, _ in loaded)  # not deferred
    assert not any(server == "weather" for server, _ in loaded)
    assert plan.has_search_tool
    assert "- weather (" in plan.manifest
    assert plan.catalog_version == version
    assert plan.tokens.saved_tokens > 0

    found = await stub.SearchTools(
        discovery_pb2.SearchToolsRequest(arguments_json='{"query": "weather forecast for a city"}'),
        timeout=WAIT,
    )
    assert found.matches[0].tool.server == "weather"
    forecast = next(t for t in found.newly_loaded if t.name == "get_forecast")
    assert "location" in json.loads(forecast.input_schema_json)["properties"]
    assert forecast.llm_name in found.result_text

    again = await stub.PlanTools(
        discovery_pb2.PlanToolsRequest(discovered_tools=[forecast.llm_name]), timeout=WAIT
    )
    assert again.loaded_tools[-1].llm_name == forecast.llm_name
    assert again.deferred_count == plan.deferred_count - 1


async def test_toolset_and_server_browse_over_a_real_pool(stack: Any) -> None:
    stub, _ = stack
    plan = await stub.PlanTools(discovery_pb2.PlanToolsRequest(toolset="forecasts"), timeout=WAIT)
    assert plan.total_tools == 2 + sum(1 for t in plan.loaded_tools if t.server == "time")
    assert "text" not in plan.manifest
    browse = await stub.SearchTools(discovery_pb2.SearchToolsRequest(server_name="weather"), timeout=WAIT)
    assert browse.mode == discovery_pb2.SEARCH_MODE_SERVER
    assert {m.tool.name for m in browse.matches} >= {"get_forecast", "get_alerts", "get_current_weather"}
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.SearchTools(
            discovery_pb2.SearchToolsRequest(toolset="forecasts", server_name="text"), timeout=WAIT
        )
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    assert err.value.details() == "Unknown server 'text'. Valid servers: time, weather."
