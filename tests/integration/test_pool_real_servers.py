"""Our example MCP servers and mcp-server-time (PyPI), each a real stdio subprocess of one pool."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from mcp_pool_svc.naming import NAME_PATTERN
from mcp_pool_svc.pool import McpPool
from mcp_pool_svc.supervisor import ServerState
from tests.support.mcp_servers import (
    example_server_config,
    live_descendants,
    time_server_config,
    wait_until_gone,
)
from toolscout_kit.config import parse_config

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def pool(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[McpPool]:
    base = tmp_path_factory.mktemp("real")
    servers = {name: example_server_config(name) for name in ("notes", "weather", "text", "media")}
    servers["notes"]["env"] = {"NOTES_FILE": str(base / "notes.json")}
    servers["time"] = time_server_config()
    before = live_descendants()
    pool = McpPool(parse_config({"servers": servers}, base_dir=base))
    await pool.start(wait=60)
    yield pool
    await pool.stop()
    assert await wait_until_gone(live_descendants() - before) == set()


async def test_every_server_starts_in_parallel_and_is_ready(pool: McpPool) -> None:
    states = {s.name: (s.state, s.server_info) for s in pool.list_servers()}
    assert {name: state for name, (state, _) in states.items()} == dict.fromkeys(
        ["media", "notes", "text", "time", "weather"], ServerState.READY
    )
    assert states["weather"][1] == "weather 1.0.0"


async def test_the_catalog_has_every_tool_with_valid_unique_llm_names(pool: McpPool) -> None:
    tools = pool.list_tools().tools
    names = [t.llm_name for t in tools]
    assert len(names) == len(set(names))
    assert all(NAME_PATTERN.match(n) for n in names)
    assert {"time__get_current_time", "time__convert_time", "weather__get_forecast", "text__reverse"} <= set(
        names
    )
    reverse = next(t for t in tools if t.llm_name == "text__reverse")
    assert reverse.description == ""
    forecast = next(t for t in tools if t.llm_name == "weather__get_current_weather")
    schema = json.loads(forecast.input_schema_json)
    assert "Location" in schema["$defs"]
    assert json.loads(forecast.annotations_json) == {"readOnlyHint": True, "openWorldHint": False}
    assert forecast.title == "Current weather"


async def test_mcp_server_time_answers_over_stdio(pool: McpPool) -> None:
    result = await pool.call_tool(
        llm_name="time__convert_time",
        arguments={"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
    )
    assert not result.is_error
    assert json.loads(result.structured_content_json)["target"]["datetime"].endswith("21:00:00+09:00")


async def test_structured_content_and_text_come_back_together(pool: McpPool) -> None:
    result = await pool.call_tool(
        server="weather", tool="get_current_weather", arguments={"location": {"city": "Tokyo"}}
    )
    structured = json.loads(result.structured_content_json)
    assert structured["city"] == "Tokyo"
    assert json.loads(result.content[0].text) == structured


async def test_images_audio_and_resources_keep_their_payloads(pool: McpPool) -> None:
    chart = await pool.call_tool(server="media", tool="bar_chart", arguments={"values": [1, 3, 2]})
    assert [c.type for c in chart.content] == ["text", "image"]
    assert chart.content[1].data.startswith(b"\x89PNG\r\n\x1a\n")
    assert chart.content[1].mime_type == "image/png"
    tone = await pool.call_tool(server="media", tool="tone", arguments={"milliseconds": 50})
    assert tone.content[0].type == "audio"
    assert tone.content[0].data.startswith(b"RIFF")
    palette = await pool.call_tool(server="media", tool="palette")
    assert [c.type for c in palette.content] == ["resource", "resource_link"]
    assert "--primary" in palette.content[0].text
    assert palette.content[1].uri == "palette://default.css"


async def test_a_tool_error_from_an_example_server_keeps_its_message(pool: McpPool) -> None:
    result = await pool.call_tool(server="weather", tool="get_alerts", arguments={"city": "Atlantis"})
    assert result.is_error
    assert "unknown city 'Atlantis'" in result.content[0].text


async def test_stateful_tools_keep_state_on_the_persistent_session(pool: McpPool, tmp_path: Path) -> None:
    await pool.call_tool(
        server="notes", tool="add_note", arguments={"title": "pool", "body": "persistent sessions"}
    )
    found = await pool.call_tool(server="notes", tool="search_notes", arguments={"query": "persistent"})
    assert json.loads(found.structured_content_json)["result"][0]["title"] == "pool"
