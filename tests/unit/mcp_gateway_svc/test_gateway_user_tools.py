"""What tools/list shows one caller when a per_user server lists its tools per user
(mcp_gateway_svc.user_tools.tools_as_seen_by): the plan's lists without that server's stack
entries, with the caller's own tools in their place, in every mode."""

from __future__ import annotations

from typing import Any

from toolscout.client import GatewayMode, Tool, ToolPlan

from mcp_gateway_svc.user_tools import UserTools, tools_as_seen_by
from mcp_gateway_svc.views import ToolsetView
from tests.support.discovery_catalogs import make_tool
from toolscout_kit.config import parse_config

SEARCH = Tool(server="", name="search_tools", llm_name="search_tools")
CALL = Tool(server="", name="call_tool", llm_name="call_tool")
STACK_NOTE = make_tool("notes", "notebook_operator", "The operator's notebook.")
NOW = make_tool("time", "now", "Current time.")
FORECAST = make_tool("weather", "forecast", "Weather forecast.")
MINE = make_tool("notes", "notebook_alice", "Alice's notebook.")
PINNED = make_tool("notes", "pinned", "Pinned pages.")


def config(**notes: Any) -> Any:
    return parse_config(
        {
            "servers": {
                "notes": {
                    "url": "http://127.0.0.1:1/mcp",
                    "auth": {"type": "oauth", "per_user": True},
                    **notes,
                },
                "weather": {"command": "w", "defer_loading": True},
                "time": {"command": "t"},
            },
            "tool_sets": {
                "only_time": {"servers": {"time": True}},
                "pinned": {"servers": {"notes": ["pinned"]}},
            },
            "tool_discovery": {"enabled": True},
        },
        env={},
    )


def view(eager: tuple[Tool, ...], deferred: tuple[Tool, ...]) -> ToolsetView:
    plan = ToolPlan(
        loaded_tools=eager,
        search_tool=SEARCH,
        has_search_tool=True,
        deferred_tools=deferred,
        call_tool=CALL,
        catalog_version="v1",
    )
    return ToolsetView.from_plan(plan)


def alice(*tools: Tool, unsigned: tuple[str, ...] = ()) -> UserTools:
    return UserTools(frozenset({"notes"}), tools, unsigned, {t.llm_name: t for t in tools})


def names(tools: list[Tool]) -> list[str]:
    return [t.llm_name for t in tools]


def test_all_mode_lists_the_callers_own_tools_instead_of_the_stacks() -> None:
    seen = view((NOW,), (STACK_NOTE, FORECAST))
    listed = tools_as_seen_by(seen, GatewayMode.ALL, alice(MINE, PINNED), config(defer_loading=True))
    assert names(listed) == ["time_now", "weather_forecast", "notes_notebook_alice", "notes_pinned"]


def test_a_caller_who_has_not_signed_in_sees_none_of_the_servers_tools() -> None:
    seen = view((NOW,), (STACK_NOTE, FORECAST))
    listed = tools_as_seen_by(seen, GatewayMode.ALL, alice(unsigned=("notes",)), config(defer_loading=True))
    assert names(listed) == ["time_now", "weather_forecast"]


def test_meta_mode_lists_the_callers_eager_tools_and_leaves_deferred_ones_to_search() -> None:
    eager_notes = view((STACK_NOTE, NOW), (FORECAST,))
    listed = tools_as_seen_by(eager_notes, GatewayMode.META, alice(MINE), config())
    assert names(listed) == ["time_now", "notes_notebook_alice", "search_tools", "call_tool"]
    deferred_notes = view((NOW,), (STACK_NOTE, FORECAST))
    listed = tools_as_seen_by(deferred_notes, GatewayMode.META, alice(MINE), config(defer_loading=True))
    assert names(listed) == ["time_now", "search_tools", "call_tool"]
    always = config(defer_loading=True, always_load=["pinned"])
    listed = tools_as_seen_by(deferred_notes, GatewayMode.META, alice(MINE, PINNED), always)
    assert names(listed) == ["time_now", "notes_pinned", "search_tools", "call_tool"]


def test_progressive_mode_adds_what_the_callers_searches_found_never_the_stacks_entry() -> None:
    seen = view((NOW,), (STACK_NOTE, FORECAST))
    loaded = ["notes_notebook_alice", "notes_notebook_operator", "weather_forecast"]
    listed = tools_as_seen_by(
        seen, GatewayMode.PROGRESSIVE, alice(MINE), config(defer_loading=True), loaded, SEARCH
    )
    assert names(listed) == [
        "time_now",
        "search_tools",
        "call_tool",
        "notes_notebook_alice",
        "weather_forecast",
    ]


def test_a_toolset_filters_the_callers_tools_like_the_stacks() -> None:
    cfg = config(defer_loading=True)
    mine = alice(MINE, PINNED, unsigned=("notes",))
    assert mine.of_toolset(cfg, "only_time").tools == ()
    assert mine.of_toolset(cfg, "only_time").unsigned == ()
    assert names(list(mine.of_toolset(cfg, "pinned").tools)) == ["notes_pinned"]
    assert mine.of_toolset(cfg, "").tools == (MINE, PINNED)
