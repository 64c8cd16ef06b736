"""Input schemas as MCP SDKs generate them, for tests of schema reading (CLI and LLM text)."""

from __future__ import annotations

from typing import Any

__all__ = ["FORECAST_SCHEMA"]


# examples/servers/weather.py get_forecast, as pydantic writes it: the nested model under $defs,
# optional fields as anyOf [X, null] with a null default.
def _optional_number(low: int, high: int, title: str) -> dict[str, Any]:
    number = {"maximum": high, "minimum": low, "type": "number"}
    return {"anyOf": [number, {"type": "null"}], "default": None, "title": title}


FORECAST_SCHEMA: dict[str, Any] = {
    "$defs": {
        "Location": {
            "description": "A place: either a known city name or coordinates.",
            "properties": {
                "city": {
                    "anyOf": [{"type": "string"}, {"type": "null"}],
                    "default": None,
                    "description": "City name, e.g. 'Berlin'",
                    "title": "City",
                },
                "latitude": _optional_number(-90, 90, "Latitude"),
                "longitude": _optional_number(-180, 180, "Longitude"),
            },
            "title": "Location",
            "type": "object",
        }
    },
    "properties": {
        "location": {"$ref": "#/$defs/Location"},
        "days": {"default": 3, "maximum": 7, "minimum": 1, "title": "Days", "type": "integer"},
        "units": {"default": "metric", "enum": ["metric", "imperial"], "title": "Units", "type": "string"},
    },
    "required": ["location"],
    "title": "get_forecastArguments",
    "type": "object",
}
