"""A tool list change reaches the catalog at once, at every MCP revision the pool speaks (issue 19, item 5).

The servers are real SDK servers written on the high-level ``MCPServer`` (the protocol fixture with
``--api mcpserver``), each restricted to one revision, announcing a change either the handshake-era
way (``ctx.session.send_tool_list_changed()``, what existing servers do) or the 2026-07-28 way
(``ctx.notify_tools_changed()`` on a ``subscriptions/listen`` stream). The catalog's TTL is an
hour and the servers' ``ttlMs`` as long, so only the change itself can bring a new tool in: a
tool that shows up within the bounded wait came without the TTL.

SDK 2.3.0 drops a session notice at 2026-07-28 (there, change notices ride listen streams only), so
a server announcing the old way is never heard by a 2026 client: the pool re-lists a server's tools
after each call of a tool that is not read-only, which is how such changes happen.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest
import pytest_asyncio
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from mcp_pool_svc.pool import McpPool
from mcp_pool_svc.session import open_connection
from tests.support.protocol_servers import PROTOCOL_SERVER, running_protocol_http
from toolscout_kit.config import RemoteServerConfig, StdioServerConfig, parse_config

pytestmark = pytest.mark.asyncio(loop_scope="module")

WAIT = 20.0
HOUR_MS = "3600000"


def _flags(era: str, announce: str, version: str = "") -> list[str]:
    flags = ["--era", era, "--api", "mcpserver", "--announce", announce, "--ttl-ms", HOUR_MS]
    return [*flags, "--versions", version] if version else flags


# name -> (fixture flags, transport, the revision the pool must settle on)
CASES: dict[str, tuple[list[str], str, str]] = {
    "modern-bus": (_flags("modern", "bus"), "stdio", "2026-07-28"),
    "modern-session": (_flags("modern", "session"), "stdio", "2026-07-28"),
    "dual-session": (_flags("dual", "session"), "stdio", "2026-07-28"),
    **{f"legacy-{v}": (_flags("legacy", "session", v), "stdio", v) for v in HANDSHAKE_PROTOCOL_VERSIONS},
    "http-modern-bus": (_flags("modern", "bus"), "http", "2026-07-28"),
    "http-dual-session": (_flags("dual", "session"), "http", "2026-07-28"),
    "http-legacy-2025-06-18": (_flags("legacy", "session", "2025-06-18"), "http", "2025-06-18"),
}


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, Any]]:
    entries: dict[str, Any] = {}
    with ExitStack() as stack:
        for name, (flags, transport, _) in CASES.items():
            if transport == "stdio":
                entries[name] = {"command": sys.executable, "args": [str(PROTOCOL_SERVER), *flags]}
            else:
                http = stack.enter_context(running_protocol_http(flags[1], *flags[2:]))  # type: ignore[arg-type]
                entries[name] = {"url": http.url, "transport": "streamable-http"}
        yield entries


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def pool(servers: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[McpPool]:
    config = parse_config(
        {"servers": servers, "toolscout": {"pool": {"tool_cache_ttl": 3600}}},
        base_dir=tmp_path_factory.mktemp("list-changed"),
    )
    pool = McpPool(config)
    await pool.start(wait=WAIT)
    yield pool
    await pool.stop()


@pytest.mark.parametrize("server", list(CASES))
async def test_a_tool_added_by_an_sdk_server_reaches_the_catalog_without_the_ttl(
    pool: McpPool, server: str
) -> None:
    status = pool.server_status(server)
    assert (status.state.value, status.protocol_version) == ("ready", CASES[server][2])
    assert status.tool_cache_ttl_seconds == 3600
    name = f"added_{server.replace('-', '_').replace('.', '_')}"
    result = await pool.call_tool(server=server, tool="add_tool", arguments={"name": name})
    assert not result.is_error, result.content
    await pool.wait_until(lambda: pool.catalog.lookup(server, name) is not None, WAIT)


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_change_right_after_the_connection_opens_is_announced(tmp_path: Path, transport: str) -> None:
    """The connection is handed out once its listen stream is open: a change made at once is not
    published to a bus nobody listens to yet (and then seen only at the TTL)."""
    flags = _flags("modern", "bus")
    arrived = anyio.Event()

    def on_event(kind: str, _detail: str) -> None:
        if kind == "tools_changed":
            arrived.set()

    with ExitStack() as stack:
        config: StdioServerConfig | RemoteServerConfig
        if transport == "stdio":
            config = StdioServerConfig(command=sys.executable, args=[str(PROTOCOL_SERVER), *flags])
        else:
            http = stack.enter_context(running_protocol_http("modern", *flags[2:]))
            config = RemoteServerConfig(url=http.url, transport="streamable-http")
        with anyio.fail_after(WAIT):
            async with open_connection(
                config, on_event, base_dir=tmp_path, on_stderr=lambda _line: None, max_line_bytes=1 << 20
            ) as conn:
                assert conn.listening
                await conn.session.call_tool("add_tool", {"name": "at_once"})
                await arrived.wait()
