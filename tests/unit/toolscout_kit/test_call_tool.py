"""The call_tool contract's owner: reading a call, checking its arguments, and every refusal kind."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.discovery_catalogs import make_tool
from toolscout_kit import call_tool as contract
from toolscout_kit.call_tool import CallTarget, Refusal, RefusalKind, UnknownHint

SHAPE = 'Error: call_tool takes {"name": "<a tool search_tools found>", "arguments": {...}}'
FORECAST = make_tool(
    "weather",
    "forecast",
    "Weather forecast for a city.",
    {"city": {"type": "string"}, "days": {"type": "integer"}},
    ["city"],
)


def refused(value: CallTarget | Refusal) -> Refusal:
    assert isinstance(value, Refusal), value
    return value


@pytest.mark.parametrize(
    "arguments",
    [
        '{"name": "weather_forecast", "arguments": {"city": "Oslo"}}',
        {"name": "weather_forecast", "arguments": {"city": "Oslo"}},
        # As some models write it: the arguments as the JSON text of an object.
        {"name": " weather_forecast ", "arguments": '{"city": "Oslo"}'},
    ],
    ids=["model-text", "mcp-object", "arguments-as-text"],
)
def test_a_call_names_its_tool_and_the_arguments_to_run_it_with(arguments: Any) -> None:
    assert contract.read_call(arguments) == CallTarget("weather_forecast", {"city": "Oslo"})


@pytest.mark.parametrize("inner", [{}, "", "  ", "{}"])
def test_arguments_left_out_or_empty_are_no_arguments(inner: Any) -> None:
    call = {"name": "time_now"} if inner == {} else {"name": "time_now", "arguments": inner}
    assert contract.read_call(call) == CallTarget("time_now", {})
    assert contract.read_call(json.dumps(call)) == CallTarget("time_now", {})
    assert contract.read_call("") == refused(contract.read_call({}))


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ('{"name": ', "the arguments are not valid JSON (Expecting value at column 10)"),
        ("[1, 2]", "the arguments must be a JSON object, not an array"),
    ],
)
def test_text_that_is_not_a_json_object_is_refused_as_not_json(raw: str, problem: str) -> None:
    refusal = refused(contract.read_call(raw))
    assert refusal.kind is RefusalKind.NOT_JSON
    assert refusal.tool == "call_tool"
    assert refusal.text == (
        f"Error: invalid arguments for tool 'call_tool': {problem}. Call it again with a JSON object."
    )


def test_any_tools_arguments_that_are_not_an_object_are_refused_naming_that_tool() -> None:
    refusal = refused_parse(contract.parse_arguments("clock_now", "not json"))
    assert refusal.kind is RefusalKind.NOT_JSON
    assert refusal.text.startswith(
        "Error: invalid arguments for tool 'clock_now': the arguments are not valid"
    )
    assert contract.parse_arguments("clock_now", "") == {}
    assert contract.parse_arguments("clock_now", '{"a": 1}') == {"a": 1}


def refused_parse(value: dict[str, Any] | Refusal) -> Refusal:
    assert isinstance(value, Refusal), value
    return value


@pytest.mark.parametrize(
    ("call", "tool", "problems"),
    [
        ({"arguments": {}}, "", "'name' must be a tool name"),
        ({"name": "  "}, "", "'name' must be a tool name"),
        ({"name": 3}, "", "'name' must be a tool name"),
        ({"name": "weather_forecast", "arguments": [1]}, "weather_forecast", "'arguments' must be an object"),
        (
            {"name": "weather_forecast", "arguments": None},
            "weather_forecast",
            "'arguments' must be an object",
        ),
        (
            {"name": "weather_forecast", "arguments": "city=Oslo"},
            "weather_forecast",
            "'arguments' must be an object",
        ),
        ({"arguments": 3}, "", "'name' must be a tool name; 'arguments' must be an object"),
    ],
)
def test_a_call_without_a_tool_name_or_an_arguments_object_is_refused_as_malformed(
    call: dict[str, Any], tool: str, problems: str
) -> None:
    refusal = refused(contract.read_call(call))
    assert refusal.kind is RefusalKind.MALFORMED
    # The tool the model meant, when it named one (the history rebuild reads it).
    assert refusal.tool == tool
    assert refusal.text == f"{SHAPE}: {problems}"


def test_call_tool_naming_itself_is_refused_and_search_tools_only_where_it_runs_directly() -> None:
    itself = refused(contract.read_call({"name": "call_tool", "arguments": {}}))
    assert itself.kind is RefusalKind.META_TOOL
    assert itself.text == "Error: call_tool calls the tools search_tools finds, not itself."
    assert (
        refused(contract.read_call({"name": "call_tool"}, search_through=True)).kind is RefusalKind.META_TOOL
    )
    search = refused(contract.read_call('{"name": "search_tools", "arguments": {"query": "x"}}'))
    assert search.kind is RefusalKind.META_TOOL
    assert search.tool == "search_tools"
    assert search.text == "Error: call search_tools directly, not through call_tool."
    # The gateway runs the search a call_tool call names.
    through = contract.read_call({"name": "search_tools", "arguments": {"query": "x"}}, search_through=True)
    assert through == CallTarget("search_tools", {"query": "x"})


def test_arguments_that_fit_pass_and_a_misfit_is_refused_with_the_expected_shape() -> None:
    assert contract.check_arguments(FORECAST, {"city": "Oslo", "days": 2}) is None
    refusal = contract.check_arguments(FORECAST, {"town": "Oslo", "days": "two"})
    assert refusal is not None
    assert refusal.kind is RefusalKind.MISFIT
    assert refusal.tool == "weather_forecast"
    lines = refusal.text.splitlines()
    assert lines[0] == "Error: The arguments do not fit what weather_forecast takes:"
    assert "  city: required" in lines
    assert "  days: expected integer, got string" in lines
    assert lines[-1] == 'Example arguments: {"city": "<city>"}'


def test_a_deferred_tool_called_before_a_search_found_it_gets_the_prds_sentence() -> None:
    refusal = contract.not_loaded("mail_send_email")
    assert refusal == Refusal(
        RefusalKind.NOT_LOADED, "mail_send_email", contract.not_loaded_error("mail_send_email")
    )
    assert refusal.text == (
        "Error: Tool 'mail_send_email' is not yet loaded. "
        "Use the 'search_tools' tool to discover and load it first, then call it again."
    )


def test_an_unknown_tool_is_refused_with_what_the_caller_knows_and_where_to_look() -> None:
    listed = contract.unknown_tool("launch_rockets", UnknownHint.SEARCH, available=["clock_now"])
    assert listed.kind is RefusalKind.UNKNOWN_TOOL
    assert listed.text == (
        "Error: Unknown tool 'launch_rockets'. Available tools: clock_now. Use 'search_tools' to find other tools."
    )
    closest = contract.unknown_tool(
        "text__revrse", UnknownHint.TOOLS_LIST, closest=["text__reverse", "text__rev"]
    )
    assert (
        closest.text
        == "Error: Unknown tool 'text__revrse' (closest: text__reverse, text__rev). See tools/list."
    )
    assert (
        contract.unknown_tool("x", UnknownHint.NONE, available=[]).text
        == "Error: Unknown tool 'x'. Available tools: none."
    )
    many = contract.unknown_tool("x", UnknownHint.NONE, available=[f"t{i:02}" for i in range(40)]).text
    assert many.endswith("t28, t29, ....")


def test_every_refusal_kind_has_a_sentence_that_reads_as_an_error() -> None:
    refusals = [
        refused(contract.read_call("[]")),
        refused(contract.read_call({})),
        refused(contract.read_call({"name": "call_tool"})),
        contract.unknown_tool("x", UnknownHint.SEARCH),
        contract.not_loaded("x"),
        contract.check_arguments(FORECAST, {}),
    ]
    assert {r.kind for r in refusals if r is not None} == set(RefusalKind)
    assert all(r is not None and r.text.startswith("Error: ") for r in refusals)


def test_the_definition_requires_a_name_and_takes_an_arguments_object() -> None:
    assert contract.CALL_TOOL_PARAMETERS["required"] == ["name"]
    assert contract.CALL_TOOL_PARAMETERS["properties"]["arguments"]["type"] == "object"
