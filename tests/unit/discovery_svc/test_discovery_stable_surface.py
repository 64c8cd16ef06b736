"""The cache-stable surface: one search_tools / call_tool pair, served by discovery to every consumer.

The gateway's meta mode uses it today; the orchestrator's ``deferral: stable`` will use the same
definitions (issue 23), so its bytes, texts and data are pinned here.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from toolscout.client import HOST_DESCRIPTION_MAX_BYTES, PlanRequest, SearchRequest, ToolSurface

from discovery_svc.engine import DiscoveryEngine
from discovery_svc.errors import SearchArgumentError
from discovery_svc.manifest import stable_search_tool_description
from discovery_svc.surface import CALL_TOOL_PARAMETERS
from tests.support.discovery_catalogs import catalog, config, make_tool, synthetic_tools

TOOLS = [
    make_tool("weather", "forecast", "Weather forecast for a city.", {"city": {"type": "string"}}, ["city"]),
    make_tool("weather", "alerts", "Severe weather alerts."),
    make_tool("mail", "send_email", "Send an email.", {"to": {"type": "string"}}),
    make_tool("time", "now", "Current time."),
]
DOC: dict[str, Any] = {
    "servers": {
        "weather": {"command": "w", "defer_loading": True},
        "mail": {"command": "m", "defer_loading": True},
        "time": {"command": "t"},
    },
    "tool_discovery": {"enabled": True},
}


def engine() -> DiscoveryEngine:
    svc = DiscoveryEngine(config(DOC))
    svc.set_catalog(catalog(TOOLS, "v1"))
    return svc


async def test_a_stable_plan_is_eager_tools_search_tools_and_call_tool_whatever_was_discovered() -> None:
    svc = engine()
    fresh = await svc.plan_tools(PlanRequest(surface=ToolSurface.STABLE))
    later = await svc.plan_tools(
        PlanRequest(discovered_tools=["weather_forecast", "mail_send_email"], surface=ToolSurface.STABLE)
    )
    assert [t.llm_name for t in fresh.loaded_tools] == ["time_now"]
    assert later.loaded_tools == fresh.loaded_tools
    assert later.search_tool == fresh.search_tool
    assert later.call_tool == fresh.call_tool
    # Discovered tools are still checked and reported, but are called through call_tool.
    assert later.discovered_tools == ("weather_forecast", "mail_send_email")
    assert later.tokens.sent_tokens == fresh.tokens.sent_tokens
    assert fresh.call_tool is not None
    assert fresh.call_tool.llm_name == "call_tool"
    assert fresh.call_tool.input_schema == CALL_TOOL_PARAMETERS


async def test_a_stable_plan_carries_the_found_tools_definitions_it_does_not_send() -> None:
    svc = engine()
    plan = await svc.plan_tools(
        PlanRequest(
            discovered_tools=["mail_send_email", "time_now", "weather_forecast"], surface=ToolSurface.STABLE
        )
    )
    # A caller checks call_tool arguments against them: no fetch of every deferred definition.
    assert [t.llm_name for t in plan.found_tools] == ["mail_send_email", "weather_forecast"]
    assert plan.found_tools[1].input_schema["required"] == ["city"]
    assert [t.llm_name for t in plan.loaded_tools] == ["time_now"]
    append = await svc.plan_tools(PlanRequest(discovered_tools=["mail_send_email"]))
    assert append.found_tools == ()


async def test_the_stable_search_tool_carries_the_manifest_and_says_found_tools_go_through_call_tool() -> (
    None
):
    svc = engine()
    stable = await svc.plan_tools(PlanRequest(surface=ToolSurface.STABLE))
    append = await svc.plan_tools(PlanRequest())
    assert stable.search_tool is not None
    assert append.search_tool is not None
    assert f"<manifest>\n{stable.manifest}\n</manifest>" in stable.search_tool.description
    assert "call them through call_tool" in stable.search_tool.description
    assert "call_tool" not in append.search_tool.description
    assert stable.search_tool.input_schema == append.search_tool.input_schema
    assert append.call_tool is None


async def test_the_stable_plan_counts_call_tool_in_what_is_sent() -> None:
    svc = engine()
    stable = await svc.plan_tools(PlanRequest(surface=ToolSurface.STABLE))
    append = await svc.plan_tools(PlanRequest())
    assert stable.tokens.sent_tokens > append.tokens.sent_tokens
    assert stable.tokens.all_definitions_tokens == append.tokens.all_definitions_tokens


async def test_a_stable_search_gives_each_found_tool_its_schema_and_how_to_call_it() -> None:
    result = await engine().search_tools(
        SearchRequest(query="weather forecast city", max_results=1, surface=ToolSurface.STABLE)
    )
    schema = json.dumps(TOOLS[0].input_schema, ensure_ascii=False, separators=(",", ":"))
    assert result.result_text == (
        "Found 1 tool:\n\n"
        "- weather_forecast (server: weather, tool: forecast)\n"
        "  Weather forecast for a city.\n"
        f"  Input schema: {schema}\n\n"
        'Call them with call_tool, e.g. {"name": "weather_forecast", "arguments": {...}} with arguments '
        "that fit the input schema."
    )
    data = json.loads(result.structured_content_json)
    assert data == {
        "tools": [
            {
                "name": "weather_forecast",
                "server": "weather",
                "tool": "forecast",
                "description": "Weather forecast for a city.",
                "inputSchema": TOOLS[0].input_schema,
            }
        ],
        "alreadyLoaded": [],
        "notFound": [],
        "totalMatches": 1,
        "guidance": 'Call them with call_tool, e.g. {"name": "weather_forecast", "arguments": {...}} with '
        "arguments that fit the input schema.",
    }


async def test_a_stable_search_tells_eager_tools_from_tools_found_earlier_and_reports_misses() -> None:
    result = await engine().search_tools(
        SearchRequest(
            tool_names=("time_now", "weather_alerts", "weather_forcast"),
            loaded_tools=("weather_alerts",),
            surface=ToolSurface.STABLE,
        )
    )
    assert "Already in your tool list (call directly): time_now" in result.result_text
    assert "Found earlier (call with call_tool): weather_alerts" in result.result_text
    assert "Not found: 'weather_forcast' (closest: weather_forecast" in result.result_text
    data = json.loads(result.structured_content_json)
    assert data["alreadyLoaded"] == ["time_now", "weather_alerts"]
    assert data["notFound"][0]["name"] == "weather_forcast"
    assert data["notFound"][0]["closest"][0] == "weather_forecast"


async def test_the_append_surface_is_unchanged_and_has_no_structured_answer() -> None:
    result = await engine().search_tools(SearchRequest(query="weather forecast city", max_results=1))
    assert result.result_text.endswith("These tools are now loaded and available to call.")
    assert "Input schema" not in result.result_text
    assert result.structured_content_json == ""


async def test_a_plan_watcher_gets_the_plan_now_and_again_after_each_catalog_change() -> None:
    svc = engine()
    plans = svc.watch_plans(PlanRequest(surface=ToolSurface.STABLE, include_deferred_tools=True))
    first = await anext(plans)
    waiting = asyncio.ensure_future(anext(plans))
    await asyncio.sleep(0)
    assert not waiting.done()
    svc.set_catalog(catalog([*TOOLS, make_tool("mail", "read_email", "Read an email.")], "v2"))
    second = await asyncio.wait_for(waiting, 5)
    await plans.aclose()
    assert first.catalog_version == "v1"
    assert second.catalog_version == "v2"
    assert "mail_read_email" in {t.llm_name for t in second.deferred_tools}


async def test_a_plan_watcher_that_knows_the_version_waits_for_the_next() -> None:
    svc = engine()
    plans = svc.watch_plans(PlanRequest(), known_version="v1")
    waiting = asyncio.ensure_future(anext(plans))
    await asyncio.sleep(0.01)
    assert not waiting.done()
    svc.set_catalog(catalog(TOOLS[:3], "v2"))
    plan = await asyncio.wait_for(waiting, 5)
    await plans.aclose()
    assert plan.catalog_version == "v2"


def test_at_50000_tools_the_stable_search_tools_description_keeps_a_short_manifest_within_2kb() -> None:
    description = stable_search_tool_description(synthetic_tools(50_000), HOST_DESCRIPTION_MAX_BYTES)
    assert len(description.encode()) <= HOST_DESCRIPTION_MAX_BYTES
    assert "<manifest>\nAvailable tool servers" in description
    assert "more servers (" in description  # the servers that did not fit are counted
    assert "Call search_tools with no arguments for the full list" in description


async def test_a_stable_search_without_arguments_answers_the_full_manifest_as_text_and_data() -> None:
    svc = engine()
    plan = await svc.plan_tools(PlanRequest(surface=ToolSurface.STABLE))
    browsed = await svc.search_tools(SearchRequest(arguments_json="{}", surface=ToolSurface.STABLE))
    assert browsed.mode == "manifest"
    assert browsed.result_text.startswith(plan.manifest)
    assert browsed.newly_loaded == ()
    data = json.loads(browsed.structured_content_json)
    assert data["tools"] == []
    assert data["guidance"] == browsed.result_text


async def test_a_stable_search_that_finds_nothing_gives_its_hint_as_data_too() -> None:
    result = await engine().search_tools(
        SearchRequest(query="book a flight to Paris", surface=ToolSurface.STABLE)
    )
    data = json.loads(result.structured_content_json)
    assert data["tools"] == []
    assert data["guidance"] == result.result_text
    assert result.result_text.startswith("No tools found matching 'book a flight to Paris'")


async def test_a_call_without_arguments_on_the_append_surface_is_still_refused() -> None:
    with pytest.raises(SearchArgumentError, match="Provide at least one of"):
        await engine().search_tools(SearchRequest(arguments_json="{}"))
