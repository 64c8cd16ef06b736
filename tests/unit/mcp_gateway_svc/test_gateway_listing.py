"""What the gateway serves to hosts: descriptions within 2 KB, search-ready in all mode, result-size
hints per server, and the mode a client's name picks."""

from __future__ import annotations

import pytest
from toolscout.client import Tool

from mcp_gateway_svc.host_modes import mode_for_client, opening_of
from mcp_gateway_svc.listing import (
    DESCRIPTION_CAP_BYTES,
    MAX_RESULT_SIZE_META_KEY,
    ResultLimits,
    ServedTools,
    all_mode_descriptions,
    cap_bytes,
    name_words,
)
from tests.support.discovery_catalogs import make_tool, synthetic_tools


def test_a_short_text_is_served_as_it_is() -> None:
    assert cap_bytes("Get the weather.") == "Get the weather."


def test_a_long_text_is_cut_at_a_word_boundary_within_the_cap() -> None:
    text = "word " * 1000
    cut = cap_bytes(text)
    assert len(cut.encode()) <= DESCRIPTION_CAP_BYTES
    assert cut.endswith("word ...")


def test_multibyte_text_without_spaces_is_cut_between_characters() -> None:
    text = "获取今日头条热榜" * 200  # 3 bytes a character, no spaces
    cut = cap_bytes(text, 100)
    assert len(cut.encode()) <= 100
    assert cut.removesuffix(" ...") == text[: len(cut.removesuffix(" ..."))]


def test_identifiers_split_into_words() -> None:
    assert name_words("getTeamStats") == "get team stats"
    assert name_words("GET_tv-tv_id") == "get tv tv id"
    assert name_words("HTMLParser2") == "html parser 2"


def test_all_mode_descriptions_add_the_server_its_tools_and_the_parameters_after_the_tools_own_text() -> None:
    tools = [
        make_tool(
            "Sports/Football",
            "getTeamStats",
            "Retrieve team statistics.",
            {"team_name": {"type": "string", "description": "The team. Any club."}},
        ),
        make_tool("Sports/Football", "getPlayerStats", "Retrieve player statistics."),
    ]
    first = all_mode_descriptions(tools, "Sports data for the newsroom")[0]
    assert first.startswith("Retrieve team statistics.\n\n")
    assert (
        "getTeamStats (get team stats) in Sports/Football, beside: get team stats, get player stats" in first
    )
    assert "Parameters: team_name (team name): The team." in first
    assert first.endswith("Toolset: Sports data for the newsroom")


def test_every_all_mode_description_fits_2kb_on_a_50000_tool_catalog() -> None:
    tools: list[Tool] = list(synthetic_tools(50_000))
    long_params = {f"p{i}": {"type": "string", "description": "x " * 200} for i in range(30)}
    tools.append(make_tool("big", "huge", "y " * 5000, long_params))
    descriptions = all_mode_descriptions(tools)
    assert len(descriptions) == len(tools)
    assert max(len(d.encode()) for d in descriptions) <= DESCRIPTION_CAP_BYTES
    assert descriptions[-1].startswith("y y y")


def test_served_definitions_carry_each_servers_result_size_and_are_built_once() -> None:
    weather = make_tool("weather", "forecast", "Forecast.")
    notes = make_tool("notes", "add", "x " * 3000)
    served = ServedTools([weather, notes], ResultLimits({"weather": 1000, "notes": 0}))
    plain = served.definition(weather)
    assert plain.meta == {MAX_RESULT_SIZE_META_KEY: 1000}
    assert served.definition(weather) is plain
    assert served.definition(notes).meta is None  # 0: not advertised
    assert len((served.definition(notes).description or "").encode()) <= DESCRIPTION_CAP_BYTES
    ready = served.definition(weather, search_ready=True)
    assert "forecast in weather" in (ready.description or "")
    assert ready.meta == {MAX_RESULT_SIZE_META_KEY: 1000}


def test_the_gateways_own_tools_advertise_the_largest_result_size() -> None:
    limits = ResultLimits({"a": 1000, "b": 70_000})
    assert limits.of("") == 70_000
    assert limits.of("unconfigured") == 500_000


@pytest.mark.parametrize(
    ("name", "mode"),
    [
        ("claude-code", "all"),
        ("Claude-Code", "all"),
        ("codex-mcp-client", "meta"),
        ("mcp", "progressive"),
        ("", "progressive"),
    ],
)
def test_a_clients_name_picks_the_first_matching_patterns_mode_else_the_endpoints(
    name: str, mode: str
) -> None:
    assert mode_for_client(name, {"claude-code": "all", "codex*": "meta", "c*": "all"}, "progressive") == mode


def test_an_initialize_request_names_its_client() -> None:
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"clientInfo": {"name": "claude-code"}},
    }
    opening = opening_of(request)
    assert opening.initialize
    assert opening.client_name == "claude-code"


def test_a_request_without_a_client_name_names_none() -> None:
    opening = opening_of({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": "x"}})
    assert not opening.initialize
    assert opening.client_name == ""


def test_a_2026_request_names_its_client_in_meta() -> None:
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/list",
        "params": {"_meta": {"io.modelcontextprotocol/clientInfo": {"name": "codex-mcp-client"}}},
    }
    opening = opening_of(request)
    assert not opening.initialize
    assert opening.client_name == "codex-mcp-client"
