"""Which MCP revisions the fixture servers accept and refuse, seen through the pinned SDK's own client.

Each server is a real process, over stdio and over streamable HTTP on 127.0.0.1. These tests pin the
facts the pool's session code will rely on: a 2026-07-28-only server has no handshake and no ping,
announces changes on ``subscriptions/listen`` and puts cache hints on ``tools/list``; an older server
refuses ``server/discover`` and answers ``initialize`` with its own revision.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any, Literal

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientSession, IncomingMessage
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError, ToolsListChanged, listen
from mcp.shared.exceptions import MCPError

from tests.support.protocol_servers import Era, protocol_stdio, running_protocol_http

Transport = Literal["stdio", "http"]
TRANSPORTS: list[Transport] = ["stdio", "http"]
TTL_MS = "1234"
WAIT = 15.0


@pytest.fixture(scope="module")
def http_urls() -> Iterator[dict[Era, str]]:
    """One HTTP server per era for the whole module (tools added by a test get unique names)."""
    with (
        running_protocol_http("modern", "--ttl-ms", TTL_MS) as modern,
        running_protocol_http("legacy") as legacy,
        running_protocol_http("dual") as dual,
    ):
        yield {"modern": modern.url, "legacy": legacy.url, "dual": dual.url}


@asynccontextmanager
async def raw_session(
    era: Era, transport: Transport, urls: dict[Era, str], handler: Any = None
) -> AsyncIterator[ClientSession]:
    """An entered, not yet negotiated ``ClientSession`` to the fixture for ``era``."""
    streams = (
        stdio_client(protocol_stdio(era, "--ttl-ms", TTL_MS))
        if transport == "stdio"
        else streamable_http_client(urls[era])
    )
    async with streams as (read, write), ClientSession(read, write, message_handler=handler) as session:
        yield session


def _client_target(era: Era, transport: Transport, urls: dict[Era, str]) -> Any:
    return protocol_stdio(era, "--ttl-ms", TTL_MS) if transport == "stdio" else urls[era]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_2026_only_server_refuses_initialize_naming_2026_07_28(
    transport: Transport, http_urls: dict[Era, str]
) -> None:
    async with raw_session("modern", transport, http_urls) as session:
        with anyio.fail_after(WAIT), pytest.raises(MCPError) as refused:
            await session.initialize()
    assert refused.value.code == types.UNSUPPORTED_PROTOCOL_VERSION
    assert refused.value.error.data["supported"] == ["2026-07-28"]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_2026_only_server_is_reached_with_discover_and_lists_tools_with_cache_hints(
    transport: Transport, http_urls: dict[Era, str]
) -> None:
    async with raw_session("modern", transport, http_urls) as session:
        with anyio.fail_after(WAIT):
            discovered = await session.discover()
            listed = await session.list_tools()
    assert session.protocol_version == "2026-07-28"
    assert discovered.supported_versions == ["2026-07-28"]
    assert session.server_capabilities is not None
    assert session.server_capabilities.tools is not None
    assert session.server_capabilities.tools.list_changed is True
    assert {"ttl_ms", "cache_scope"} <= listed.model_fields_set
    assert (listed.ttl_ms, listed.cache_scope) == (int(TTL_MS), "public")
    assert {t.name for t in listed.tools} >= {"echo", "add", "add_tool"}


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_2026_only_server_announces_a_tool_change_on_a_listen_stream(
    transport: Transport, http_urls: dict[Era, str]
) -> None:
    name = f"listened_{transport}"
    async with raw_session("modern", transport, http_urls) as session:
        with anyio.fail_after(WAIT):
            await session.discover()
            async with listen(session, tools_list_changed=True) as subscription:
                assert subscription.honored.tools_list_changed is True
                await session.call_tool("add_tool", {"name": name})
                event = await subscription.__anext__()
            listed = await session.list_tools()
    assert event == ToolsListChanged()
    assert name in {t.name for t in listed.tools}


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_2026_only_server_does_not_answer_ping(
    transport: Transport, http_urls: dict[Era, str]
) -> None:
    async with raw_session("modern", transport, http_urls) as session:
        with anyio.fail_after(WAIT):
            await session.discover()
            with pytest.raises(MCPError) as refused:
                await session.send_ping()
    assert refused.value.code == types.METHOD_NOT_FOUND


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_2025_06_18_server_answers_initialize_with_its_own_revision(
    transport: Transport, http_urls: dict[Era, str]
) -> None:
    async with raw_session("legacy", transport, http_urls) as session:
        with anyio.fail_after(WAIT):
            initialized = await session.initialize()
            listed = await session.list_tools()
            await session.send_ping()
    assert initialized.protocol_version == "2025-06-18"
    assert session.protocol_version == "2025-06-18"
    assert initialized.capabilities.tools is not None
    assert initialized.capabilities.tools.list_changed is True
    # No cache hints at this revision: the fields keep their defaults and were never set.
    assert not {"ttl_ms", "cache_scope"} & listed.model_fields_set


@pytest.mark.parametrize(
    ("transport", "code"),
    # Over stdio an older server does not know the method; over HTTP an older SDK rejects the
    # unknown MCP-Protocol-Version header with 400 before reading the method.
    [("stdio", types.METHOD_NOT_FOUND), ("http", types.INVALID_REQUEST)],
)
async def test_a_2025_06_18_server_refuses_discover(
    transport: Transport, code: int, http_urls: dict[Era, str]
) -> None:
    async with raw_session("legacy", transport, http_urls) as session:
        with anyio.fail_after(WAIT), pytest.raises(MCPError) as refused:
            await session.discover()
    assert refused.value.code == code


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_2025_06_18_server_announces_a_tool_change_with_list_changed(
    transport: Transport, http_urls: dict[Era, str]
) -> None:
    changed = anyio.Event()

    async def handler(message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    name = f"notified_{transport}"
    async with raw_session("legacy", transport, http_urls, handler) as session:
        with anyio.fail_after(WAIT):
            await session.initialize()
            await session.call_tool("add_tool", {"name": name})
            await changed.wait()
            listed = await session.list_tools()
    assert name in {t.name for t in listed.tools}


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_listen_on_a_handshake_era_session_is_refused_by_the_client(
    transport: Transport, http_urls: dict[Era, str]
) -> None:
    async with raw_session("legacy", transport, http_urls) as session:
        with anyio.fail_after(WAIT):
            await session.initialize()
            with pytest.raises(ListenNotSupportedError):
                async with listen(session, tools_list_changed=True):
                    pass


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize(
    ("era", "negotiated"), [("modern", "2026-07-28"), ("legacy", "2025-06-18"), ("dual", "2026-07-28")]
)
async def test_auto_negotiation_settles_on_the_newest_revision_both_sides_speak(
    era: Era, negotiated: str, transport: Transport, http_urls: dict[Era, str]
) -> None:
    with anyio.fail_after(WAIT):
        async with Client(_client_target(era, transport, http_urls)) as client:
            assert client.protocol_version == negotiated
            result = await client.call_tool("echo", {"text": "hi"})
    assert isinstance(result.content[0], types.TextContent)
    assert result.content[0].text == "hi"


async def test_a_legacy_server_offered_several_revisions_answers_with_the_requested_one() -> None:
    with anyio.fail_after(WAIT):
        async with Client(protocol_stdio("legacy", "--versions", "2025-03-26,2025-11-25")) as client:
            assert client.protocol_version == "2025-11-25"


async def test_on_stdio_a_refused_initialize_leaves_the_connection_in_the_handshake_era() -> None:
    # Why the pool must probe server/discover first: an SDK stdio server decides the era from the
    # first request, so after a refused initialize only a new process can speak 2026-07-28.
    async with raw_session("modern", "stdio", {}) as session:
        with anyio.fail_after(WAIT):
            with pytest.raises(MCPError):
                await session.initialize()
            with pytest.raises(MCPError) as refused:
                await session.discover()
    assert refused.value.code == types.INVALID_REQUEST
