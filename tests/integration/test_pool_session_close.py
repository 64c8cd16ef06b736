"""A pooled streamable-HTTP session is ended at the server when the pool stops (its DELETE), so the
server need not keep it until its own timeout; a server that never answers the DELETE does not
hold up the stop. The MCP server is ``tests/fixtures/relay/server.py`` over streamable HTTP,
logging each DELETE it gets.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import structlog

from mcp_pool_svc.pool import McpPool
from mcp_pool_svc.supervisor import ServerState
from tests.support.mcp_servers import running_relay_http, wait_for_lines
from toolscout_kit.config import parse_config

WAIT = 30.0


def _relay(tmp: Path, *flags: str) -> Any:
    return running_relay_http(tmp / "record.txt", "--delete-log", str(tmp / "deletes.txt"), *flags)


async def _ready_pool(url: str) -> McpPool:
    config = parse_config({"servers": {"relay": {"url": url, "transport": "streamable-http"}}})
    pool = McpPool(config)
    await pool.start(wait=WAIT)
    await pool.wait_until(lambda: pool.server_status("relay").state is ServerState.READY, WAIT)
    return pool


async def test_a_pool_stop_ends_its_session_at_the_server(tmp_path: Path) -> None:
    with _relay(tmp_path) as server:
        pool = await _ready_pool(server.url)
        with structlog.testing.capture_logs() as logs:
            await pool.stop()
        assert await wait_for_lines(tmp_path / "deletes.txt", 1, within=WAIT) == ["deleted"]
    assert not [entry for entry in logs if entry["event"].startswith("mcp_servers_stop")]


async def test_a_server_that_never_answers_the_delete_does_not_hold_up_the_stop(tmp_path: Path) -> None:
    with _relay(tmp_path, "--hang-deletes") as server:
        pool = await _ready_pool(server.url)
        with structlog.testing.capture_logs() as logs:
            await pool.stop()
        # The DELETE was sent, and the close was cut short well within the supervisors' stop
        # timeout: the pool did not have to cancel a slow server's supervisor.
        assert await wait_for_lines(tmp_path / "deletes.txt", 1, within=WAIT) == ["deleted"]
    assert not [entry for entry in logs if entry["event"].startswith("mcp_servers_stop")]
