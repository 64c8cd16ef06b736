"""The pool with servers of each MCP revision (fixtures on the pinned SDK), over stdio and HTTP.

A 2026-07-28-only server has no handshake and no ping; an older one refuses ``server/discover``;
a dual one speaks both. The pool must reach all of them at the newest revision both sides speak,
show it in ``ListServers``, take the server's ``ttlMs`` as its re-listing interval, and follow
its tool changes (a ``subscriptions/listen`` stream at 2026-07-28, ``list_changed`` before).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import pytest_asyncio

from mcp_pool_svc.pool import McpPool
from mcp_pool_svc.session import open_connection
from mcp_pool_svc.supervisor import ServerState
from tests.support.protocol_servers import PROTOCOL_SERVER, Era, running_protocol_http
from toolscout_kit.config import RemoteServerConfig, ToolscoutConfig, parse_config

pytestmark = pytest.mark.asyncio(loop_scope="module")

WAIT = 30.0
TTL_MS = 4321


def _stdio(era: Era, *flags: str) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(PROTOCOL_SERVER), "--era", era, *flags]}


@pytest.fixture(scope="module")
def http_urls() -> Iterator[dict[Era, str]]:
    ttl = ("--ttl-ms", str(TTL_MS))
    with (
        running_protocol_http("modern", *ttl) as modern,
        running_protocol_http("legacy") as legacy,
        running_protocol_http("dual", *ttl) as dual,
    ):
        yield {"modern": modern.url, "legacy": legacy.url, "dual": dual.url}


def _config(http_urls: dict[Era, str], base: Path) -> ToolscoutConfig:
    ttl = ("--ttl-ms", str(TTL_MS))
    servers: dict[str, Any] = {
        "modern-stdio": _stdio("modern", *ttl),
        "legacy-stdio": _stdio("legacy", "--versions", "2025-03-26,2025-06-18"),
        "dual-stdio": _stdio("dual", *ttl),
        # A 2026 server whose hint is 0 ("no hint"): the configured TTL applies.
        "nohint-stdio": _stdio("modern", "--ttl-ms", "0"),
        **{f"{era}-http": {"url": url, "transport": "streamable-http"} for era, url in http_urls.items()},
    }
    return parse_config({"servers": servers, "toolscout": {"pool": {"tool_cache_ttl": 45}}}, base_dir=base)


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def pool(http_urls: dict[Era, str], tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[McpPool]:
    pool = McpPool(_config(http_urls, tmp_path_factory.mktemp("revisions")))
    await pool.start(wait=WAIT)
    yield pool
    await pool.stop()


async def test_servers_of_every_revision_are_ready_at_the_newest_revision_both_speak(pool: McpPool) -> None:
    seen = {s.name: (s.state, s.protocol_version) for s in pool.list_servers()}
    assert seen == {
        "modern-stdio": (ServerState.READY, "2026-07-28"),
        "modern-http": (ServerState.READY, "2026-07-28"),
        "dual-stdio": (ServerState.READY, "2026-07-28"),
        "dual-http": (ServerState.READY, "2026-07-28"),
        "legacy-stdio": (ServerState.READY, "2025-06-18"),
        "legacy-http": (ServerState.READY, "2025-06-18"),
        "nohint-stdio": (ServerState.READY, "2026-07-28"),
    }


async def test_tools_of_a_2026_only_server_are_called_like_any_other(pool: McpPool) -> None:
    for server in ("modern-stdio", "modern-http", "legacy-http"):
        result = await pool.call_tool(server=server, tool="echo", arguments={"text": f"hi {server}"})
        assert not result.is_error
        assert result.content[0].text == f"hi {server}"
    assert pool.catalog.resolve("modern-http__add") is not None


async def test_the_servers_ttl_hint_replaces_the_configured_cache_ttl(pool: McpPool) -> None:
    ttl = {s.name: s.tool_cache_ttl_seconds for s in pool.list_servers()}
    assert ttl["modern-stdio"] == ttl["modern-http"] == ttl["dual-http"] == TTL_MS / 1000
    # No hint (older revision) or a hint of 0: the configured TTL.
    assert ttl["legacy-stdio"] == ttl["legacy-http"] == ttl["nohint-stdio"] == 45


async def test_a_2026_server_offering_change_events_is_followed_on_a_listen_stream(pool: McpPool) -> None:
    statuses = {s.name: s for s in pool.list_servers()}
    assert statuses["modern-stdio"].change_notifications
    assert statuses["modern-http"].change_notifications
    assert statuses["legacy-http"].change_notifications  # list_changed on the handshake-era session


@pytest.mark.parametrize("server", ["modern-stdio", "modern-http", "legacy-stdio"])
async def test_a_tool_added_by_the_server_reaches_the_catalog_without_waiting_for_the_ttl(
    pool: McpPool, server: str
) -> None:
    name = f"added_{server.replace('-', '_')}"
    await pool.call_tool(server=server, tool="add_tool", arguments={"name": name})
    await pool.wait_until(lambda: pool.catalog.lookup(server, name) is not None, WAIT)


async def test_a_2026_session_is_health_checked_without_ping(
    http_urls: dict[Era, str], tmp_path: Path
) -> None:
    config = RemoteServerConfig(url=http_urls["modern"], transport="streamable-http")
    events: list[str] = []
    with anyio.fail_after(WAIT):
        async with open_connection(
            config,
            lambda event, _detail: events.append(event),
            base_dir=tmp_path,
            on_stderr=lambda _line: None,
            max_line_bytes=1 << 20,
        ) as conn:
            assert conn.protocol_version == "2026-07-28"
            await conn.ping()  # a server/discover probe: a 2026 server has no ping method
    assert "stream_error" not in events
