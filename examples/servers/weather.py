"""Example MCP server "weather": current conditions, forecasts and alerts from canned data.

Deterministic (no network): the same city always gives the same figures, which makes it useful
for demos and tests. Run: ``python examples/servers/weather.py [stdio|sse|streamable-http]``.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from typing import Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

sys.path.insert(0, str(Path(__file__).parent))
from _run import run

server = MCPServer(
    "weather", instructions="Weather for a fixed list of cities (canned data).", version="1.0.0"
)

CITIES: dict[str, tuple[float, float, str]] = {
    "amsterdam": (52.37, 4.90, "Europe/Amsterdam"),
    "berlin": (52.52, 13.40, "Europe/Berlin"),
    "london": (51.51, -0.13, "Europe/London"),
    "madrid": (40.42, -3.70, "Europe/Madrid"),
    "new york": (40.71, -74.01, "America/New_York"),
    "san francisco": (37.77, -122.42, "America/Los_Angeles"),
    "sydney": (-33.87, 151.21, "Australia/Sydney"),
    "tokyo": (35.68, 139.69, "Asia/Tokyo"),
}
CONDITIONS = ["sunny", "partly cloudy", "cloudy", "light rain", "heavy rain", "snow", "fog", "windy"]
Units = Literal["metric", "imperial"]


class Location(BaseModel):
    """A place: either a known city name or coordinates."""

    city: str | None = Field(default=None, description="City name, e.g. 'Berlin'")
    latitude: float | None = Field(default=None, ge=-90, le=90)
    longitude: float | None = Field(default=None, ge=-180, le=180)


class Conditions(BaseModel):
    city: str
    condition: str
    temperature: float
    feels_like: float
    humidity_percent: int
    wind_speed: float
    units: Units


def _seed(*parts: object) -> int:
    return int(hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:8], 16)


def _city(location: Location) -> str:
    if location.city:
        name = location.city.strip().lower()
        if name not in CITIES:
            raise ToolError(f"unknown city {location.city!r}; known: {', '.join(sorted(CITIES))}")
        return name
    if location.latitude is None or location.longitude is None:
        raise ToolError("give a city or both latitude and longitude")
    lat, lon = location.latitude, location.longitude
    return min(CITIES, key=lambda c: (CITIES[c][0] - lat) ** 2 + (CITIES[c][1] - lon) ** 2)


def _conditions(city: str, day: int, units: Units) -> Conditions:
    s = _seed(city, day)
    celsius = (s % 35) - 5 + (CITIES[city][0] < 0) * 10
    temp = celsius if units == "metric" else celsius * 9 / 5 + 32
    wind = (s >> 8) % 40
    return Conditions(
        city=city.title(),
        condition=CONDITIONS[(s >> 4) % len(CONDITIONS)],
        temperature=round(temp, 1),
        feels_like=round(temp - wind / 10, 1),
        humidity_percent=30 + (s >> 12) % 65,
        wind_speed=float(wind if units == "metric" else round(wind * 0.621, 1)),
        units=units,
    )


@server.tool(title="Current weather", annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
def get_current_weather(location: Location, units: Units = "metric") -> Conditions:
    """Current conditions (temperature, humidity, wind) for a city or the nearest known city."""
    return _conditions(_city(location), 0, units)


@server.tool(title="Forecast", annotations=ToolAnnotations(read_only_hint=True))
def get_forecast(
    location: Location, days: int = Field(default=3, ge=1, le=7), units: Units = "metric"
) -> str:
    """Daily forecast for 1-7 days as readable text, one line per day."""
    city = _city(location)
    lines = []
    for day in range(1, days + 1):
        c = _conditions(city, day, units)
        unit = "°C" if units == "metric" else "°F"
        lines.append(f"day {day}: {c.condition}, {c.temperature}{unit}, wind {c.wind_speed}")
    return f"{city.title()} forecast\n" + "\n".join(lines)


@server.tool(title="Weather alerts", annotations=ToolAnnotations(read_only_hint=True))
def get_alerts(city: str) -> list[str]:
    """Active weather alerts for a city (often none)."""
    name = _city(Location(city=city))
    s = _seed(name, "alerts")
    return ["high wind warning until 18:00"] if s % 3 == 0 else []


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def list_cities() -> list[str]:
    return sorted(c.title() for c in CITIES)


if __name__ == "__main__":
    run(server)
