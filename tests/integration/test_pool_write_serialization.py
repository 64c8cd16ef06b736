"""The cost of the safe write default made visible (issue 19, item 7).

``serialize_writes`` (on by default) runs calls to a server's tools not annotated ``readOnlyHint``
one at a time. ListServers says which servers that affects and why, the pool says so once per
server in its log with the way out, and the time calls spend waiting for the lock is a metric.
The misbehaving fixture has 10 tools: 4 annotated read-only, ``crash_once_idempotent`` annotated
but not read-only, and 5 with no annotations.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import structlog
from prometheus_client import CollectorRegistry
from toolscout import client as tc

from mcp_pool_svc.errors import ToolCallTimeoutError, ToolOutcomeUnknownError
from mcp_pool_svc.metrics import PoolMetrics
from mcp_pool_svc.pool import McpPool
from mcp_pool_svc.server import build_server
from mcp_pool_svc.supervisor import ServerState
from tests.support.mcp_servers import misbehaving_config, wait_for_lines
from toolscout_kit.config import ToolscoutConfig, parse_config

WAIT = 30.0


def _config(tmp_path: Path) -> ToolscoutConfig:
    return parse_config(
        {
            "servers": {
                "serial": misbehaving_config("--call-log", str(tmp_path / "serial.calls")),
                "free": misbehaving_config(serialize_writes=False),
            }
        },
        base_dir=tmp_path,
    )


async def test_list_servers_says_which_servers_serialize_writes_and_why(tmp_path: Path) -> None:
    config = parse_config(
        {"servers": {"serial": misbehaving_config(), "free": misbehaving_config(serialize_writes=False)}},
        base_dir=tmp_path,
    )
    server = await build_server(config, listen="127.0.0.1:0", metrics_port=-1)
    try:
        async with tc.AsyncPoolClient.connect(server.address) as pool:
            listed = {s.name: s for s in await pool.list_servers()}
    finally:
        await server.stop(0.5)
    serial, free = listed["serial"], listed["free"]
    assert (serial.serialize_writes, serial.serialized_tools, serial.unannotated_tools) == (True, 6, 5)
    assert (free.serialize_writes, free.serialized_tools, free.unannotated_tools) == (False, 0, 5)


async def test_the_pool_says_once_per_server_that_its_writes_are_serialized_and_how_to_opt_out(
    tmp_path: Path,
) -> None:
    config = parse_config(
        {"servers": {"serial": misbehaving_config(), "free": misbehaving_config(serialize_writes=False)}},
        base_dir=tmp_path,
    )
    pool = McpPool(config)
    with structlog.testing.capture_logs() as logs:
        await pool.start(wait=WAIT)
        # A restart is not a start: the server says nothing new.
        with pytest.raises(ToolOutcomeUnknownError):
            await pool.call_tool(
                server="serial", tool="crash_once", arguments={"marker": str(tmp_path / "m")}
            )
        await pool.wait_until(
            lambda: (
                pool.server_status("serial").restarts == 1
                and pool.server_status("serial").state is ServerState.READY
            ),
            WAIT,
        )
        await pool.stop()
    said = [e for e in logs if e["event"] == "mcp_server_writes_serialized"]
    assert [e["server"] for e in said] == ["serial"]
    assert (said[0]["serialized_tools"], said[0]["unannotated_tools"]) == (6, 5)
    assert "add_tool" in said[0]["tools"]
    assert "echo" not in said[0]["tools"]
    assert said[0]["opt_out"].startswith("servers.serial.serialize_writes: false")


async def test_the_time_writes_wait_for_the_lock_is_measured_per_server(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    calls = tmp_path / "serial.calls"
    pool = McpPool(_config(tmp_path), metrics=PoolMetrics(registry))
    await pool.start(wait=WAIT)

    def waits(server: str) -> float:
        value = registry.get_sample_value("toolscout_pool_write_lock_wait_seconds_count", {"server": server})
        return value or 0.0

    try:
        # A write that holds the lock until its timeout, and one queued behind it.
        first = asyncio.ensure_future(pool.call_tool(server="serial", tool="hang", timeout_seconds=1))
        assert await wait_for_lines(calls, 1) == ["hang"]
        marker = tmp_path / "exists"
        marker.touch()
        second = await pool.call_tool(server="serial", tool="crash_once", arguments={"marker": str(marker)})
        assert second.content[0].text == "survived"
        # Reads never take the lock; neither do writes of a server with serialize_writes off.
        await pool.call_tool(server="serial", tool="echo", arguments={"text": "x"})
        await pool.call_tool(server="free", tool="add_tool")
        with pytest.raises(ToolCallTimeoutError):
            await first
    finally:
        await pool.stop()
    assert (waits("serial"), waits("free")) == (2.0, 0.0)
