"""What tools/list shows one caller when a per_user server lists its tools per user
(mcp_gateway_svc.user_tools.tools_as_seen_by): the plan's lists without that server's stack
entries, with the caller's own tools in their place, in every mode."""

from __future__ import annotations

from typing import Any, cast

from prometheus_client import CollectorRegistry
from toolscout.client import GatewayMode, Tool, ToolPlan, ToolsetRef

from mcp_gateway_svc.endpoints import Endpoint
from mcp_gateway_svc.metrics import GatewayMetrics
from mcp_gateway_svc.sessions import SessionRegistry
from mcp_gateway_svc.tool_lists import list_signature, shared_signature
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


class _Outbound:
    """A session's standalone stream: counts the tools/list_changed notifications sent on it."""

    def __init__(self) -> None:
        self.changed = 0

    async def send_tool_list_changed(self) -> None:
        self.changed += 1


def _plan(version: str, eager: tuple[Tool, ...], deferred: tuple[Tool, ...]) -> ToolPlan:
    return ToolPlan(
        loaded_tools=eager,
        search_tool=SEARCH,
        has_search_tool=True,
        deferred_tools=deferred,
        call_tool=CALL,
        catalog_version=version,
    )


async def test_a_catalog_change_announces_a_callers_own_list_only_when_the_part_it_follows_changed() -> None:
    metrics = GatewayMetrics(CollectorRegistry())
    sessions = SessionRegistry(metrics, 60.0)
    endpoint = Endpoint("", ToolsetRef(), GatewayMode.META, cast(Any, None), sessions, metrics)
    await endpoint._on_plan(_plan("v1", (STACK_NOTE, NOW), (FORECAST,)))
    mine, plain = _Outbound(), _Outbound()
    for sid, outbound in (("alice", mine), ("nobody", plain)):
        session = sessions.open(sid, endpoint="", mode=GatewayMode.META, principal=sid)
        session.outbound = outbound
    # As tools/list leaves them: alice's own list (per_user servers), the plan's list for nobody.
    assert endpoint.view is not None
    own = sessions.get("alice")
    assert own is not None
    own.per_user = frozenset({"notes"})
    own.listed = shared_signature(
        tools_as_seen_by(endpoint.view, GatewayMode.META, alice(MINE), config()), own.per_user
    )
    other = sessions.get("nobody")
    assert other is not None
    other.listed = list_signature(endpoint.view, GatewayMode.META)
    # Only the stack's entry of the per_user server changed: alice's list did not, nobody's did.
    changed_note = make_tool("notes", "notebook_operator", "The operator's notebook, renamed.")
    await endpoint._on_plan(_plan("v2", (changed_note, NOW), (FORECAST,)))
    assert (mine.changed, plain.changed) == (0, 1)
    # A tool of another server now loads eagerly: both lists changed.
    await endpoint._on_plan(_plan("v3", (changed_note, NOW, FORECAST), ()))
    assert (mine.changed, plain.changed) == (1, 2)
