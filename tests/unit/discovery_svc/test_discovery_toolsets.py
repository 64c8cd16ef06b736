"""Toolsets as filters over one index per catalog version, and inline toolsets per request."""

from __future__ import annotations

import json
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from toolscout.client import PlanRequest, SearchRequest, ToolsetRef

from discovery_svc.engine import DiscoveryEngine
from discovery_svc.errors import InvalidToolsetError, ToolsetNotFoundError
from discovery_svc.index import CandidateMask
from discovery_svc.metrics import DiscoveryMetrics, toolset_label
from discovery_svc.partition import resolve_toolset
from tests.support.discovery_catalogs import catalog, config, make_tool
from toolscout_kit.errors import InvalidArgumentError, NotFoundError

TOOLS = [
    make_tool("weather", "forecast", "Weather forecast for a city.", {"city": {"type": "string"}}, ["city"]),
    make_tool("weather", "alerts", "Severe weather alerts."),
    make_tool("mail", "send_email", "Send an email.", {"to": {"type": "string"}}),
    make_tool("mail", "list_inbox", "List received email messages."),
    make_tool("time", "now", "Current time."),
]
DOC: dict[str, Any] = {
    "servers": {
        "weather": {"command": "w", "defer_loading": True},
        "mail": {"command": "m", "defer_loading": True},
        "time": {"command": "t"},
    },
    "tool_sets": {
        "no_mail": {"servers": {"weather": True, "time": True}},
        "send_only": {"servers": {"mail": ["send_email"], "time": True}},
        "quiet": {"servers": {"weather": {"exclude": ["alerts"]}}},
    },
    "tool_discovery": {"enabled": True},
}


def service(*, cache_size: int = 64, registry: CollectorRegistry | None = None) -> DiscoveryEngine:
    svc = DiscoveryEngine(
        config(DOC), cache_size=cache_size, metrics=DiscoveryMetrics(registry or CollectorRegistry())
    )
    svc.set_catalog(catalog(TOOLS, "v1"))
    return svc


def inline(servers: dict[str, Any]) -> ToolsetRef:
    return ToolsetRef.inline(json.dumps({"servers": servers}))


def names(result: Any) -> list[str]:
    return [m.tool.llm_name for m in result.matches]


# --- one index, toolsets as masks ----------------------------------------------------------


async def test_every_toolset_searches_the_one_index_of_the_catalog_version() -> None:
    svc = service()
    everything = await svc.prepared("")
    no_mail = await svc.prepared("no_mail")
    send_only = await svc.prepared("send_only")
    assert svc.index_builds == 1
    assert no_mail.scope.base is everything.scope.base is send_only.scope.base
    # The whole catalog needs no filter; a toolset keeps one byte per catalog tool.
    assert everything.scope.candidates is None
    assert isinstance(no_mail.scope.candidates, CandidateMask)
    assert isinstance(send_only.scope.candidates, CandidateMask)
    assert len(no_mail.scope.candidates) == 3
    assert len(send_only.scope.candidates) == 2


async def test_a_toolset_search_only_returns_its_own_tools() -> None:
    svc = service()
    assert names(await svc.search_tools(SearchRequest(query="email"))) == [
        "mail_send_email",
        "mail_list_inbox",
    ]
    assert names(await svc.search_tools(SearchRequest(toolset="send_only", query="email"))) == [
        "mail_send_email"
    ]
    empty = await svc.search_tools(SearchRequest(toolset="no_mail", query="email"))
    assert empty.matches == ()
    assert empty.result_text.startswith("No tools found")


async def test_server_browse_and_exact_names_are_scoped_to_the_toolset() -> None:
    svc = service()
    browse = await svc.search_tools(SearchRequest(toolset="quiet", server_name="weather"))
    assert names(browse) == ["weather_forecast"]
    by_name = await svc.search_tools(SearchRequest(toolset="send_only", tool_names=("list_inbox",)))
    assert by_name.matches == ()
    assert by_name.not_found[0].name == "list_inbox"
    assert "mail_list_inbox" not in by_name.not_found[0].closest


async def test_a_catalog_change_builds_one_new_index_for_every_toolset() -> None:
    svc = service()
    for toolset in ("", "no_mail", "send_only"):
        await svc.prepared(toolset)
    svc.set_catalog(catalog([*TOOLS, make_tool("weather", "radar", "Rain radar images.")], "v2"))
    for toolset in ("", "no_mail", "send_only"):
        await svc.prepared(toolset)
    assert svc.index_builds == 2
    found = await svc.search_tools(SearchRequest(toolset="no_mail", query="radar"))
    assert names(found) == ["weather_radar"]


async def test_plans_of_a_toolset_count_only_its_tools() -> None:
    plan = await service().plan_tools(
        PlanRequest("send_only", discovered_tools=["mail_send_email", "mail_list_inbox"])
    )
    assert [t.llm_name for t in plan.loaded_tools] == ["time_now", "mail_send_email"]
    assert plan.dropped_tools == ("mail_list_inbox",)
    assert (plan.total_tools, plan.deferred_count) == (2, 0)


# --- inline toolsets -----------------------------------------------------------------------


async def test_an_inline_toolset_plans_and_searches_like_the_configured_one() -> None:
    svc = service()
    configured = await svc.plan_tools(PlanRequest("no_mail"))
    given = await svc.plan_tools(PlanRequest(inline({"weather": True, "time": True})))
    assert given.manifest == configured.manifest
    assert [t.llm_name for t in given.loaded_tools] == [t.llm_name for t in configured.loaded_tools]
    assert given.tokens == configured.tokens
    found = await svc.search_tools(SearchRequest(toolset=inline({"mail": ["send_email"]}), query="email"))
    assert names(found) == ["mail_send_email"]
    manifest = await svc.get_manifest(inline({"mail": {"exclude": ["list_inbox"]}}))
    assert manifest.deferred_tools == 1


async def test_the_same_inline_filter_written_differently_is_prepared_once() -> None:
    svc = service()
    first = inline({"weather": True, "mail": ["send_email", "list_inbox"]})
    again = ToolsetRef.inline(
        '{"description": "other words", "servers": {"mail": ["list_inbox", "send_email", "send_email"],'
        ' "weather": true}}'
    )
    assert first.key == again.key
    assert await svc.prepared(first) is await svc.prepared(again)
    assert svc.builds == 1
    assert first.key != inline({"weather": True, "mail": {"exclude": ["send_email"]}}).key


async def test_an_inline_toolset_naming_an_unknown_server_or_tool_lists_what_exists() -> None:
    svc = service()
    with pytest.raises(ToolsetNotFoundError) as err:
        await svc.plan_tools(PlanRequest(inline({"wether": True})))
    assert isinstance(err.value, NotFoundError)
    assert err.value.message == (
        "The inline toolset is invalid: server 'wether' is not configured (servers: mail, time, weather)."
    )
    with pytest.raises(ToolsetNotFoundError) as err:
        await svc.search_tools(SearchRequest(toolset=inline({"mail": ["send_mail"]}), query="x"))
    assert err.value.message == (
        "The inline toolset is invalid: tool 'send_mail' not found in server 'mail' "
        "(tools: list_inbox, send_email)."
    )


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{", "not valid JSON"),
        ("[]", "expected an object"),
        ('{"servers": {"mail": "send_email"}}', "servers.mail"),
        ('{"servers": {"mail": {"include": ["send_email"]}}}', "servers.mail"),
        ('{"weather": true}', "weather: Extra inputs are not permitted"),
    ],
)
def test_a_malformed_inline_toolset_is_an_invalid_argument(text: str, problem: str) -> None:
    with pytest.raises(InvalidToolsetError, match=problem) as err:
        resolve_toolset(ToolsetRef(filter_json=text))
    assert isinstance(err.value, InvalidArgumentError)
    assert err.value.message.startswith("toolset_json: ")


def test_a_toolset_name_and_an_inline_toolset_together_are_refused() -> None:
    with pytest.raises(InvalidToolsetError, match="not both"):
        resolve_toolset(ToolsetRef("no_mail", '{"servers": {"time": true}}'))
    assert resolve_toolset(ToolsetRef("no_mail")) == "no_mail"


async def test_inline_toolset_states_are_bounded_by_the_lru() -> None:
    svc = service(cache_size=2)
    filters = [inline({"weather": True}), inline({"mail": True}), inline({"time": True})]
    for toolset in (*filters, filters[0]):
        await svc.prepared(toolset)
    assert svc.builds == 4
    assert len(svc._cache) == 2
    assert svc.index_builds == 1


async def test_toolset_builds_are_counted_by_kind() -> None:
    registry = CollectorRegistry()
    svc = service(registry=registry)
    await svc.prepared("no_mail")
    await svc.prepared(inline({"time": True}))
    await svc.prepared(inline({"time": True}))

    def built(kind: str) -> float:
        return registry.get_sample_value("toolscout_discovery_toolset_builds_total", {"kind": kind}) or 0.0

    assert (built("configured"), built("inline")) == (1.0, 1.0)
    assert registry.get_sample_value("toolscout_discovery_index_builds_total") == 1.0
    assert toolset_label(inline({"time": True}).key) == "_inline"
