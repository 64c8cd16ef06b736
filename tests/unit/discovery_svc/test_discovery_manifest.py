"""The manifest: PRD format, stable bytes, and a token budget it never exceeds."""

from __future__ import annotations

import pytest

from discovery_svc.manifest import (
    _LEVELS,
    BuiltManifest,
    build_manifest,
    search_tool_description,
    system_message,
)
from discovery_svc.tokens import TokenCounter
from tests.support.discovery_catalogs import catalog, make_tool, synthetic_tools

COUNTER = TokenCounter()


def count(text: str) -> int:
    return max(COUNTER.count_text(text, "o200k_base"), COUNTER.count_text(text, "cl100k_base"))


WEATHER = [
    make_tool("weather", "get_current_weather", "Current conditions for a city. Uses the API."),
    make_tool("weather", "get_forecast", "Forecasts for the next days."),
    make_tool("weather", "get_alerts", "Severe weather alerts."),
]
NOTION = [make_tool("notion", f"tool_{i:02d}", f"Notion operation {i}.") for i in range(15)]


def test_small_catalog_manifest_has_the_prd_format() -> None:
    deferred = catalog(WEATHER + NOTION).tools
    manifest = build_manifest(deferred, count, 2000)
    assert manifest.text == (
        "Available tool servers (call search_tools to load their definitions):\n\n"
        "- notion (15 tools): tool_00, tool_01, tool_02, tool_03, ... and 11 more\n"
        "  Notion operation 0. Notion operation 1. Notion operation 2. Notion operation...\n\n"
        "- weather (3 tools): get_alerts, get_current_weather, get_forecast\n"
        "  Severe weather alerts. Current conditions for a city. Forecasts for the next..."
    )
    assert (manifest.deferred_servers, manifest.deferred_tools, manifest.level) == (2, 18, 0)
    assert manifest.tokens == count(manifest.text)


def test_manifest_bytes_do_not_depend_on_input_order() -> None:
    tools = WEATHER + NOTION
    shuffled = sorted(tools, key=lambda t: t.description, reverse=True)
    first = build_manifest(catalog(tools).tools, count, 2000)
    second = build_manifest(catalog(shuffled).tools, count, 2000)
    assert first.text.encode() == second.text.encode()


def test_single_tool_server_says_tool_not_tools() -> None:
    manifest = build_manifest([make_tool("clock", "now", "The time.")], count, 2000)
    assert "- clock (1 tool): now\n  The time." in manifest.text


def test_summary_keeps_non_ascii_descriptions() -> None:
    tools = [
        make_tool("bing", "search", "使用必应搜索指定的关键词。返回结果"),
        make_tool("de", "wetter", "Größe und Wetter."),
    ]
    text = build_manifest(tools, count, 2000).text
    assert "使用必应搜索指定的关键词。" in text
    assert "Größe und Wetter." in text


def test_no_deferred_tools_means_empty_manifest() -> None:
    assert build_manifest([], count, 2000) == BuiltManifest("", 0, 0, 0, 0)


@pytest.fixture(scope="module")
def big_deferred() -> tuple[object, ...]:
    return catalog(synthetic_tools(50_000, per_server=25)).tools


@pytest.mark.parametrize("budget", [50, 300, 2000, 8000])
def test_manifest_of_50k_tools_never_exceeds_its_budget(
    big_deferred: tuple[object, ...], budget: int
) -> None:
    manifest = build_manifest(big_deferred, count, budget)  # type: ignore[arg-type]
    assert manifest.tokens <= budget
    assert count(manifest.text) <= budget
    assert COUNTER.count_text(manifest.text, "cl100k_base") <= budget
    assert manifest.deferred_tools == 50_000
    # 2,000 servers cannot all be listed: the tail says how many are left.
    assert "more servers (" in manifest.text
    assert manifest.text.startswith("- ") is False


def test_manifest_degrades_step_by_step_as_the_budget_shrinks() -> None:
    tools = catalog(synthetic_tools(600, per_server=12)).tools
    levels = [build_manifest(tools, count, budget).level for budget in (20_000, 6000, 3000, 1500, 800, 200)]
    assert levels == sorted(levels)
    assert levels[0] == 0
    assert levels[-1] == len(_LEVELS)  # servers cut off
    # Server lines only (the last level before cutting servers): no tool names, no summaries.
    lines_only = next(
        build_manifest(tools, count, b)
        for b in range(300, 3000, 50)
        if build_manifest(tools, count, b).level == len(_LEVELS) - 1
    )
    assert all(line.startswith("- ") and line.endswith("tools)") for line in lines_only.text.splitlines()[1:])


def test_manifest_budget_drops_names_of_big_servers_before_servers() -> None:
    tools = catalog(NOTION + WEATHER).tools
    full = build_manifest(tools, count, 2000)
    tight = build_manifest(tools, count, full.tokens - 5)
    assert tight.level > 0
    assert "- notion (15 tools)" in tight.text
    assert "- weather (3 tools)" in tight.text
    assert tight.tokens <= full.tokens - 5


def test_manifest_goes_in_the_tool_description_or_a_system_message() -> None:
    manifest = build_manifest(WEATHER, count, 2000)
    embedded = search_tool_description(manifest, embed=True)
    assert embedded.endswith(f"<manifest>\n{manifest.text}\n</manifest>")
    assert "<manifest>" not in search_tool_description(manifest, embed=False)
    assert manifest.text in system_message(manifest)
    assert system_message(build_manifest([], count, 2000)) == ""
