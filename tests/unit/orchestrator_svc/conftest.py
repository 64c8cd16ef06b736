"""Fixtures for the orchestrator's unit tests: the loop wired to in-memory seams and the fake provider."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from tests.support.fake_provider import FakeProvider
from tests.support.orchestrator_fakes import FakeDiscovery, FakePool, Harness, make_config, make_loop, tool


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    (tmp_path / "tools.j2").write_text("Tools: {% for t in tools %}{{ t.name }} {% endfor %}")
    async with FakeProvider() as fake:
        config = make_config(fake, tmp_path, max_iterations=5, max_tool_result_chars=300)
        discovery = FakeDiscovery(
            eager=[tool("clock", "now", "Current time")],
            deferred=[
                tool("weather", "forecast", "Weather forecast for a city", city="string"),
                tool("weather", "alerts", "Severe weather alerts", region="string"),
                tool("files", "read", "Read a file", path="string"),
            ],
        )
        pool = FakePool()
        registry = CollectorRegistry()
        loop = make_loop(config, discovery, pool, registry)
        yield Harness(fake, discovery, pool, loop, registry, config)
        await loop.models.aclose()
