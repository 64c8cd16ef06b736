"""Discovery refuses bad field values as invalid arguments rather than failing inside (issue 10)."""

from __future__ import annotations

import pytest
from toolscout.client import SearchRequest

from discovery_svc.engine import DiscoveryEngine
from tests.support.discovery_catalogs import catalog, config, make_tool
from toolscout_kit.errors import InvalidArgumentError

DOC = {"servers": {"weather": {"command": "w", "defer_loading": True}}, "tool_discovery": {"enabled": True}}


@pytest.mark.parametrize("max_results", [-1, -1000])
async def test_a_negative_max_results_is_an_invalid_argument(max_results: int) -> None:
    engine = DiscoveryEngine(config(DOC))
    engine.set_catalog(catalog([make_tool("weather", "forecast", "Weather forecast.")], "v1"))
    with pytest.raises(InvalidArgumentError, match="max_results"):
        await engine.search_tools(SearchRequest(query="weather", max_results=max_results))


async def test_search_arguments_nested_too_deeply_are_an_invalid_argument() -> None:
    engine = DiscoveryEngine(config(DOC))
    engine.set_catalog(catalog([make_tool("weather", "forecast", "Weather forecast.")], "v1"))
    deep = '{"query":' + "[" * 100_000 + "]" * 100_000 + "}"
    with pytest.raises(InvalidArgumentError, match="JSON object"):
        await engine.search_tools(SearchRequest(arguments_json=deep))
