"""The facade: prepared state reused per (catalog version, toolset), rebuilt on change, PlanTools."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from toolscout.client import PlanRequest, SearchRequest

from discovery_svc import engine as engine_module
from discovery_svc.catalog import Catalog
from discovery_svc.engine import DiscoveryEngine
from discovery_svc.errors import SearchArgumentError, ToolsetNotFoundError, UnknownServerError
from discovery_svc.metrics import DiscoveryMetrics, toolset_label
from tests.support.discovery_catalogs import catalog, config, make_tool
from toolscout_kit.errors import InvalidArgumentError, UnavailableError

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
    "tool_sets": {"no_mail": {"servers": {"weather": True, "time": True}}},
    "tool_discovery": {"enabled": True},
}


REGISTRY = CollectorRegistry()
METRICS = DiscoveryMetrics(REGISTRY)


def service(doc: dict[str, Any] | None = None, **discovery: Any) -> DiscoveryEngine:
    svc = DiscoveryEngine(config(doc or DOC, **discovery), metrics=METRICS)
    svc.set_catalog(catalog(TOOLS, "v1"))
    return svc


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_requests_before_the_first_catalog_are_unavailable() -> None:
    with pytest.raises(UnavailableError):
        await DiscoveryEngine(config(DOC)).plan_tools(PlanRequest())


async def test_plan_sends_eager_tools_and_search_tools_with_the_manifest() -> None:
    plan = await service().plan_tools(PlanRequest())
    assert [t.llm_name for t in plan.loaded_tools] == ["time_now"]
    assert plan.search_tool is not None
    assert plan.search_tool.llm_name == "search_tools"
    assert f"<manifest>\n{plan.manifest}\n</manifest>" in plan.search_tool.description
    assert "- weather (2 tools): alerts, forecast" in plan.manifest
    assert (plan.total_tools, plan.loaded_count, plan.deferred_count) == (4, 1, 3)
    assert plan.catalog_version == "v1"
    assert plan.manifest_placement == "tool_description"
    assert plan.manifest_system_message == ""


async def test_plan_token_accounting_adds_up() -> None:
    svc = service()
    plan = await svc.plan_tools(PlanRequest(provider="anthropic"))
    prepared = await svc.prepared("")
    enc = svc._counter.encoding_for("anthropic")
    all_defs = sum(svc._counter.count_tool(t, enc) for t in TOOLS)
    assert plan.search_tool is not None
    sent = svc._counter.count_tool(prepared.partition.loaded[0], enc) + svc._counter.count_tool(
        plan.search_tool, enc
    )
    assert (plan.tokens.all_definitions_tokens, plan.tokens.sent_tokens) == (all_defs, sent)
    assert plan.tokens.saved_tokens == max(all_defs - sent, 0)
    assert (plan.tokens.encoding, plan.tokens.estimate) == ("cl100k_base", True)


async def test_system_message_placement_moves_the_manifest_out_of_the_tool() -> None:
    plan = await service(manifest_placement="system_message").plan_tools(PlanRequest())
    assert plan.search_tool is not None
    assert "<manifest>" not in plan.search_tool.description
    assert plan.manifest in plan.manifest_system_message
    assert plan.manifest_placement == "system_message"


async def test_discovered_tools_are_appended_in_order_and_unknown_ones_dropped() -> None:
    plan = await service().plan_tools(
        PlanRequest(
            discovered_tools=["mail_send_email", "gone_tool", "weather_alerts", "time_now", "mail_send_email"]
        )
    )
    assert [t.llm_name for t in plan.loaded_tools] == ["time_now", "mail_send_email", "weather_alerts"]
    assert plan.dropped_tools == ("gone_tool",)
    assert plan.deferred_count == 1
    assert plan.search_tool is not None


async def test_deferred_names_only_on_request() -> None:
    svc = service()
    assert (await svc.plan_tools(PlanRequest())).deferred_tool_names == ()
    plan = await svc.plan_tools(
        PlanRequest(discovered_tools=["mail_send_email"], include_deferred_names=True)
    )
    assert plan.deferred_tool_names == ("weather_alerts", "weather_forecast")


async def test_discovery_disabled_plans_every_tool_without_search_tools() -> None:
    plan = await service({**DOC, "tool_discovery": {"enabled": False}}).plan_tools(PlanRequest())
    assert plan.loaded_count == 4
    assert plan.search_tool is None
    assert plan.tokens.sent_tokens == plan.tokens.all_definitions_tokens


async def test_toolset_is_filtered_before_the_partition() -> None:
    plan = await service().plan_tools(PlanRequest("no_mail"))
    assert plan.total_tools == 3
    assert "mail" not in plan.manifest
    with pytest.raises(UnknownServerError):
        await service().search_tools(SearchRequest(toolset="no_mail", server_name="mail"))


async def test_unknown_toolset_and_provider_are_errors() -> None:
    with pytest.raises(ToolsetNotFoundError, match="Toolsets: no_mail"):
        await service().plan_tools(PlanRequest("nope"))
    with pytest.raises(InvalidArgumentError):
        await service().plan_tools(PlanRequest(provider="gemini"))


async def test_prepared_state_is_built_once_and_reused_across_requests() -> None:
    svc = service()
    builds = sample("toolscout_discovery_index_builds_total")
    timed = sample("toolscout_discovery_index_build_duration_seconds_count")
    first = await svc.prepared("")
    await svc.plan_tools(PlanRequest())
    await svc.search_tools(SearchRequest(query="weather"))
    await svc.get_manifest()
    assert await svc.prepared("") is first
    assert svc.builds == 1
    assert sample("toolscout_discovery_index_builds_total") == builds + 1
    assert sample("toolscout_discovery_index_build_duration_seconds_count") == timed + 1
    await svc.plan_tools(PlanRequest("no_mail"))
    assert svc.builds == 2


async def test_catalog_change_rebuilds_and_discovered_tools_stay_loaded() -> None:
    svc = service()
    before = await svc.plan_tools(PlanRequest(discovered_tools=["mail_send_email"]))
    assert not svc.set_catalog(catalog(TOOLS, "v1"))  # same version: nothing to do
    changed = [*TOOLS, make_tool("weather", "radar", "Rain radar images.")]
    assert svc.set_catalog(catalog(changed, "v2"))
    after = await svc.plan_tools(PlanRequest(discovered_tools=["mail_send_email"]))
    assert svc.builds == 2
    assert after.catalog_version == "v2"
    assert [t.llm_name for t in after.loaded_tools] == [t.llm_name for t in before.loaded_tools]
    assert "- weather (3 tools)" in after.manifest
    found = await svc.search_tools(SearchRequest(query="radar"))
    assert found.matches[0].tool.llm_name == "weather_radar"
    assert found.catalog_version == "v2"


async def test_requests_queued_behind_a_build_get_the_latest_version_built_once() -> None:
    """A catalog that changes while a build runs (a fleet coming up): the requests waiting for
    the build lock are answered from one build of the newest version, none of an older one."""
    svc = service()
    await svc.prepared("")
    waiting = []
    async with svc._build_lock:  # a build in progress
        for version in ("v2", "v3", "v4"):
            assert svc.set_catalog(catalog([*TOOLS, make_tool("time", version, "A new tool.")], version))
            waiting.append(asyncio.create_task(svc.prepared("")))
            await asyncio.sleep(0)  # it asked at this version and waits for the lock
    done = await asyncio.gather(*waiting)
    assert {p.catalog_version for p in done} == {"v4"}
    assert svc.builds == 2


async def test_a_settled_catalog_is_indexed_without_waiting_out_the_pause(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The pause after a build holds only while the catalog keeps changing."""
    svc = service()
    await svc.prepared("")
    monkeypatch.setattr(engine_module, "_SETTLED_SECONDS", 0.0)
    svc._next_build_at = time.monotonic() + 3600  # a build that took an hour
    assert svc.set_catalog(catalog([*TOOLS, make_tool("time", "later", "Later.")], "v2"))
    prepared = await asyncio.wait_for(svc.prepared(""), 60)
    assert prepared.catalog_version == "v2"


def test_a_catalog_counts_as_settled_after_longer_quiet_while_its_versions_come_further_apart() -> None:
    assert engine_module.settled_after(0.0) == engine_module._SETTLED_SECONDS
    assert engine_module.settled_after(8.0) == pytest.approx(8.0 * engine_module._SETTLED_GAPS)
    assert engine_module.settled_after(3600.0) == engine_module._MAX_SETTLED_SECONDS


async def test_a_catalog_whose_versions_come_apart_is_not_taken_for_settled_between_them() -> None:
    """A paced follower delivers a changing catalog a version every few seconds: the pause after
    a build still holds between them (the quiet needed grows with the gap), so an index is not
    built for every version."""
    svc = service()
    await svc.prepared("")
    svc._changed_at -= 20.0  # v1 came 20 s ago
    assert svc.set_catalog(catalog([*TOOLS, make_tool("time", "later", "Later.")], "v2"))
    assert engine_module.settled_after(svc._version_gap) >= 20.0
    svc._next_build_at = time.monotonic() + 3600  # a build that took an hour
    waiting = asyncio.create_task(svc.prepared(""))
    for _ in range(20):
        await asyncio.sleep(0)
    assert not waiting.done()  # neither paced out nor settled: still waiting
    svc._next_build_at = 0.0  # the pause is over: built on its next look
    svc._changed_at -= 3600.0
    waiting.cancel()
    prepared = await asyncio.wait_for(svc.prepared(""), 60)
    assert prepared.catalog_version == "v2"


async def test_prepared_states_are_bounded_by_the_lru() -> None:
    doc = {**DOC, "tool_sets": {f"ts{i}": {"servers": {"weather": True}} for i in range(4)}}
    svc = DiscoveryEngine(config(doc), cache_size=2)
    svc.set_catalog(catalog(TOOLS))
    for name in ("ts0", "ts1", "ts2", "ts0"):
        await svc.prepared(name)
    assert svc.builds == 4
    assert len(svc._cache) == 2


async def test_manifest_is_byte_identical_across_requests_and_rebuilds() -> None:
    first = (await service().get_manifest()).manifest
    again = service()
    again.set_catalog(Catalog("v9", list(reversed(TOOLS))))
    assert (await again.get_manifest()).manifest.encode() == first.encode()


async def test_get_manifest_reports_tokens_and_budget() -> None:
    info = await service(manifest_budget_tokens=500).get_manifest(provider="openai")
    assert info.budget_tokens == 500
    assert 0 < info.tokens <= 500
    assert (info.deferred_servers, info.deferred_tools) == (2, 3)


async def test_search_metrics_count_outcomes_by_mode() -> None:
    svc = service()
    found = sample("toolscout_discovery_searches_total", mode="query", outcome="found")
    empty = sample("toolscout_discovery_searches_total", mode="query", outcome="empty")
    error = sample("toolscout_discovery_searches_total", mode="unknown", outcome="error")
    discovered = sample("toolscout_discovery_tools_discovered_total")
    observed = sample("toolscout_discovery_search_duration_seconds_count", mode="query")
    await svc.search_tools(SearchRequest(arguments_json='{"query": "weather forecast"}', max_results=1))
    await svc.search_tools(SearchRequest(arguments_json='{"query": "xylophone"}'))
    with pytest.raises(SearchArgumentError):
        await svc.search_tools(SearchRequest(arguments_json='{"tool_names": "x"}'))
    assert sample("toolscout_discovery_searches_total", mode="query", outcome="found") == found + 1
    assert sample("toolscout_discovery_searches_total", mode="query", outcome="empty") == empty + 1
    assert sample("toolscout_discovery_searches_total", mode="unknown", outcome="error") == error + 1
    assert sample("toolscout_discovery_tools_discovered_total") == discovered + 1
    assert sample("toolscout_discovery_search_duration_seconds_count", mode="query") == observed + 2


def test_the_empty_toolset_is_labelled_all() -> None:
    assert toolset_label("") == "_all"


async def test_a_search_can_answer_with_the_plan_for_the_next_call() -> None:
    svc = service()
    result = await svc.search_tools(
        SearchRequest(
            query="weather forecast city",
            loaded_tools=("time_now", "mail_send_email"),
            include_plan=True,
            discovered_tools=("mail_send_email",),
            provider="anthropic",
        )
    )
    assert result.plan is not None
    newly = [t.llm_name for t in result.newly_loaded]
    assert "weather_forecast" in newly
    assert result.plan.discovered_tools == ("mail_send_email", *newly)
    expected = await svc.plan_tools(PlanRequest("", ["mail_send_email", *newly], "anthropic"))
    assert result.plan == expected
    plain = await svc.search_tools(SearchRequest(query="weather forecast city"))
    assert plain.plan is None


async def test_plan_reports_which_discovered_names_are_deferred_tools() -> None:
    plan = await service().plan_tools(
        PlanRequest("", ["weather_alerts", "time_now", "gone_tool", "weather_alerts"])
    )
    assert plan.discovered_tools == ("weather_alerts",)
    assert plan.dropped_tools == ("gone_tool",)


async def test_manifest_breaks_definition_tokens_down_per_server_in_one_encoding() -> None:
    svc = service()
    info = await svc.get_manifest("", "anthropic")
    enc = svc._counter.encoding_for("anthropic")
    plan = await svc.plan_tools(PlanRequest("", [], "anthropic"))
    assert (info.encoding, info.estimate) == ("cl100k_base", True)
    by_server = {s.server: s for s in info.servers}
    assert [s.server for s in info.servers] == ["mail", "time", "weather"]
    assert (by_server["weather"].tools, by_server["weather"].deferred_tools) == (2, 2)
    assert by_server["weather"].loaded_tokens == 0
    time_tokens = svc._counter.count_tool(TOOLS[3], enc)
    assert by_server["time"].all_tokens == by_server["time"].loaded_tokens == time_tokens
    assert sum(s.all_tokens for s in info.servers) == plan.tokens.all_definitions_tokens


async def test_compact_text_lists_found_tools_without_their_parameters() -> None:
    svc = service()
    full = await svc.search_tools(SearchRequest(query="weather forecast city"))
    compact = await svc.search_tools(SearchRequest(query="weather forecast city", compact_text=True))
    assert "Parameters:" in full.result_text
    assert "Parameters:" not in compact.result_text
    assert [t.llm_name for t in compact.newly_loaded] == [t.llm_name for t in full.newly_loaded]
    assert "- weather_forecast (server: weather, tool: forecast)" in compact.result_text
    assert compact.result_text.endswith("These tools are now loaded and available to call.")


async def test_an_explicit_max_results_pages_a_server_browse() -> None:
    svc = service()
    page = await svc.search_tools(SearchRequest(server_name="weather", max_results=1))
    assert [t.llm_name for t in (m.tool for m in page.matches)] == ["weather_alerts"]
    assert page.total_matches == 2
    assert "offset=1" in page.result_text
