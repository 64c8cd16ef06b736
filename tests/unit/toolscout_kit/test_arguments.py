"""Reading input schemas for people and LLMs: the argument tree, example arguments, what does not fit."""

from __future__ import annotations

from typing import Any

from tests.support.schemas import FORECAST_SCHEMA
from toolscout_kit.arguments import argument_problems, argument_tree, example_arguments, expected_shape


def test_the_tree_expands_a_referenced_object_and_marks_required_defaults_and_bounds() -> None:
    assert argument_tree(FORECAST_SCHEMA) == [
        "  location (object, required): A place: either a known city name or coordinates.",
        "    city (string|null): City name, e.g. 'Berlin'",
        "    latitude (number|null, -90..90)",
        "    longitude (number|null, -180..180)",
        "  days (integer, default 3, 1..7)",
        '  units ("metric" | "imperial", default "metric")',
    ]


def test_the_example_fills_required_arguments_and_gives_a_nested_object_its_hinted_field() -> None:
    assert example_arguments(FORECAST_SCHEMA) == {"location": {"city": "Berlin"}}


def test_the_example_uses_examples_enums_formats_and_placeholders() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "tz": {"type": "string", "description": "IANA name (e.g., 'America/New_York', 'Europe/London')"},
            "mode": {"enum": ["fast", "slow"]},
            "when": {"type": "string", "format": "date"},
            "tags": {"type": "array", "items": {"type": "string", "examples": ["urgent"]}},
            "count": {"type": "integer", "minimum": 2},
            "note": {"type": "string"},
            "optional": {"type": "boolean"},
        },
        "required": ["tz", "mode", "when", "tags", "count", "note"],
    }
    assert example_arguments(schema) == {
        "tz": "America/New_York",
        "mode": "fast",
        "when": "2026-01-31",
        "tags": ["urgent"],
        "count": 2,
        "note": "<note>",
    }


def test_a_tool_without_arguments_has_an_empty_tree_and_example() -> None:
    assert argument_tree({"type": "object", "properties": {}}) == []
    assert example_arguments({"type": "object"}) == {}


def test_a_string_where_an_object_is_expected_is_reported_at_its_path() -> None:
    assert argument_problems(FORECAST_SCHEMA, {"location": "Berlin", "days": 2}) == [
        "location: expected object, got string"
    ]


def test_missing_required_wrong_nested_types_and_bad_enums_are_each_reported() -> None:
    assert argument_problems(FORECAST_SCHEMA, {"days": "x"}) == [
        "location: required",
        "days: expected integer, got string",
    ]
    assert argument_problems(FORECAST_SCHEMA, {"location": {"city": 3}}) == [
        "location.city: expected string|null, got integer"
    ]
    assert argument_problems(FORECAST_SCHEMA, {"location": {}, "units": "kelvin"}) == [
        'units: expected one of "metric" | "imperial", got "kelvin"'
    ]


def test_arguments_that_fit_have_no_problems() -> None:
    assert argument_problems(FORECAST_SCHEMA, {"location": {"city": "Berlin"}, "days": 2}) == []
    assert argument_problems(FORECAST_SCHEMA, example_arguments(FORECAST_SCHEMA)) == []


def test_unknown_keys_are_reported_only_when_the_schema_forbids_them() -> None:
    closed = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}
    assert argument_problems(closed, {"b": 1}) == ["b: not an argument of this tool (arguments: a)"]
    assert argument_problems({**closed, "additionalProperties": True}, {"b": 1}) == []


def test_a_recursive_schema_neither_loops_nor_fails() -> None:
    node = {"type": "object", "properties": {"child": {"$ref": "#/$defs/Node"}}}
    schema = {"$defs": {"Node": node}, "type": "object", "properties": {"tree": {"$ref": "#/$defs/Node"}}}
    assert argument_tree(schema)[0] == "  tree (object)"
    assert len(argument_tree(schema)) == 7  # tree, then child six levels deep at most
    assert argument_problems(schema, {"tree": {"child": {"child": {}}}}) == []


def test_the_expected_shape_lists_the_problems_every_argument_and_an_example() -> None:
    problems = argument_problems(FORECAST_SCHEMA, {"days": 9})
    assert problems == ["location: required", "days: 9 is greater than the maximum of 7"]
    assert expected_shape("weather__get_forecast", FORECAST_SCHEMA, problems).splitlines() == [
        "The arguments do not fit what weather__get_forecast takes:",
        "  location: required",
        "  days: 9 is greater than the maximum of 7",
        "Expected arguments:",
        *argument_tree(FORECAST_SCHEMA),
        'Example arguments: {"location": {"city": "Berlin"}}',
    ]


def test_a_schema_that_is_not_json_schema_or_refers_elsewhere_checks_nothing() -> None:
    assert (
        argument_problems({"type": "object", "properties": {"a": {"type": "no-such-type"}}}, {"a": 1}) == []
    )
    remote = {"type": "object", "properties": {"a": {"$ref": "https://example.com/schema.json"}}}
    assert argument_problems(remote, {"a": 1}) == []
