from __future__ import annotations

import pytest

from mcp_pool_svc.naming import NAME_PATTERN, NameTable, bare_name, llm_name, server_named_by


def test_plain_names_join_server_and_tool_with_a_double_underscore() -> None:
    assert llm_name("weather", "get_forecast") == "weather__get_forecast"


@pytest.mark.parametrize(
    ("server", "tool"),
    [
        ("my.server", "tool"),
        ("files", "read file"),
        ("üñí", "çødé"),
        ("a" * 60, "b" * 60),
        ("x", "ツール"),
        ("srv__x", "t"),
        ("srv_", "t"),
    ],
)
def test_every_name_matches_the_llm_name_pattern(server: str, tool: str) -> None:
    assert NAME_PATTERN.match(llm_name(server, tool))


def test_names_that_would_collide_after_joining_stay_distinct() -> None:
    # "a" + "__" + "_b" and "a_" + "__" + "b" both read "a___b" when joined naively.
    table = NameTable([("a", "_b"), ("a_", "b"), ("a.b", "c"), ("a_b", "c")])
    names = {table.name_for(*pair) for pair in [("a", "_b"), ("a_", "b"), ("a.b", "c"), ("a_b", "c")]}
    assert len(names) == 4


def test_a_name_does_not_change_when_another_server_is_added() -> None:
    before = NameTable([("github", "create_issue"), ("my.srv", "x")])
    after = NameTable(
        [("github", "create_issue"), ("my.srv", "x"), ("github_enterprise", "create_issue"), ("my_srv", "x")]
    )
    assert before.name_for("github", "create_issue") == after.name_for("github", "create_issue")
    assert before.name_for("my.srv", "x") == after.name_for("my.srv", "x")


def test_long_names_are_cut_to_64_characters_and_stay_unique() -> None:
    long_server = "s" * 50
    a = llm_name(long_server, "t" * 40 + "_one")
    b = llm_name(long_server, "t" * 40 + "_two")
    assert len(a) <= 64
    assert len(b) <= 64
    assert a != b


def test_names_resolve_by_lookup_even_when_the_server_name_contains_underscores() -> None:
    table = NameTable([("my_server", "do_thing"), ("my", "server__do_thing")])
    for pair in [("my_server", "do_thing"), ("my", "server__do_thing")]:
        assert table.resolve(table.name_for(*pair)) == pair
    assert table.resolve("nope") is None


def _bare_except(*namespaced: str):  # type: ignore[no-untyped-def]
    return lambda server: server in namespaced


def test_tools_of_a_server_that_is_not_namespaced_keep_their_own_names() -> None:
    table = NameTable([("time", "get_current_time"), ("notes", "add")], _bare_except("notes"))
    assert table.name_for("time", "get_current_time") == "get_current_time"
    assert table.resolve("get_current_time") == ("time", "get_current_time")
    assert table.name_for("notes", "add") == "notes__add"
    assert table.clashes == {}


def test_a_bare_name_two_servers_share_is_namespaced_on_both_and_named_as_a_clash() -> None:
    table = NameTable([("a", "search"), ("b", "search"), ("a", "other")], _bare_except())
    assert table.name_for("a", "search") == "a__search"
    assert table.name_for("b", "search") == "b__search"
    assert table.resolve("search") is None
    assert table.name_for("a", "other") == "other"
    assert table.clashes == {"search": ("a", "b")}


def test_a_bare_name_equal_to_another_servers_namespaced_name_is_not_shadowed() -> None:
    table = NameTable([("x", "a__b"), ("a", "b")], _bare_except("a"))
    assert table.resolve("a__b") == ("a", "b")
    assert table.name_for("x", "a__b") != "a__b"
    assert table.resolve(table.name_for("x", "a__b")) == ("x", "a__b")
    assert table.clashes == {"a__b": ("a", "x")}


@pytest.mark.parametrize("tool", ["search_tools", "call_tool"])
def test_a_tool_named_like_discoverys_own_tools_is_always_namespaced(tool: str) -> None:
    table = NameTable([("srv", tool)], _bare_except())
    assert table.name_for("srv", tool) == f"srv__{tool}"


def test_a_bare_name_that_is_not_a_valid_llm_name_is_sanitized_and_hashed() -> None:
    assert bare_name("get.weather") != bare_name("get_weather")
    assert NAME_PATTERN.match(bare_name("get.weather"))
    assert NAME_PATTERN.match(bare_name("x" * 100))


SERVERS = ("srv", "srv__x", "my.server", "a" * 60, "weather_api", "weather")


@pytest.mark.parametrize(
    ("server", "tool"),
    [
        ("srv", "t"),
        ("srv__x", "t"),  # split at the first "__", this name would be a tool of "srv"
        ("my.server", "read file"),
        ("a" * 60, "b" * 60),
        ("weather_api", "get"),
        ("weather", "api_get"),
    ],
)
def test_a_name_no_catalog_holds_yet_is_told_whose_it_would_be_by_the_naming_rule(
    server: str, tool: str
) -> None:
    assert server_named_by(llm_name(server, tool), SERVERS) == server


@pytest.mark.parametrize("name", ["nowhere__t", "t", "srvx__t", "weather"])
def test_a_name_no_configured_server_would_give_is_nobodys(name: str) -> None:
    assert server_named_by(name, SERVERS) is None
