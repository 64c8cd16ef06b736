"""search_tools arguments: validation with messages written for the LLM."""

from __future__ import annotations

import json

import pytest

from discovery_svc.errors import SearchArgumentError
from discovery_svc.search_args import SearchArgs, parse_arguments_json, validate_arguments
from toolscout_kit.errors import InvalidArgumentError


def test_tool_names_given_as_a_string_is_an_error_not_one_name_per_character() -> None:
    with pytest.raises(SearchArgumentError) as err:
        parse_arguments_json('{"tool_names": "get_forecast"}')
    assert (
        err.value.message == "'tool_names' must be a list of strings (e.g. [\"get_weather\"]), got a string."
    )
    assert isinstance(err.value, InvalidArgumentError)


def test_tool_names_with_a_non_string_item_is_an_error() -> None:
    with pytest.raises(SearchArgumentError, match="only strings, got a number"):
        parse_arguments_json('{"tool_names": ["a", 3]}')


def test_query_of_the_wrong_type_is_an_error() -> None:
    with pytest.raises(SearchArgumentError, match=r"^'query' must be a string, got a list\.$"):
        parse_arguments_json('{"query": ["weather"]}')


def test_arguments_that_are_not_a_json_object_are_an_error() -> None:
    with pytest.raises(SearchArgumentError, match="must be a JSON object"):
        parse_arguments_json("not json")
    with pytest.raises(SearchArgumentError, match="must be a JSON object, got a list"):
        parse_arguments_json('["weather"]')


@pytest.mark.parametrize(
    "raw", ["{}", "", '{"query": "  ", "server_name": "", "tool_names": []}', '{"tool_names": [" "]}']
)
def test_empty_arguments_ask_for_one_of_the_three(raw: str) -> None:
    with pytest.raises(SearchArgumentError) as err:
        parse_arguments_json(raw)
    assert err.value.message == "Provide at least one of: query, server_name, or tool_names."


def test_query_over_500_characters_is_rejected_and_500_is_accepted() -> None:
    assert validate_arguments(query="a" * 500).query == "a" * 500
    with pytest.raises(SearchArgumentError) as err:
        validate_arguments(query="a" * 501)
    assert err.value.message == "'query' is 501 characters; keep it under 500 (a few keywords work best)."


@pytest.mark.parametrize("offset", [-1, True, "2", 1.5])
def test_offset_must_be_a_non_negative_integer(offset: object) -> None:
    with pytest.raises(SearchArgumentError, match=r"'offset' must be a non-negative integer\."):
        parse_arguments_json(json.dumps({"server_name": "mail", "offset": offset}))


def test_arguments_are_trimmed() -> None:
    args = parse_arguments_json('{"query": " forecast ", "tool_names": ["a", "a", " b "]}')
    assert args == SearchArgs(query="forecast", server_name=None, tool_names=("a", "b"), offset=0)


@pytest.mark.parametrize("extra", ['"max_results": -1', '"max_results": 5', '"limit": 3'])
def test_a_key_search_tools_does_not_take_is_refused_naming_the_keys_it_takes(extra: str) -> None:
    with pytest.raises(SearchArgumentError) as refused:
        parse_arguments_json('{"query": "forecast", ' + extra + "}")
    assert refused.value.message.startswith("search_tools takes query, server_name, tool_names, offset; '")
