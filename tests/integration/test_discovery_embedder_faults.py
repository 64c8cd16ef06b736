"""An embedder that fails in any way never fails a search: discovery's real gRPC server on
127.0.0.1:0 with hybrid search through the real openai SDK against a local /v1/embeddings server
that misbehaves (tests/support/fake_embeddings.py): malformed 200 replies, a hang, recovery."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
import structlog
from prometheus_client import CollectorRegistry
from toolscout.discovery.v1 import discovery_pb2, discovery_pb2_grpc

from discovery_svc.embeddings import OpenAICompatibleEmbedder
from discovery_svc.engine import DiscoveryEngine
from discovery_svc.hybrid_stage import HybridStage
from discovery_svc.metrics import DiscoveryMetrics
from tests.integration.test_discovery_grpc import TOOLS, make_config
from tests.integration.test_discovery_toolsets_hybrid_grpc import catalog, scrape, serve
from tests.support.fake_embeddings import MALFORMED_REPLIES, FakeEmbeddings
from toolscout_kit.server import RunningServer

WAIT = 20.0


@dataclass
class Running:
    fake: FakeEmbeddings
    engine: DiscoveryEngine
    server: RunningServer
    stub: discovery_pb2_grpc.DiscoveryStub

    def metric(self, name: str) -> float:
        return scrape(self.server).get(name, 0.0)

    def fallbacks(self, reason: str) -> float:
        return self.metric(f'toolscout_discovery_search_fallbacks_total{{reason="{reason}"}}')

    def mode(self) -> str:
        samples = scrape(self.server)
        [active] = [
            m
            for m in ("bm25", "hybrid")
            if samples[f'toolscout_discovery_search_mode_active{{mode="{m}"}}'] == 1
        ]
        return active

    async def search(self, query: str) -> list[str]:
        request = discovery_pb2.SearchToolsRequest(arguments_json=json.dumps({"query": query}))
        reply = await self.stub.SearchTools(request, timeout=WAIT)
        return [m.tool.llm_name for m in reply.matches]

    def queries_seen(self) -> list[str]:
        """Texts of the single-input requests the endpoint received (queries and probes)."""
        inputs = [r["body"]["input"] for r in self.fake.requests]
        return [i[0] if isinstance(i, list) else i for i in inputs if isinstance(i, str) or len(i) == 1]


async def until(check: Callable[[], bool], what: str, within: float = WAIT) -> None:
    """Waits (bounded) for a condition on the service's observable state."""
    async with asyncio.timeout(within):
        while not check():  # noqa: ASYNC110  # a metric has no event to wait on
            await asyncio.sleep(0.02)


@pytest.fixture
async def running(request: pytest.FixtureRequest) -> AsyncIterator[Running]:
    options: dict[str, Any] = dict(getattr(request, "param", {}))
    registry = CollectorRegistry()
    metrics = DiscoveryMetrics(registry)
    async with FakeEmbeddings(dim=32, malformed=options.pop("malformed", None)) as fake:
        embedder = OpenAICompatibleEmbedder(
            base_url=fake.base_url, model="embed", timeout=5.0, max_retries=0, query_timeout=0.5
        )
        stage = HybridStage(embedder, metrics=metrics, batch_size=8, query_timeout=0.5, **options)
        engine = DiscoveryEngine(make_config(), metrics=metrics, hybrid=stage)
        engine.set_catalog(catalog())
        await engine.warm()
        server = await serve(engine, registry)
        try:
            async with grpc.aio.insecure_channel(server.address) as channel:
                yield Running(fake, engine, server, discovery_pb2_grpc.DiscoveryStub(channel))
        finally:
            await server.stop(0)
            await engine.close()


async def hybrid_ready(r: Running) -> None:
    async with asyncio.timeout(WAIT):
        await r.engine.wait_hybrid_ready()
    assert r.mode() == "hybrid"


@pytest.mark.parametrize("malformed", MALFORMED_REPLIES)
async def test_a_malformed_query_embedding_is_answered_by_bm25_and_logged_once(
    running: Running, malformed: str
) -> None:
    await hybrid_ready(running)
    running.fake.malformed = malformed
    with structlog.testing.capture_logs() as logs:
        assert (await running.search("weather forecast"))[0] == "weather_forecast"
        assert (await running.search("send email"))[0] == "mail_send_email"
    assert running.fallbacks("malformed") == 2
    assert running.metric('toolscout_discovery_searches_total{mode="query",outcome="found"}') == 2
    assert 'toolscout_discovery_searches_total{mode="query",outcome="error"}' not in scrape(running.server)
    warnings = [e for e in logs if e["log_level"] in ("warning", "error")]
    assert [e["event"] for e in warnings] == ["query embedding failed; answering with BM25 alone"], warnings
    assert all("exc_info" not in e for e in logs)


@pytest.mark.parametrize("running", [{"malformed": "nan", "retry_initial": 0.05}], indirect=True)
@pytest.mark.parametrize("malformed", ["nan", "ragged", "non_json", "wrong_count"])
async def test_a_catalog_embedded_with_malformed_vectors_stays_bm25_and_is_retried(
    running: Running, malformed: str
) -> None:
    running.fake.malformed = malformed
    await until(lambda: running.metric("toolscout_discovery_embedding_failures_total") >= 2, "retries")
    assert running.mode() == "bm25"
    assert (await running.search("weather forecast"))[0] == "weather_forecast"
    # Nothing malformed was kept: once the endpoint is well again, every tool is embedded anew.
    assert running.metric("toolscout_discovery_tools_embedded_total") == 0
    running.fake.malformed = None
    await hybrid_ready(running)
    assert running.metric("toolscout_discovery_tools_embedded_total") == len(TOOLS)


async def test_a_hung_embedder_is_skipped_after_a_few_timeouts_then_used_again_once_it_returns(
    running: Running,
) -> None:
    await hybrid_ready(running)
    running.fake.hold = asyncio.Event()  # every reply now waits: the embedder hangs
    queries = [f"weather forecast {n}" for n in range(12)]
    for query in queries:
        assert (await running.search(query))[0] == "weather_forecast"
    assert running.mode() == "bm25"  # the breaker opened
    timeouts = running.fallbacks("timeout")
    # After a few timeouts the searches stopped waiting for the embedder: they never reached it.
    reached = [q for q in queries if q in running.queries_seen()]
    assert reached == queries[: int(timeouts)]
    assert timeouts < len(queries)
    assert running.fallbacks("breaker_open") == len(queries) - timeouts

    # The embedder answers again: a probe finds out, and searches are hybrid once more.
    hold, running.fake.hold = running.fake.hold, None
    hold.set()
    await hybrid_ready(running)  # a probe found the embedder answering: the breaker closed
    before = {reason: running.fallbacks(reason) for reason in ("timeout", "breaker_open", "malformed")}
    assert (await running.search("forecast again"))[0] == "weather_forecast"
    assert "forecast again" in running.queries_seen()
    assert {reason: running.fallbacks(reason) for reason in before} == before
