"""The MCP front door through the pinned ``mcp`` SDK's own client, both protocol revisions.

A real pool (our example servers and the misbehaving fixture over stdio) and discovery on
127.0.0.1:0, the gateway in front; the client is ``mcp.Client`` (``mode="legacy"``: the initialize
handshake, a session; ``mode="2026-07-28"``: the stateless revision).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
import pytest_asyncio
from mcp import Client
from mcp.client.session import IncomingMessage
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from tests.support.gateway import MODERN, GatewayStack, gateway_stack, post
from tests.support.mcp_servers import example_server_config, misbehaving_config, wait_for_lines
from toolscout_kit.call_tool import not_loaded_error
from toolscout_kit.config import ToolscoutConfig, parse_config

pytestmark = pytest.mark.asyncio(loop_scope="module")

MODES = ["legacy", MODERN]
WAIT = 30.0


def _config(tmp: Path, **gateway: Any) -> ToolscoutConfig:
    return parse_config(
        {
            "servers": {
                "text": example_server_config("text"),
                "weather": example_server_config("weather", defer_loading=True),
                "notes": example_server_config(
                    "notes", defer_loading=True, env={"NOTES_FILE": str(tmp / "n.json")}
                ),
                "fixture": misbehaving_config(
                    "--call-log", str(tmp / "calls"), "--cancel-log", str(tmp / "cancels"), defer_loading=True
                ),
            },
            "tool_discovery": {"enabled": True},
            "tool_sets": {
                "wx": {"servers": {"weather": True}},
                "small": {"servers": {"text": ["reverse", "slugify"], "weather": ["get_forecast"]}},
                "fx": {"servers": {"fixture": True}},
            },
            "toolscout": {
                "gateway": {"modes": {"wx": "progressive", "small": "all", "fx": "all"}, **gateway}
            },
        },
        base_dir=tmp,
    )


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def gw(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[GatewayStack]:
    tmp = tmp_path_factory.mktemp("gateway")
    async with gateway_stack(_config(tmp)) as running:
        running.tmp = tmp  # type: ignore[attr-defined]
        yield running


async def _calls(gw: GatewayStack) -> list[str]:
    return await wait_for_lines(gw.tmp / "calls", 0)  # type: ignore[attr-defined]


def _text(result: types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))


# --- meta mode ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_meta_lists_the_eager_tools_then_search_tools_with_the_manifest_and_call_tool(
    gw: GatewayStack, mode: str
) -> None:
    with anyio.fail_after(WAIT):
        async with Client(gw.url, mode=mode) as client:
            listed = (await client.list_tools()).tools
    names = [t.name for t in listed]
    assert names[-3:] == ["search_tools", "call_tool", "read_result"]
    assert set(names[:-3]) == {t for t in names if t.startswith("text__")}  # text is the eager server
    search, call = listed[-3], listed[-2]
    assert "<manifest>" in (search.description or "")
    assert "- weather (" in (search.description or "")
    assert "call_tool" in (search.description or "")
    assert set(search.input_schema["properties"]) >= {"query", "server_name", "tool_names"}
    assert call.input_schema["required"] == ["name"]
    assert set(call.input_schema["properties"]) == {"name", "arguments"}


@pytest.mark.parametrize("modern", [False, True])
async def test_meta_tools_list_is_byte_identical_across_a_three_search_session(
    gw: GatewayStack, modern: bool
) -> None:
    # Meta mode is stateless in both revisions: no handshake, no session.
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    first = await post(gw.url, request, modern=modern)
    assert first.status_code == 200, first.text
    lists = [first.content]
    for query in ("forecast", "notes", "slug"):
        search = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "search_tools", "arguments": {"query": query}},
        }
        answer = await post(gw.url, search, modern=modern)
        assert answer.status_code == 200
        assert "Found" in answer.text
        lists.append((await post(gw.url, request, modern=modern)).content)
    assert lists[0] == lists[1] == lists[2] == lists[3]
    assert b"call_tool" in lists[0]


@pytest.mark.parametrize("mode", MODES)
async def test_search_tools_answers_with_the_prd_text_and_each_found_tools_schema_as_text_and_data(
    gw: GatewayStack, mode: str
) -> None:
    async with Client(gw.url, mode=mode) as client:
        result = await client.call_tool("search_tools", {"query": "weather forecast for a city"})
    text = _text(result)
    assert not result.is_error
    assert text.startswith("Found ")
    assert "- weather__get_forecast (server: weather, tool: get_forecast)" in text
    assert 'Input schema: {"' in text
    assert 'Call them with call_tool, e.g. {"name": "' in text
    found = {t["name"]: t for t in result.structured_content["tools"]}
    assert "weather__get_forecast" in found
    assert found["weather__get_forecast"]["inputSchema"]["required"] == ["location"]
    assert result.structured_content["notFound"] == []


@pytest.mark.parametrize("mode", MODES)
async def test_call_tool_runs_a_found_tool_and_returns_its_result_unchanged(
    gw: GatewayStack, mode: str
) -> None:
    async with Client(gw.url, mode=mode) as client:
        echoed = await client.call_tool("call_tool", {"name": "fixture__echo", "arguments": {"text": "hi"}})
        failed = await client.call_tool(
            "call_tool", {"name": "fixture__fail", "arguments": {"message": "nope"}}
        )
    assert not echoed.is_error
    assert _text(echoed) == "hi"
    assert echoed.structured_content == {"text": "hi"}
    # A tool's own failure is data: isError with the server's own words.
    assert failed.is_error
    assert "nope" in _text(failed)


@pytest.mark.parametrize("mode", MODES)
async def test_arguments_that_do_not_fit_the_schema_get_the_expected_shape_and_never_reach_the_pool(
    gw: GatewayStack, mode: str
) -> None:
    before = await _calls(gw)
    async with Client(gw.url, mode=mode) as client:
        result = await client.call_tool(
            "call_tool", {"name": "weather__get_forecast", "arguments": {"location": "Berlin", "days": "x"}}
        )
        wrong = await client.call_tool("call_tool", {"name": "fixture__echo", "arguments": {"txt": "hi"}})
    assert result.is_error
    text = _text(result)
    assert text.startswith("Error: The arguments do not fit what weather__get_forecast takes:")
    assert "  location: expected object, got string" in text
    assert "  days: expected integer, got string" in text
    assert "    city (string|null): City name, e.g. 'Berlin'" in text
    assert 'Example arguments: {"location": {"city": "Berlin"}}' in text
    assert wrong.is_error
    assert "txt: not an argument of this tool (arguments: text)" in _text(wrong)
    assert await _calls(gw) == before


@pytest.mark.parametrize("mode", MODES)
async def test_an_unknown_tool_is_answered_with_the_closest_names(gw: GatewayStack, mode: str) -> None:
    async with Client(gw.url, mode=mode) as client:
        through = await client.call_tool("call_tool", {"name": "weather__get_forcast", "arguments": {}})
        direct = await client.call_tool("text__revrse", {"text": "x"})
    assert through.is_error
    assert "Unknown tool 'weather__get_forcast' (closest: weather__get_forecast" in _text(through)
    assert direct.is_error
    assert "Unknown tool 'text__revrse' (closest: text__reverse" in _text(direct)


async def test_call_tool_with_malformed_own_arguments_says_what_it_takes(gw: GatewayStack) -> None:
    async with Client(gw.url, mode="legacy") as client:
        no_name = await client.call_tool("call_tool", {"arguments": {}})
        bad_args = await client.call_tool("call_tool", {"name": "text__reverse", "arguments": "text"})
    assert no_name.is_error
    assert "call_tool takes {" in _text(no_name)
    assert bad_args.is_error
    assert "'arguments' must be an object" in _text(bad_args)


# --- progressive and all -------------------------------------------------------------------


async def test_a_progressive_search_loads_tools_announces_list_changed_and_they_are_callable_by_name(
    gw: GatewayStack,
) -> None:
    changed = anyio.Event()

    async def handler(message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    with anyio.fail_after(WAIT):
        async with Client(gw.gateway.toolset_url("wx"), mode="legacy", message_handler=handler) as client:
            first = [t.name for t in (await client.list_tools()).tools]
            # Not found by a search yet: refused as the orchestrator refuses it.
            early = await client.call_tool("weather__get_forecast", {"location": {"city": "Oslo"}})
            searched = await client.call_tool("search_tools", {"query": "forecast"})
            await changed.wait()
            after = [t.name for t in (await client.list_tools()).tools]
            called = await client.call_tool(
                "weather__get_forecast", {"location": {"city": "Tokyo"}, "days": 1}
            )
        async with Client(gw.gateway.toolset_url("wx"), mode="legacy") as other:
            # Another session has loaded nothing.
            fresh = [t.name for t in (await other.list_tools()).tools]
    # call_tool stays: a found tool is callable where a host never refreshes its list.
    assert first == ["search_tools", "call_tool"]
    assert early.is_error
    assert _text(early) == not_loaded_error("weather__get_forecast")
    assert "These tools are now loaded and available to call." in _text(searched)
    assert after == ["search_tools", "call_tool", "weather__get_forecast"]
    assert not called.is_error
    assert _text(called).startswith("Tokyo forecast")
    assert fresh == ["search_tools", "call_tool"]


async def test_a_2026_client_on_a_progressive_endpoint_gets_the_stateless_meta_surface(
    gw: GatewayStack,
) -> None:
    async with Client(gw.gateway.toolset_url("wx"), mode=MODERN) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        called = await client.call_tool(
            "call_tool", {"name": "weather__get_forecast", "arguments": {"location": {"city": "Madrid"}}}
        )
    assert names == ["search_tools", "call_tool", "read_result"]
    assert _text(called).startswith("Madrid forecast")


@pytest.mark.parametrize("mode", MODES)
async def test_all_mode_lists_every_tool_of_the_toolset_and_calls_them_by_name(
    gw: GatewayStack, mode: str
) -> None:
    async with Client(gw.gateway.toolset_url("small"), mode=mode) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        result = await client.call_tool("text__reverse", {"text": "abc"})
        # A tool outside the toolset does not exist here.
        outside = await client.call_tool("text__count_words", {"text": "a b"})
    assert names == {"text__reverse", "text__slugify", "weather__get_forecast"}
    assert _text(result) == "cba"
    assert outside.is_error
    assert "Unknown tool 'text__count_words'" in _text(outside)


# --- the pool's semantics through the hop ---------------------------------------------------


async def test_cancelling_a_call_cancels_it_in_the_pool_and_the_mcp_server_is_told(gw: GatewayStack) -> None:
    cancels: Path = gw.tmp / "cancels"  # type: ignore[attr-defined]
    before = len(await wait_for_lines(cancels, 0))
    async with Client(gw.gateway.toolset_url("fx"), mode="legacy") as client:
        # The SDK client sends notifications/cancelled when its own timeout runs out.
        with pytest.raises(Exception, match=r"(?i)timed out|timeout"):
            await client.call_tool("fixture__sleep", {"seconds": 30}, read_timeout_seconds=0.5)
    after = await wait_for_lines(cancels, before + 1, within=WAIT)
    assert len(after) == before + 1
    outcome = gw.gateway.registry.get_sample_value(
        "toolscout_gateway_tool_calls_total", {"mode": "all", "outcome": "cancelled"}
    )
    assert outcome == 1.0


async def test_a_timeout_in_meta_becomes_the_pools_call_timeout(gw: GatewayStack) -> None:
    cancels: Path = gw.tmp / "cancels"  # type: ignore[attr-defined]
    before = len(await wait_for_lines(cancels, 0))
    async with Client(gw.url, mode=MODERN) as client:
        result = await client.call_tool(
            "call_tool",
            {"name": "fixture__sleep", "arguments": {"seconds": 30}},
            meta={"toolscout/timeoutSeconds": 0.5},
        )
    assert result.is_error
    assert "did not answer in time" in _text(result)
    assert len(await wait_for_lines(cancels, before + 1, within=WAIT)) == before + 1


async def test_a_sessions_plain_call_is_answered_in_one_json_body_and_one_asking_for_progress_on_its_stream(
    gw: GatewayStack,
) -> None:
    # The plain call takes the gateway's lean path (mcp_gateway_svc.lean), the other the SDK's.
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": LATEST_HANDSHAKE_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }
    opened = await post(gw.url, init)
    headers = {
        "mcp-session-id": opened.headers["mcp-session-id"],
        "mcp-protocol-version": LATEST_HANDSHAKE_VERSION,
    }
    await post(gw.url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    # (a notification is handled after its 202: a request answered first tells the gateway the
    # session's handshake for sure)
    await post(gw.url, {"jsonrpc": "2.0", "id": 9, "method": "tools/list"}, headers=headers)
    params = {"name": "call_tool", "arguments": {"name": "text__reverse", "arguments": {"text": "ab"}}}
    plain = await post(
        gw.url, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}, headers=headers
    )
    assert plain.headers["content-type"] == "application/json"
    assert plain.headers["mcp-session-id"] == headers["mcp-session-id"]
    answer = plain.json()
    assert (answer["jsonrpc"], answer["id"]) == ("2.0", 1)
    assert answer["result"]["content"] == [{"type": "text", "text": "ba"}]
    assert answer["result"]["isError"] is False
    asking = {**params, "_meta": {"progressToken": "p"}}
    streamed = await post(
        gw.url, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": asking}, headers=headers
    )
    assert streamed.headers["content-type"].startswith("text/event-stream")
    assert '"text":"ba"' in streamed.text


# --- metrics --------------------------------------------------------------------------------


async def test_requests_searches_and_calls_are_counted_on_the_gateways_metrics(gw: GatewayStack) -> None:
    async with Client(gw.url, mode="legacy") as client:
        await client.call_tool("search_tools", {"query": "reverse text"})
        await client.call_tool("call_tool", {"name": "text__reverse", "arguments": {"text": "ab"}})
    value = gw.gateway.registry.get_sample_value
    assert (
        value("toolscout_gateway_requests_total", {"method": "tools/call", "mode": "meta", "outcome": "ok"})
        or 0
    ) >= 2
    assert (value("toolscout_gateway_search_duration_seconds_count", {"mode": "meta"}) or 0) >= 1
    assert (value("toolscout_gateway_tool_calls_total", {"mode": "meta", "outcome": "ok"}) or 0) >= 1


async def test_open_sessions_are_counted_and_a_deleted_session_is_forgotten(gw: GatewayStack) -> None:
    gauge = {"mode": "all"}
    value = gw.gateway.registry.get_sample_value
    async with Client(gw.gateway.toolset_url("small"), mode="legacy") as client:
        await client.list_tools()
        during = value("toolscout_gateway_open_sessions", gauge)
    after = value("toolscout_gateway_open_sessions", gauge)
    assert during is not None
    assert after is not None
    assert during == after + 1


def _json(answer: Any) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(answer.text)
    return body


async def test_clients_negotiating_their_revision_get_2026_on_meta_and_a_session_on_progressive(
    gw: GatewayStack,
) -> None:
    async with Client(gw.url) as meta, Client(gw.gateway.toolset_url("wx")) as progressive:
        revisions = (meta.protocol_version, progressive.protocol_version)
        discovered = await progressive.session.send_discover(MODERN)
    # A progressive endpoint answers server/discover naming only the handshake revisions, so a
    # client negotiating its revision opens a session, which holds what its searches load.
    assert revisions == (MODERN, "2025-11-25")
    assert MODERN not in discovered["supportedVersions"]
