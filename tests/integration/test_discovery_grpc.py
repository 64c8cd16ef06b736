"""Discovery over real grpc.aio servers on 127.0.0.1:0, fed by a fake pool (the client library's)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from toolscout.client import AsyncPoolClient, PlanRequest, wire
from toolscout.client.testing import FakePool
from toolscout.common.v1 import common_pb2
from toolscout.discovery.v1 import discovery_pb2, discovery_pb2_grpc
from toolscout.mcp_pool.v1 import mcp_pool_pb2_grpc

from discovery_svc.catalog import Catalog
from discovery_svc.catalog_follower import CatalogFollower
from discovery_svc.engine import DiscoveryEngine
from discovery_svc.server import SERVICE_NAME, build_server
from discovery_svc.servicer import DiscoveryServicer
from toolscout_kit.config import ToolscoutConfig, parse_config
from toolscout_kit.server import RunningServer, ServiceBinding, start_server

WAIT = 10.0


def pb_tool(
    server: str, name: str, description: str, params: dict[str, Any] | None = None
) -> common_pb2.Tool:
    schema = {"type": "object", "properties": params or {}}
    return common_pb2.Tool(
        server=server,
        name=name,
        llm_name=f"{server}_{name}",
        description=description,
        input_schema_json=json.dumps(schema),
        available=True,
    )


TOOLS = [
    pb_tool("weather", "forecast", "Weather forecast for a city.", {"city": {"type": "string"}}),
    pb_tool("weather", "alerts", "Severe weather alerts."),
    pb_tool("mail", "send_email", "Send an email to a recipient.", {"to": {"type": "string"}}),
    pb_tool("time", "now", "Current time."),
]


def make_config() -> ToolscoutConfig:
    return parse_config(
        {
            "servers": {
                "weather": {"command": "w", "defer_loading": True},
                "mail": {"command": "m", "defer_loading": True},
                "time": {"command": "t"},
            },
            "tool_sets": {"no_mail": {"servers": {"weather": True, "time": True}}},
            "tool_discovery": {"enabled": True},
        },
        env={},
    )


def fake_pool(tools: list[common_pb2.Tool], version: str) -> FakePool:
    """The client library's fake pool serving ``tools`` at ``version`` (publish() pushes a new one)."""
    return FakePool([wire.tool(t) for t in tools], catalog_version=version)


async def start_pool(pool: FakePool, address: str = "127.0.0.1:0") -> tuple[FakePool, int]:
    target = await pool.start(address)
    return pool, int(target.rsplit(":", 1)[1])


@pytest.fixture
async def pool() -> AsyncIterator[tuple[FakePool, int]]:
    fake = fake_pool(list(TOOLS), "v1")
    server, port = await start_pool(fake)
    yield fake, port
    await server.stop(0)


@pytest.fixture
async def discovery(
    pool: tuple[FakePool, int],
) -> AsyncIterator[tuple[RunningServer, discovery_pb2_grpc.DiscoveryStub]]:
    running = await build_server(
        make_config(), listen="127.0.0.1:0", metrics_port=-1, pool_target=f"127.0.0.1:{pool[1]}"
    )
    async with grpc.aio.insecure_channel(running.address) as channel:
        await wait_serving(channel)
        yield running, discovery_pb2_grpc.DiscoveryStub(channel)
    await running.stop(0)


async def wait_serving(channel: grpc.aio.Channel) -> None:
    watch = health_pb2_grpc.HealthStub(channel).Watch(
        health_pb2.HealthCheckRequest(service=SERVICE_NAME), timeout=WAIT
    )
    async for reply in watch:
        if reply.status == health_pb2.HealthCheckResponse.SERVING:
            watch.cancel()
            return


async def test_discovery_is_not_serving_until_the_pool_sends_a_catalog() -> None:
    fake = fake_pool(list(TOOLS), "v1")
    pool_server = grpc.aio.server()
    mcp_pool_pb2_grpc.add_McpPoolServicer_to_server(fake, pool_server)
    port = pool_server.add_insecure_port("127.0.0.1:0")  # bound, not started: connections fail
    running = await build_server(
        make_config(), listen="127.0.0.1:0", metrics_port=-1, pool_target=f"127.0.0.1:{port}"
    )
    try:
        async with grpc.aio.insecure_channel(running.address) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            reply = await health.Check(health_pb2.HealthCheckRequest(service=SERVICE_NAME), timeout=WAIT)
            assert reply.status == health_pb2.HealthCheckResponse.NOT_SERVING
            stub = discovery_pb2_grpc.DiscoveryStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.PlanTools(discovery_pb2.PlanToolsRequest(), timeout=WAIT)
            assert err.value.code() == grpc.StatusCode.UNAVAILABLE
            await pool_server.start()
            await wait_serving(channel)
            plan = await stub.PlanTools(discovery_pb2.PlanToolsRequest(), timeout=WAIT)
            assert plan.catalog_version == "v1"
    finally:
        await running.stop(0)
        await pool_server.stop(0)


async def test_plan_tools_over_grpc_returns_definitions_manifest_and_tokens(discovery: Any) -> None:
    _, stub = discovery
    plan = await stub.PlanTools(
        discovery_pb2.PlanToolsRequest(discovered_tools=["mail_send_email", "gone"]), timeout=WAIT
    )
    assert [t.llm_name for t in plan.loaded_tools] == ["time_now", "mail_send_email"]
    assert json.loads(plan.loaded_tools[1].input_schema_json)["properties"] == {"to": {"type": "string"}}
    assert plan.has_search_tool
    assert plan.search_tool.llm_name == "search_tools"
    assert plan.manifest in plan.search_tool.description
    assert plan.manifest_placement == discovery_pb2.MANIFEST_PLACEMENT_TOOL_DESCRIPTION
    assert (plan.total_tools, plan.loaded_count, plan.deferred_count) == (4, 2, 2)
    assert list(plan.dropped_tools) == ["gone"]
    assert plan.tokens.encoding == "o200k_base"
    assert plan.tokens.all_definitions_tokens > 0
    assert plan.tokens.saved_tokens == max(plan.tokens.all_definitions_tokens - plan.tokens.sent_tokens, 0)


async def test_search_tools_over_grpc_returns_matches_and_the_llm_text(discovery: Any) -> None:
    _, stub = discovery
    reply = await stub.SearchTools(
        discovery_pb2.SearchToolsRequest(
            arguments_json='{"query": "weather forecast city"}', loaded_tools=["weather_alerts"]
        ),
        timeout=WAIT,
    )
    assert reply.mode == discovery_pb2.SEARCH_MODE_QUERY
    assert reply.matches[0].tool.llm_name == "weather_forecast"
    assert reply.newly_loaded[0].llm_name == "weather_forecast"
    assert any(m.already_loaded and m.tool.llm_name == "weather_alerts" for m in reply.matches)
    assert reply.result_text.startswith("Found ")
    assert reply.catalog_version == "v1"

    names = await stub.SearchTools(discovery_pb2.SearchToolsRequest(tool_names=["send_emial"]), timeout=WAIT)
    assert names.mode == discovery_pb2.SEARCH_MODE_TOOL_NAMES
    assert names.not_found[0].name == "send_emial"
    assert names.not_found[0].closest[0] == "mail_send_email"


@pytest.mark.parametrize(
    ("request_kwargs", "code", "details"),
    [
        ({"arguments_json": '{"tool_names": "x"}'}, grpc.StatusCode.INVALID_ARGUMENT,
         "'tool_names' must be a list of strings (e.g. [\"get_weather\"]), got a string."),
        ({"arguments_json": "{}"}, grpc.StatusCode.INVALID_ARGUMENT,
         "Provide at least one of: query, server_name, or tool_names."),
        ({"query": "q" * 501}, grpc.StatusCode.INVALID_ARGUMENT,
         "'query' is 501 characters; keep it under 500 (a few keywords work best)."),
        ({"server_name": "wether"}, grpc.StatusCode.NOT_FOUND,
         "Unknown server 'wether'. Valid servers: mail, time, weather."),
        ({"toolset": "nope", "query": "x"}, grpc.StatusCode.NOT_FOUND, "Unknown toolset 'nope'. Toolsets: no_mail."),
    ],
)  # fmt: skip
async def test_search_errors_map_to_status_codes_with_the_llm_facing_message(
    discovery: Any, request_kwargs: dict[str, Any], code: grpc.StatusCode, details: str
) -> None:
    _, stub = discovery
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.SearchTools(discovery_pb2.SearchToolsRequest(**request_kwargs), timeout=WAIT)
    assert err.value.code() == code
    assert err.value.details() == details


async def test_get_manifest_over_grpc_stays_within_budget(discovery: Any) -> None:
    _, stub = discovery
    first = await stub.GetManifest(
        discovery_pb2.GetManifestRequest(toolset="no_mail", provider="anthropic"), timeout=WAIT
    )
    second = await stub.GetManifest(discovery_pb2.GetManifestRequest(toolset="no_mail"), timeout=WAIT)
    assert first.manifest == second.manifest
    assert "mail" not in first.manifest
    assert 0 < first.tokens <= first.budget_tokens == 2000
    assert (first.deferred_servers, first.deferred_tools) == (1, 2)


async def _follow(
    port: int,
) -> tuple[DiscoveryEngine, asyncio.Queue[Catalog], asyncio.Task[None], AsyncPoolClient]:
    service = DiscoveryEngine(make_config())
    seen: asyncio.Queue[Catalog] = asyncio.Queue()

    def on_catalog(catalog: Catalog) -> None:
        service.set_catalog(catalog)
        seen.put_nowait(catalog)

    pool = AsyncPoolClient.connect(f"127.0.0.1:{port}")
    follower = CatalogFollower({0: pool}, on_catalog, initial_backoff=0.05, max_backoff=0.2)
    return service, seen, asyncio.create_task(follower.run()), pool


async def test_catalog_changes_from_the_pool_rebuild_and_keep_discovered_tools(
    pool: tuple[FakePool, int],
) -> None:
    fake, port = pool
    service, seen, task, pool_client = await _follow(port)
    try:
        assert (await asyncio.wait_for(seen.get(), WAIT)).version == "v1"
        running = await start_server(
            [
                ServiceBinding(
                    SERVICE_NAME,
                    discovery_pb2_grpc.add_DiscoveryServicer_to_server,
                    DiscoveryServicer(service),
                )
            ],
            make_config().toolscout.discovery,
            make_config().toolscout.security,
            listen="127.0.0.1:0",
            metrics_port=-1,
        )
        async with grpc.aio.insecure_channel(running.address) as client:
            stub = discovery_pb2_grpc.DiscoveryStub(client)
            request = discovery_pb2.PlanToolsRequest(discovered_tools=["mail_send_email"])
            before = await stub.PlanTools(request, timeout=WAIT)
            fake.publish(
                [wire.tool(t) for t in [*TOOLS, pb_tool("weather", "radar", "Rain radar images.")]], "v2"
            )
            assert (await asyncio.wait_for(seen.get(), WAIT)).version == "v2"
            after = await stub.PlanTools(request, timeout=WAIT)
            assert after.catalog_version == "v2"
            assert [t.llm_name for t in after.loaded_tools] == [t.llm_name for t in before.loaded_tools]
            assert after.total_tools == before.total_tools + 1
            assert service.builds == 2
        await running.stop(0)
    finally:
        task.cancel()
        await pool_client.close()


async def test_follower_reconnects_when_the_pool_restarts() -> None:
    first_server, port = await start_pool(fake_pool(list(TOOLS), "v1"))
    service, seen, task, pool_client = await _follow(port)
    try:
        assert (await asyncio.wait_for(seen.get(), WAIT)).version == "v1"
        await first_server.stop(0)
        # A new pool process comes up on the same address with a changed catalog.
        restarted = fake_pool([*TOOLS, pb_tool("time", "zone", "Time zones.")], "v2")
        second_server, _ = await start_pool(restarted, f"127.0.0.1:{port}")
        try:
            assert (await asyncio.wait_for(seen.get(), WAIT)).version == "v2"
            plan = await service.plan_tools(PlanRequest())
            assert plan.total_tools == len(TOOLS) + 1
        finally:
            await second_server.stop(0)
    finally:
        task.cancel()
        await pool_client.close()
