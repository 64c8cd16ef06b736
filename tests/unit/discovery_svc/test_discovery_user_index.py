"""Searching as one principal: a per_user server's tools as it lists them to that principal
(discovery_svc.user_index), merged with the shared index without that server's stack entries."""

from __future__ import annotations

from typing import Any

import pytest
from toolscout.client import PlanRequest, SearchRequest, Tool, UnavailableError

from discovery_svc.engine import DiscoveryEngine
from discovery_svc.user_index import UserIndexes
from tests.support.discovery_catalogs import catalog, config, make_tool
from toolscout_kit.errors import NotFoundError

# The stack's catalog: the per_user server "notes" listed one tool to the stack's own session.
STACK = [
    make_tool("notes", "notebook_operator", "The private notebook of the operator."),
    make_tool("weather", "forecast", "Weather forecast for a city."),
    make_tool("time", "now", "Current time."),
]
# What "notes" lists to each user.
OWN = {
    "alice": (make_tool("notes", "notebook_alice", "The private notebook of alice."),),
    "bob": (
        make_tool("notes", "notebook_bob", "The private notebook of bob."),
        make_tool("notes", "pinned", "Pinned notebook pages."),
    ),
}
DOC: dict[str, Any] = {
    "servers": {
        "notes": {
            "url": "http://127.0.0.1:1/mcp",
            "auth": {"type": "oauth", "per_user": True},
            "defer_loading": True,
        },
        "weather": {"command": "w", "defer_loading": True},
        "time": {"command": "t"},
    },
    "tool_sets": {"no_notes": {"servers": {"weather": True, "time": True}}},
    "tool_discovery": {"enabled": True},
}


class Lister:
    """The pool's ListTools as each principal sees ``notes`` (None: not signed in)."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []
        self.failing = False

    async def __call__(self, server: str, principal: str) -> tuple[Tool, ...] | None:
        self.asked.append((server, principal))
        if self.failing:
            raise UnavailableError("the pool did not answer")
        return OWN.get(principal)


def engine(lister: Lister, now: list[float] | None = None, **options: Any) -> DiscoveryEngine:
    clock = (lambda: now[0]) if now is not None else None
    users = UserIndexes(config(DOC), lister, **({"clock": clock} if clock else {}), **options)
    svc = DiscoveryEngine(config(DOC), users=users)
    svc.set_catalog(catalog(STACK, "v1"))
    return svc


def found(text: str) -> set[str]:
    return {
        name
        for name in ("notes_notebook_operator", "notes_notebook_alice", "notes_notebook_bob")
        if name in text
    }


async def test_each_principal_finds_their_own_tools_of_a_per_user_server_and_never_the_stacks() -> None:
    svc = engine(Lister())
    for user in ("alice", "bob"):
        result = await svc.search_tools(SearchRequest(query="private notebook", principal=user))
        assert found(result.result_text) == {f"notes_notebook_{user}"}, result.result_text
        assert [t.llm_name for t in result.newly_loaded][:1] == [f"notes_notebook_{user}"]
    # Without a principal: the stack's catalog, as before.
    stack = await svc.search_tools(SearchRequest(query="private notebook"))
    assert found(stack.result_text) == {"notes_notebook_operator"}


async def test_a_principal_search_still_finds_the_shared_servers_tools() -> None:
    result = await engine(Lister()).search_tools(SearchRequest(query="weather forecast", principal="alice"))
    assert [t.llm_name for t in result.newly_loaded][:1] == ["weather_forecast"]


async def test_names_and_server_browse_resolve_in_the_principals_own_list() -> None:
    svc = engine(Lister())
    named = await svc.search_tools(SearchRequest(tool_names=("notes_notebook_bob",), principal="bob"))
    assert [t.llm_name for t in named.newly_loaded] == ["notes_notebook_bob"]
    other = await svc.search_tools(SearchRequest(tool_names=("notes_notebook_bob",), principal="alice"))
    assert not other.newly_loaded
    browse = await svc.search_tools(SearchRequest(server_name="notes", principal="bob"))
    assert [t.llm_name for t in browse.newly_loaded] == ["notes_notebook_bob", "notes_pinned"]


async def test_a_principal_without_a_sign_in_finds_none_of_its_tools_and_is_told_why() -> None:
    result = await engine(Lister()).search_tools(SearchRequest(query="private notebook", principal="carol"))
    assert not found(result.result_text)
    assert "Not searched: MCP server 'notes' lists its tools to each user under their own sign-in" in (
        result.result_text
    )


async def test_a_toolset_without_the_per_user_server_neither_asks_nor_mentions_it() -> None:
    lister = Lister()
    result = await engine(lister).search_tools(
        SearchRequest(query="private notebook", toolset="no_notes", principal="carol")
    )
    assert "Not searched" not in result.result_text
    assert lister.asked == []


async def test_listings_are_kept_per_principal_until_ttl_or_a_new_catalog_version() -> None:
    lister, now = Lister(), [0.0]
    svc = engine(lister, now)
    for _ in range(3):
        await svc.search_tools(SearchRequest(query="notebook", principal="alice"))
    assert lister.asked == [("notes", "alice")]
    now[0] = 11.0  # past the 10 s TTL
    await svc.search_tools(SearchRequest(query="notebook", principal="alice"))
    assert len(lister.asked) == 2
    svc.set_catalog(catalog(STACK[1:], "v2"))
    await svc.search_tools(SearchRequest(query="notebook", principal="alice"))
    assert len(lister.asked) == 3


async def test_the_per_principal_indexes_are_bounded_least_recently_used_first() -> None:
    lister = Lister()
    users = UserIndexes(config(DOC), lister, size=1)
    svc = DiscoveryEngine(config(DOC), users=users)
    svc.set_catalog(catalog(STACK, "v1"))
    await svc.search_tools(SearchRequest(query="notebook", principal="alice"))
    await svc.search_tools(SearchRequest(query="notebook", principal="bob"))
    assert len(users) == 1
    await svc.search_tools(SearchRequest(query="notebook", principal="alice"))
    assert lister.asked.count(("notes", "alice")) == 2


async def test_a_pool_that_does_not_answer_leaves_the_server_out_and_is_asked_again() -> None:
    lister = Lister()
    lister.failing = True
    svc = engine(lister)
    result = await svc.search_tools(SearchRequest(query="weather", principal="alice"))
    assert [t.llm_name for t in result.newly_loaded][:1] == ["weather_forecast"]
    lister.failing = False
    again = await svc.search_tools(SearchRequest(query="private notebook", principal="alice"))
    assert found(again.result_text) == {"notes_notebook_alice"}


async def test_the_manifest_names_a_per_user_server_without_the_stacks_tools() -> None:
    plan = await engine(Lister()).plan_tools(PlanRequest())
    assert "- notes (its tools are listed to each user under their own sign-in" in plan.manifest
    assert "notebook_operator" not in plan.manifest
    assert "- weather (1 tool): forecast" in plan.manifest
    assert plan.search_tool is not None
    assert "notebook_operator" not in plan.search_tool.description


def names(tools: Any) -> list[str]:
    return [t.llm_name for t in tools]


async def test_a_principals_plan_loads_and_defers_their_own_tools_of_a_per_user_server_only() -> None:
    svc = engine(Lister())
    stack = await svc.plan_tools(PlanRequest(discovered_tools=("notes_notebook_operator",)))
    carol = await svc.plan_tools(PlanRequest(include_deferred_tools=True, principal="carol"))
    assert carol.tokens.all_definitions_tokens < stack.tokens.all_definitions_tokens
    assert names(stack.loaded_tools) == ["time_now", "notes_notebook_operator"]
    for user in ("alice", "bob"):
        mine = f"notes_notebook_{user}"
        plan = await svc.plan_tools(
            PlanRequest(
                discovered_tools=("notes_notebook_operator", mine, "weather_forecast", "notes_notebook_x"),
                include_deferred_names=True,
                include_deferred_tools=True,
                principal=user,
            )
        )
        # Another's tool, or the stack's entry of the per_user server, is never loaded for them.
        assert names(plan.loaded_tools) == ["time_now", mine, "weather_forecast"]
        assert plan.discovered_tools == (mine, "weather_forecast")
        assert plan.dropped_tools == ("notes_notebook_operator", "notes_notebook_x")
        others = ["notes_pinned"] if user == "bob" else []
        assert list(plan.deferred_tool_names) == others
        assert names(plan.deferred_tools) == ["weather_forecast", mine, *others]
        assert plan.total_tools == 2 + len(OWN[user])
        assert plan.deferred_count == len(others)
        # Counted over their tools: one more tool of their own than carol (no sign-in) has.
        assert plan.tokens.all_definitions_tokens > carol.tokens.all_definitions_tokens
    # Without a sign-in: none of the server's tools, and never the stack's.
    assert names(carol.loaded_tools) == ["time_now"]
    assert names(carol.deferred_tools) == ["weather_forecast"]


async def test_a_principals_search_carries_their_own_plan() -> None:
    svc = engine(Lister())
    result = await svc.search_tools(
        SearchRequest(query="private notebook", include_plan=True, principal="alice")
    )
    assert result.plan is not None
    assert names(result.plan.loaded_tools)[-1:] == ["notes_notebook_alice"]
    assert "notes_notebook_operator" not in names(result.plan.loaded_tools)


async def test_browsing_a_per_user_server_without_a_sign_in_says_so_instead_of_unknown_server() -> None:
    svc = engine(Lister())
    for surface in ("", "stable"):
        result = await svc.search_tools(
            SearchRequest(server_name="notes", principal="carol", surface=surface)
        )
        assert not result.matches
        assert "Unknown server" not in result.result_text
        assert result.result_text.startswith(
            "No tools of server 'notes' yet: MCP server 'notes' lists its tools"
        )
        assert "you have not signed in yet" in result.result_text
        assert "Not searched" not in result.result_text  # said once
        if surface:
            assert "you have not signed in yet" in result.structured_content_json
    # A server that does not exist is still unknown.
    with pytest.raises(NotFoundError, match="Unknown server 'nope'"):
        await svc.search_tools(SearchRequest(server_name="nope", principal="carol"))
