"""search_tools execution: modes and precedence, scoping, already-loaded tools, and the exact text the LLM reads."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from toolscout.client import SearchResult

from discovery_svc.catalog import ParsedTool
from discovery_svc.catalog_index import CatalogIndex
from discovery_svc.errors import SearchArgumentError, UnknownServerError
from discovery_svc.scope import SearchScope
from discovery_svc.search_args import SearchArgs, SearchMode, parse_arguments_json
from discovery_svc.search_tool import execute_search
from tests.support.discovery_catalogs import catalog, make_tool
from toolscout_kit.errors import NotFoundError

CITY = {"type": "string", "description": "City name, e.g. Paris."}


TOOLS = [
    make_tool("weather", "get_forecast", "Weather forecast for the next days.", {"city": CITY, "days": {"type": "integer"}}, ["city"]),
    make_tool("weather", "get_alerts", "Severe weather alerts for a region.", {"region": {"type": "string"}}),
    make_tool("mail", "send_email", "Send an email message to a recipient.", {"to": {"type": "string"}, "body": {"type": "string"}}, ["to"]),
    make_tool("mail", "list_inbox", "List messages in the inbox.", {"tags": {"type": "array", "items": {"type": "string"}}}),
    make_tool("calendar", "create_event", "Create a calendar event.", {}),
    make_tool("calendar", "get_forecast", "Forecast of busy time slots in the calendar."),
]  # fmt: skip


def scope(tools: Sequence[ParsedTool] = TOOLS, eager: Sequence[str] = ()) -> SearchScope:
    return SearchScope(CatalogIndex(catalog(tools)), None, eager)


def run(
    args: SearchArgs | str,
    sc: SearchScope | None = None,
    loaded: Sequence[str] = (),
    k: int = 5,
    browse: int = 20,
) -> SearchResult:
    parsed = parse_arguments_json(args) if isinstance(args, str) else args
    return execute_search(sc or scope(), parsed, loaded=loaded, max_results=k, browse_limit=browse)


def llm_names(result: SearchResult) -> list[str]:
    return [m.tool.llm_name for m in result.matches]


def test_unknown_server_is_not_found_and_lists_valid_servers() -> None:
    with pytest.raises(UnknownServerError) as err:
        run('{"server_name": "wether"}')
    assert isinstance(err.value, NotFoundError)
    assert err.value.message == "Unknown server 'wether'. Valid servers: calendar, mail, weather."


def test_unknown_server_among_many_suggests_the_closest() -> None:
    tools = [make_tool(f"server{i:03d}", "t") for i in range(60)]
    with pytest.raises(UnknownServerError) as err:
        run('{"server_name": "server0007"}', scope(tools))
    assert "Did you mean: server007" in err.value.message
    assert "(first 50 of 60)" in err.value.message


def test_query_alone_returns_the_top_matches() -> None:
    result = run('{"query": "weather forecast"}')
    assert result.mode is SearchMode.QUERY
    assert llm_names(result)[0] == "weather_get_forecast"
    assert result.newly_loaded[0] is result.matches[0].tool


def test_query_results_are_capped_at_max_results() -> None:
    result = run('{"query": "forecast weather calendar email"}', k=2)
    assert len(result.matches) == 2


def test_exact_tool_name_query_ranks_that_tool_first() -> None:
    result = run('{"query": "list_inbox"}')
    assert llm_names(result)[0] == "mail_list_inbox"


def test_server_with_query_searches_only_that_server() -> None:
    result = run('{"server_name": "calendar", "query": "forecast"}')
    assert result.mode is SearchMode.SERVER_QUERY
    assert llm_names(result) == ["calendar_get_forecast"]


def test_server_alone_lists_its_tools() -> None:
    result = run('{"server_name": "mail"}')
    assert result.mode is SearchMode.SERVER
    assert llm_names(result) == ["mail_list_inbox", "mail_send_email"]
    assert result.total_matches == 2
    assert "offset=" not in result.result_text


def test_server_browse_is_capped_and_says_how_to_see_the_rest() -> None:
    tools = [make_tool("big", f"op_{i:02d}", f"Operation {i}.") for i in range(7)]
    first = run('{"server_name": "big"}', scope(tools), browse=3)
    assert llm_names(first) == ["big_op_00", "big_op_01", "big_op_02"]
    assert first.total_matches == 7
    assert first.result_text.startswith("Server 'big' has 7 tools; showing 1-3:")
    assert first.result_text.endswith(
        'Showing 1-3 of 7. Call search_tools again with server_name="big" and offset=3 for more.'
    )
    last = run('{"server_name": "big", "offset": 6}', scope(tools), browse=3)
    assert llm_names(last) == ["big_op_06"]
    assert "offset=" not in last.result_text


def test_server_browse_offset_past_the_end_is_an_error() -> None:
    with pytest.raises(SearchArgumentError) as err:
        run('{"server_name": "mail", "offset": 2}')
    assert err.value.message == "offset 2 is past the end: server 'mail' has 2 tools (offsets 0-1)."


def test_tool_names_load_exact_tools_by_llm_name_or_server_tool_name() -> None:
    result = run('{"tool_names": ["mail_send_email", "create_event"]}')
    assert result.mode is SearchMode.TOOL_NAMES
    assert llm_names(result) == ["mail_send_email", "calendar_create_event"]


def test_a_server_tool_name_shared_by_two_servers_loads_both() -> None:
    assert llm_names(run('{"tool_names": ["get_forecast"]}')) == [
        "calendar_get_forecast",
        "weather_get_forecast",
    ]


def test_tool_names_take_precedence_over_server_and_query() -> None:
    result = run('{"tool_names": ["send_email"], "query": "weather", "server_name": "mail"}')
    assert result.mode is SearchMode.TOOL_NAMES
    assert llm_names(result) == ["mail_send_email"]


def test_tool_names_with_a_server_are_scoped_to_that_server() -> None:
    result = run('{"tool_names": ["get_forecast"], "server_name": "calendar"}')
    assert llm_names(result) == ["calendar_get_forecast"]
    miss = run('{"tool_names": ["send_email"], "server_name": "calendar"}')
    assert miss.matches == ()
    assert miss.not_found[0].name == "send_email"


def test_unknown_tool_names_come_back_with_the_closest_names() -> None:
    result = run('{"tool_names": ["send_emial", "get_forecast"]}')
    assert llm_names(result) == ["calendar_get_forecast", "weather_get_forecast"]
    assert result.not_found[0].name == "send_emial"
    assert result.not_found[0].closest[0] == "mail_send_email"
    assert "Not found: 'send_emial' (closest: mail_send_email" in result.result_text


def test_only_unknown_tool_names_give_no_results_text_with_suggestions() -> None:
    result = run('{"tool_names": ["zzzz_qqq"]}')
    assert result.matches == ()
    assert result.result_text == (
        "No tools found with those names. Not found: 'zzzz_qqq' (no similar names). "
        "Use exact names from the manifest, or search with a query."
    )


def test_query_is_the_fallback_when_no_tool_name_exists() -> None:
    result = run('{"tool_names": ["nope_nothing"], "query": "send email"}')
    assert result.mode is SearchMode.QUERY
    assert llm_names(result)[0] == "mail_send_email"
    assert result.not_found[0].name == "nope_nothing"


def test_no_match_says_no_tools_found_with_a_hint() -> None:
    result = run('{"query": "xylophone"}')
    assert result.matches == ()
    assert result.result_text == (
        "No tools found matching 'xylophone'. Try fewer or different keywords (an action and an "
        "object, e.g. 'send email'), or list a server's tools with server_name."
    )


def test_no_match_in_a_server_suggests_browsing_it() -> None:
    result = run('{"query": "xylophone", "server_name": "mail"}')
    assert result.result_text == (
        "No tools found matching 'xylophone' in server 'mail'. Try other keywords, or call "
        'search_tools with only server_name="mail" to list its tools.'
    )


def test_already_loaded_matches_are_reported_and_do_not_crowd_out_new_ones() -> None:
    tools = [make_tool("s", f"weather_{i}", "weather report") for i in range(4)]
    result = run('{"query": "weather report"}', scope(tools), loaded=["s_weather_0", "s_weather_1"], k=2)
    new = [m.tool.llm_name for m in result.matches if not m.already_loaded]
    old = [m.tool.llm_name for m in result.matches if m.already_loaded]
    assert new == ["s_weather_2", "s_weather_3"]
    assert old == ["s_weather_0", "s_weather_1"]
    assert [t.llm_name for t in result.newly_loaded] == new
    assert "Already loaded (call directly): s_weather_0, s_weather_1" in result.result_text


def test_eagerly_loaded_tools_count_as_already_loaded() -> None:
    result = run('{"tool_names": ["mail_send_email"]}', scope(eager=["mail_send_email"]))
    assert result.matches[0].already_loaded
    assert result.newly_loaded == ()
    assert result.result_text.endswith("No new tools were loaded: every match is already available to call.")


def test_result_text_lists_server_name_description_and_parameters() -> None:
    result = run('{"tool_names": ["weather_get_forecast", "mail_list_inbox", "calendar_create_event"]}')
    assert result.result_text == (
        "Found 3 tools:\n\n"
        "- weather_get_forecast (server: weather, tool: get_forecast)\n"
        "  Weather forecast for the next days.\n"
        "  Parameters:\n"
        "    - city (string, required): City name, e.g. Paris.\n"
        "    - days (integer)\n\n"
        "- mail_list_inbox (server: mail, tool: list_inbox)\n"
        "  List messages in the inbox.\n"
        "  Parameters:\n"
        "    - tags (array of string)\n\n"
        "- calendar_create_event (server: calendar, tool: create_event)\n"
        "  Create a calendar event.\n"
        "  Parameters: none\n\n"
        "These tools are now loaded and available to call."
    )
