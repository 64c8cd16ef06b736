"""The LLM's search_tools text for tools whose parameters are objects: their fields are listed too."""

from __future__ import annotations

from typing import Any

from discovery_svc.catalog import ParsedTool
from discovery_svc.result_text import format_tool
from tests.support.schemas import FORECAST_SCHEMA


def _tool(schema: dict[str, Any], description: str = "Daily forecast.") -> ParsedTool:
    return ParsedTool.create(
        server="weather",
        name="get_forecast",
        llm_name="weather__get_forecast",
        description=description,
        input_schema=schema,
    )


def test_an_object_parameter_lists_its_fields_indented_below_it() -> None:
    assert format_tool(_tool(FORECAST_SCHEMA)) == (
        "- weather__get_forecast (server: weather, tool: get_forecast)\n"
        "  Daily forecast.\n"
        "  Parameters:\n"
        "    - location (object, required)\n"
        "      - city (string|null): City name, e.g. 'Berlin'\n"
        "      - latitude (number|null)\n"
        "      - longitude (number|null)\n"
        "    - days (integer)\n"
        "    - units (string)"
    )


def test_fields_of_array_items_and_inline_objects_are_listed_with_required_marked() -> None:
    schema = {
        "type": "object",
        "properties": {
            "stops": {
                "type": "array",
                "items": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            },
            "options": {"type": "object", "properties": {"fast": {"type": "boolean"}}},
        },
    }
    assert format_tool(_tool(schema)).splitlines()[3:] == [
        "    - stops (array of object)",
        "      - city (string, required)",
        "    - options (object)",
        "      - fast (boolean)",
    ]


def test_a_recursive_schema_stops_after_three_levels() -> None:
    node = {"type": "object", "properties": {"child": {"$ref": "#/$defs/Node"}, "label": {"type": "string"}}}
    schema = {"$defs": {"Node": node}, "type": "object", "properties": {"tree": {"$ref": "#/$defs/Node"}}}
    lines = format_tool(_tool(schema)).splitlines()[3:]
    assert lines[0] == "    - tree (object)"
    assert max(len(line) - len(line.lstrip()) for line in lines) == 4 + 2 * 3
    assert len(lines) == 7  # tree, then child + label on each of the three levels below it


def test_a_huge_nested_object_is_cut_with_a_count_of_what_is_left() -> None:
    fields = {f"f{i}": {"type": "string"} for i in range(60)}
    schema = {"type": "object", "properties": {"big": {"type": "object", "properties": fields}}}
    lines = format_tool(_tool(schema)).splitlines()
    assert lines[-1] == "      - ... and 20 more"
    assert len(lines) == 3 + 1 + 40 + 1
