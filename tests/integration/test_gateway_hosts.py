"""What MCP hosts get from the gateway: their mode by name, descriptions within their limits,
change announcements on the meta endpoint, guidance in structured results, the manifest resource.

A real pool (the misbehaving fixture and the weather example over stdio), discovery and the
gateway on 127.0.0.1:0; the clients are the pinned ``mcp`` SDK's, announcing themselves as hosts.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
import pytest_asyncio
from mcp import Client
from mcp.client.session import IncomingMessage
from mcp.client.subscriptions import ToolsListChanged, listen

from mcp_gateway_svc.listing import DESCRIPTION_CAP_BYTES, MAX_RESULT_SIZE_META_KEY
from mcp_gateway_svc.resources import MANIFEST_URI
from tests.support.gateway import MODERN, GatewayStack, gateway_stack, start_gateway
from tests.support.mcp_servers import example_server_config, misbehaving_config
from toolscout_kit.config import ToolscoutConfig, parse_config

pytestmark = pytest.mark.asyncio(loop_scope="module")

WAIT = 30.0
MODES = ["legacy", MODERN]
CLIENT_MODES = {"claude-code": "all", "codex*": "meta", "slow-host": "progressive"}


def _config(tmp: Path) -> ToolscoutConfig:
    return parse_config(
        {
            "servers": {
                "weather": example_server_config(
                    "weather", defer_loading=True, max_result_size_chars=123_456
                ),
                "fixture": misbehaving_config(defer_loading=True),
            },
            "tool_discovery": {"enabled": True},
            "toolscout": {"gateway": {"mode": "meta", "modes_by_client": CLIENT_MODES}},
        },
        base_dir=tmp,
    )


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def gw(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[GatewayStack]:
    async with gateway_stack(_config(tmp_path_factory.mktemp("hosts"))) as running:
        yield running


def _host(name: str) -> types.Implementation:
    return types.Implementation(name=name, version="1.0")


def _text(result: types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("host", "expected"),
    [("claude-code", "all"), ("codex-mcp-client", "meta"), ("Some Other Host", "meta")],
)
async def test_a_client_gets_the_mode_its_name_picks_else_the_endpoints(
    gw: GatewayStack, mode: str, host: str, expected: str
) -> None:
    with anyio.fail_after(WAIT):
        async with Client(gw.url, mode=mode, client_info=_host(host)) as client:
            names = [t.name for t in (await client.list_tools()).tools]
    if expected == "all":
        assert "weather__get_forecast" in names
        assert "search_tools" not in names
    else:
        assert names == ["search_tools", "call_tool", "read_result"]


async def test_a_session_keeps_the_progressive_mode_its_name_picked(gw: GatewayStack) -> None:
    with anyio.fail_after(WAIT):
        async with Client(gw.url, mode="legacy", client_info=_host("slow-host")) as client:
            first = [t.name for t in (await client.list_tools()).tools]
            await client.call_tool("search_tools", {"query": "weather forecast"})
            after = [t.name for t in (await client.list_tools()).tools]
    assert first == ["search_tools", "call_tool"]
    assert after[:2] == ["search_tools", "call_tool"]
    assert "weather__get_forecast" in after[2:]


@pytest.mark.parametrize("host", ["claude-code", "codex-mcp-client"])
async def test_every_served_description_fits_2kb_and_carries_the_servers_result_size(
    gw: GatewayStack, host: str
) -> None:
    with anyio.fail_after(WAIT):
        async with Client(gw.url, mode="legacy", client_info=_host(host)) as client:
            tools = (await client.list_tools()).tools
            capabilities = client.server_capabilities
            instructions = client.instructions
    assert len((instructions or "").encode()) <= DESCRIPTION_CAP_BYTES
    assert capabilities.tools is not None
    assert capabilities.tools.list_changed
    for tool in tools:
        assert len((tool.description or "").encode()) <= DESCRIPTION_CAP_BYTES, tool.name
        assert MAX_RESULT_SIZE_META_KEY in (tool.meta or {}), tool.name
    by_name = {t.name: t for t in tools}
    if host == "claude-code":
        forecast = by_name["weather__get_forecast"]
        assert (forecast.meta or {})[MAX_RESULT_SIZE_META_KEY] == 123_456
        # Search-ready: the server and the parameters' names are in the text a host's search reads.
        assert "get_forecast (get forecast) in weather" in (forecast.description or "")
        assert "Parameters: " in (forecast.description or "")
        assert by_name["fixture__echo"].meta == {MAX_RESULT_SIZE_META_KEY: 500_000}
    else:
        # The gateway's own tools relay any server's result: the largest setting.
        assert by_name["call_tool"].meta == {MAX_RESULT_SIZE_META_KEY: 500_000}
        assert "<manifest>" in (by_name["search_tools"].description or "")


@pytest.mark.parametrize("mode", MODES)
async def test_search_tools_guidance_and_the_manifest_come_as_data_too(gw: GatewayStack, mode: str) -> None:
    with anyio.fail_after(WAIT):
        async with Client(gw.url, mode=mode) as client:
            missed = await client.call_tool("search_tools", {"query": "book a flight to Paris"})
            found = await client.call_tool("search_tools", {"query": "weather forecast"})
            browsed = await client.call_tool("search_tools", {})
            resources = (await client.list_resources()).resources
            read = await client.read_resource(MANIFEST_URI)
    assert missed.structured_content is not None
    assert missed.structured_content["tools"] == []
    assert missed.structured_content["guidance"].startswith(
        "No tools found matching 'book a flight to Paris'"
    )
    assert found.structured_content is not None
    assert "call_tool" in found.structured_content["guidance"]
    assert browsed.structured_content is not None
    manifest = _text(browsed)
    assert "- weather (" in manifest
    assert "- fixture (" in manifest
    assert browsed.structured_content["guidance"] == manifest
    assert [r.uri for r in resources] == [MANIFEST_URI]
    contents = read.contents[0]
    assert isinstance(contents, types.TextResourceContents)
    assert contents.text in manifest


async def test_a_legacy_meta_session_and_a_2026_listener_hear_of_a_catalog_change(tmp_path: Path) -> None:
    config = parse_config(
        {
            "servers": {"fixture": misbehaving_config(defer_loading=True)},
            "tool_discovery": {"enabled": True},
        },
        base_dir=tmp_path,
    )
    changed = anyio.Event()

    async def handler(message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with gateway_stack(config) as gw:
        with anyio.fail_after(WAIT):
            async with (
                Client(gw.url, mode="legacy", message_handler=handler) as legacy,
                Client(gw.url, mode=MODERN) as modern,
            ):
                assert legacy.server_capabilities.tools is not None
                assert legacy.server_capabilities.tools.list_changed
                await legacy.list_tools()
                async with listen(modern.session, tools_list_changed=True) as subscription:
                    # The MCP server adds a tool; the pool re-lists, discovery plans a new version.
                    added = await legacy.call_tool(
                        "call_tool", {"name": "fixture__add_tool", "arguments": {}}
                    )
                    assert not added.is_error, _text(added)
                    await changed.wait()
                    event: Any = await subscription.__anext__()
    assert event == ToolsListChanged()


async def test_a_toolset_over_the_all_mode_limit_serves_a_client_that_asked_for_all_its_endpoints_mode(
    gw: GatewayStack, tmp_path: Path
) -> None:
    config = parse_config(
        {
            "servers": {
                "weather": example_server_config("weather", defer_loading=True),
                "fixture": misbehaving_config(defer_loading=True),
            },
            "tool_discovery": {"enabled": True},
            "toolscout": {"gateway": {"modes_by_client": CLIENT_MODES, "client_all_max_tools": 1}},
        },
        base_dir=tmp_path,
    )
    gateway = await start_gateway(config, gw.stack)
    try:
        with anyio.fail_after(WAIT):
            async with Client(gateway.url, mode="legacy", client_info=_host("claude-code")) as client:
                await client.list_tools()  # the endpoint's first plan: its size is known from here on
            async with Client(gateway.url, mode="legacy", client_info=_host("claude-code")) as client:
                names = [t.name for t in (await client.list_tools()).tools]
    finally:
        await gateway.stop(0)
    assert names == ["search_tools", "call_tool", "read_result"]
