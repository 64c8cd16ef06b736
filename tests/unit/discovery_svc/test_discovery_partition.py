"""Toolset filtering (casual-mcp semantics, validated) and the loaded / deferred partition."""

from __future__ import annotations

from typing import Any

import pytest

from discovery_svc.errors import ToolsetNotFoundError
from discovery_svc.partition import partition_tools, select_toolset
from tests.support.discovery_catalogs import catalog, config, make_tool
from toolscout_kit.errors import NotFoundError

TOOLS = [
    make_tool("weather", "forecast"),
    make_tool("weather", "alerts"),
    make_tool("words", "define"),
    make_tool("words", "random_word"),
    make_tool("fetch", "fetch"),
]


def _config(**extra: Any) -> Any:
    doc: dict[str, Any] = {
        "servers": {
            "weather": {"command": "w", "defer_loading": True},
            "words": {"command": "x"},
            "fetch": {"command": "f", "defer_loading": True, "always_load": ["fetch"]},
        },
        "tool_sets": {
            "research": {"servers": {"weather": True, "words": {"exclude": ["random_word"]}}},
            "only_define": {"servers": {"words": ["define"]}},
            "bad_tool": {"servers": {"words": ["nope"]}},
            "bad_exclude": {"servers": {"words": {"exclude": ["nope"]}}},
        },
        "tool_discovery": {"enabled": True},
    }
    doc.update(extra)
    return config(doc)


def _names(tools: Any) -> list[str]:
    return [t.llm_name for t in tools]


def test_empty_toolset_selects_every_tool_in_catalog_order() -> None:
    cat = catalog(TOOLS)
    assert select_toolset(cat, _config(), "") == cat.tools


def test_toolset_with_true_and_exclude_keeps_the_right_tools() -> None:
    tools = select_toolset(catalog(TOOLS), _config(), "research")
    assert _names(tools) == ["weather_alerts", "weather_forecast", "words_define"]


def test_toolset_with_a_tool_list_keeps_only_those_tools() -> None:
    assert _names(select_toolset(catalog(TOOLS), _config(), "only_define")) == ["words_define"]


def test_unknown_toolset_is_not_found_and_lists_toolsets() -> None:
    with pytest.raises(ToolsetNotFoundError) as err:
        select_toolset(catalog(TOOLS), _config(), "nope")
    assert isinstance(err.value, NotFoundError)
    assert (
        err.value.message == "Unknown toolset 'nope'. Toolsets: bad_exclude, bad_tool, only_define, research."
    )


def test_toolset_naming_an_unknown_tool_lists_the_servers_tools() -> None:
    with pytest.raises(
        ToolsetNotFoundError, match=r"tool 'nope' not found in server 'words' \(tools: define, random_word\)"
    ):
        select_toolset(catalog(TOOLS), _config(), "bad_tool")


def test_toolset_excluding_an_unknown_tool_is_not_found() -> None:
    with pytest.raises(ToolsetNotFoundError, match="in its exclude list"):
        select_toolset(catalog(TOOLS), _config(), "bad_exclude")


def test_toolset_tools_of_a_server_that_is_not_connected_are_not_validated() -> None:
    # words is down (no tools in the catalog): the toolset still works with what is there.
    cat = catalog([t for t in TOOLS if t.server != "words"])
    assert select_toolset(cat, _config(), "bad_tool") == ()


def test_discovery_disabled_loads_everything_even_deferred_servers() -> None:
    part = partition_tools(catalog(TOOLS).tools, _config(tool_discovery={"enabled": False}))
    assert part.deferred == ()
    assert len(part.loaded) == len(TOOLS)
    assert not part.has_search_tool


def test_defer_loading_and_always_load_split_tools() -> None:
    part = partition_tools(catalog(TOOLS).tools, _config())
    assert _names(part.deferred) == ["weather_alerts", "weather_forecast"]
    assert _names(part.loaded) == ["fetch_fetch", "words_define", "words_random_word"]
    assert part.has_search_tool


def test_defer_all_defers_every_server_but_keeps_always_load_tools() -> None:
    part = partition_tools(catalog(TOOLS).tools, _config(tool_discovery={"enabled": True, "defer_all": True}))
    assert _names(part.loaded) == ["fetch_fetch"]
    assert len(part.deferred) == 4


def test_nothing_deferred_means_no_search_tool() -> None:
    cfg = _config(servers={"words": {"command": "x"}, "weather": {"command": "w"}, "fetch": {"command": "f"}},
                  tool_sets={})  # fmt: skip
    assert not partition_tools(catalog(TOOLS).tools, cfg).has_search_tool


def test_toolset_filter_applies_before_partitioning() -> None:
    cfg = _config()
    tools = select_toolset(catalog(TOOLS), cfg, "only_define")
    part = partition_tools(tools, cfg)
    # weather is deferred in the config but excluded by the toolset: it is neither loaded nor deferred.
    assert _names(part.tools) == ["words_define"]
    assert part.deferred == ()
