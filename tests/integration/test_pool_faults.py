"""Each fault from a purpose-built misbehaving MCP server, next to a healthy one.

After every fault the pool still serves the healthy server, reports the sick one, and leaves no
process behind (the fixture's teardown counts our live descendants).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from mcp_pool_svc.errors import ServerUnavailableError, ToolCallTimeoutError, ToolOutcomeUnknownError
from mcp_pool_svc.pool import McpPool
from mcp_pool_svc.supervisor import ServerState
from tests.support.mcp_servers import live_descendants, misbehaving_config, wait_for_lines, wait_until_gone
from toolscout_kit.config import parse_config

PoolFactory = Callable[..., Any]


@pytest.fixture
async def make_pool() -> AsyncIterator[PoolFactory]:
    before = live_descendants()
    pools: list[McpPool] = []

    async def make(sick: dict[str, Any], *, wait: float | None = 15.0, **settings: Any) -> McpPool:
        config = parse_config(
            {
                "servers": {"healthy": misbehaving_config(), "sick": sick},
                "toolscout": {
                    "pool": {
                        "initial_backoff": 0.05,
                        "max_backoff": 0.1,
                        "crash_loop_restarts": 3,
                        "failed_retry_interval": 300,
                        "ping_interval": 5,
                        "blip_grace": 0.2,
                        **settings,
                    }
                },
            }
        )
        pool = McpPool(config)
        pools.append(pool)
        await pool.start(wait=wait)
        return pool

    yield make
    for pool in pools:
        await pool.stop()
    assert await wait_until_gone(live_descendants() - before) == set(), (
        "MCP server processes outlived the pool"
    )


async def assert_healthy_still_serves(pool: McpPool) -> None:
    assert pool.server_status("healthy").state is ServerState.READY
    result = await pool.call_tool(server="healthy", tool="echo", arguments={"text": "still here"})
    assert result.content[0].text == "still here"


def _pids(path: Path) -> list[int]:
    return [int(p) for p in path.read_text().split()]


async def test_a_server_that_crashes_mid_call_gives_an_unknown_outcome_then_is_restarted(
    make_pool: PoolFactory, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pids"
    pool = await make_pool(misbehaving_config("--pid-file", str(pid_file)))
    first_pid = _pids(pid_file)[0]
    errors: list[str] = []
    pool.add_listener(
        lambda name: errors.append(pool.server_status(name).last_error) if name == "sick" else None
    )
    with pytest.raises(ToolOutcomeUnknownError, match="may or may not have run"):
        await pool.call_tool(server="sick", tool="crash")
    await assert_healthy_still_serves(pool)
    await pool.wait_until(
        lambda: (
            pool.server_status("sick").restarts == 1 and pool.server_status("sick").state is ServerState.READY
        ),
        10,
    )
    assert any("connection was closed" in e and "exited with status 7" in e for e in errors), errors
    assert pool.server_status("sick").last_error == ""
    assert _pids(pid_file)[0] != first_pid
    assert await wait_until_gone([first_pid]) == set()
    result = await pool.call_tool(server="sick", tool="echo", arguments={"text": "back"})
    assert result.content[0].text == "back"


async def test_a_hanging_call_times_out_and_is_cancelled_while_the_server_stays_up(
    make_pool: PoolFactory, tmp_path: Path
) -> None:
    log = tmp_path / "cancelled"
    pool = await make_pool(misbehaving_config("--cancel-log", str(log)))
    with pytest.raises(ToolCallTimeoutError):
        await pool.call_tool(server="sick", tool="hang", timeout_seconds=0.3)
    await assert_healthy_still_serves(pool)
    # The cancel went out before the timeout error was raised; the fixture records it on receipt.
    await pool.call_tool(server="sick", tool="echo")
    assert len(log.read_text().splitlines()) == 1
    assert pool.server_status("sick").state is ServerState.READY


async def test_a_frozen_server_fails_its_ping_and_is_killed_and_restarted(
    make_pool: PoolFactory, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pids"
    pool = await make_pool(
        misbehaving_config("--pid-file", str(pid_file)), ping_interval=0.3, ping_timeout=0.3
    )
    first_pid = _pids(pid_file)[0]
    errors: list[str] = []
    pool.add_listener(
        lambda name: errors.append(pool.server_status(name).last_error) if name == "sick" else None
    )
    with pytest.raises(ToolCallTimeoutError):
        await pool.call_tool(server="sick", tool="freeze", timeout_seconds=0.2)
    await pool.wait_until(lambda: pool.server_status("sick").restarts >= 1, 10)
    assert any("no answer to ping" in e for e in errors), errors
    await assert_healthy_still_serves(pool)
    assert await wait_until_gone([first_pid]) == set()
    await pool.wait_until(lambda: pool.server_status("sick").state is ServerState.READY, 15)


async def test_a_server_that_exits_at_start_ends_failed_without_disturbing_the_others(
    make_pool: PoolFactory,
) -> None:
    pool = await make_pool(misbehaving_config("--exit-at-start"))
    await pool.wait_until(lambda: pool.server_status("sick").state is ServerState.FAILED, 10)
    status = pool.server_status("sick")
    assert status.restarts == 3
    assert "closed the connection while starting" in status.last_error
    assert status.tool_count == 0
    await assert_healthy_still_serves(pool)
    with pytest.raises(ServerUnavailableError):
        await pool.call_tool(server="sick", tool="echo")


async def test_a_server_writing_garbage_to_stdout_is_reported_and_never_served(
    make_pool: PoolFactory,
) -> None:
    pool = await make_pool(misbehaving_config("--garbage", connect_timeout=0.5))
    await pool.wait_until(lambda: pool.server_status("sick").restarts >= 1, 10)
    status = pool.server_status("sick")
    assert status.state is not ServerState.READY
    assert "no answer to initialize" in status.last_error
    assert "invalid message from the server" in status.last_error
    assert [t.server for t in pool.list_tools().tools] == ["healthy"] * 11
    await assert_healthy_still_serves(pool)


async def test_a_server_with_stray_lines_on_stdout_keeps_working(make_pool: PoolFactory) -> None:
    pool = await make_pool(misbehaving_config("--noise"))
    result = await pool.call_tool(server="sick", tool="echo", arguments={"text": "through the noise"})
    assert result.content[0].text == "through the noise"
    assert pool.server_status("sick").state is ServerState.READY


async def test_list_changed_refreshes_the_catalog_and_notifies_watchers(make_pool: PoolFactory) -> None:
    pool = await make_pool(misbehaving_config())
    updates = pool.watch_catalog(pool.catalog.version)
    pending = asyncio.ensure_future(anext(updates))
    await pool.call_tool(server="sick", tool="add_tool")
    update = await asyncio.wait_for(pending, 10)
    assert update.changed_servers == ("sick",)
    assert "sick__extra" in [t.llm_name for t in update.tools]
    await updates.aclose()
    await assert_healthy_still_serves(pool)


async def test_an_oversized_result_is_truncated_visibly(make_pool: PoolFactory) -> None:
    pool = await make_pool(misbehaving_config(), max_result_bytes=2048)
    result = await pool.call_tool(server="sick", tool="big", arguments={"size": 50_000})
    assert result.truncated
    assert result.content[-1].text.endswith("bytes exceed the 2048-byte limit]")
    await assert_healthy_still_serves(pool)


async def test_a_tool_error_keeps_the_servers_message(make_pool: PoolFactory) -> None:
    pool = await make_pool(misbehaving_config())
    result = await pool.call_tool(
        server="sick", tool="fail", arguments={"message": "date must be YYYY-MM-DD"}
    )
    assert result.is_error
    assert result.content[0].text == "date must be YYYY-MM-DD"
    await assert_healthy_still_serves(pool)


async def test_stopping_the_pool_kills_the_whole_process_group_of_a_server(
    make_pool: PoolFactory, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pids"
    pool = await make_pool(misbehaving_config("--spawn-child", "--pid-file", str(pid_file)))
    server_pid, child_pid = _pids(pid_file)
    with pytest.raises(ToolOutcomeUnknownError):
        await pool.call_tool(server="sick", tool="crash")
    # The server died; its child was orphaned into the same process group and must be killed too.
    assert await wait_until_gone([server_pid, child_pid]) == set()
    await pool.wait_until(lambda: pool.server_status("sick").state is ServerState.READY, 10)
    await pool.stop()
    assert await wait_until_gone(_pids(pid_file)) == set()


async def test_an_idle_stdio_server_is_stopped_and_started_again_by_the_next_call(
    make_pool: PoolFactory, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pids"
    pool = await make_pool(misbehaving_config("--pid-file", str(pid_file), idle_timeout=0.3))
    first_pid = _pids(pid_file)[0]
    await pool.wait_until(lambda: pool.server_status("sick").state is ServerState.IDLE, 10)
    assert await wait_until_gone([first_pid]) == set()
    assert "sick__echo" in [t.llm_name for t in pool.list_tools().tools]
    result = await pool.call_tool(server="sick", tool="echo", arguments={"text": "woke up"})
    assert result.content[0].text == "woke up"
    assert _pids(pid_file)[0] != first_pid
    assert pool.server_status("sick").restarts == 0


async def test_concurrent_calls_share_one_session_and_run_in_parallel(
    make_pool: PoolFactory, tmp_path: Path
) -> None:
    pid_file, calls = tmp_path / "pids", tmp_path / "calls"
    pool = await make_pool(misbehaving_config("--pid-file", str(pid_file), "--call-log", str(calls)))
    pid = _pids(pid_file)[0]
    tasks = [
        asyncio.ensure_future(
            pool.call_tool(server="sick", tool="sleep", arguments={"seconds": 60}, timeout_seconds=120)
        )
        for _ in range(16)
    ]
    # Every call reaches the server while none has finished: they overlap on the one session
    # (serialized calls would each wait a minute for the one before).
    assert await wait_for_lines(calls, 16) == ["sleep"] * 16
    assert not any(task.done() for task in tasks)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    assert _pids(pid_file)[0] == pid


async def test_the_per_server_concurrency_limit_queues_extra_calls(
    make_pool: PoolFactory, tmp_path: Path
) -> None:
    calls = tmp_path / "calls"
    pool = await make_pool(misbehaving_config("--call-log", str(calls), max_concurrency=1))
    first = asyncio.ensure_future(pool.call_tool(server="sick", tool="hang", timeout_seconds=5))
    # Wait until the first call holds the only slot: the server has received it.
    assert await wait_for_lines(calls, 1) == ["hang"]
    # The second call waits for the only slot and times out before getting it.
    with pytest.raises(ToolCallTimeoutError):
        await pool.call_tool(server="sick", tool="echo", timeout_seconds=0.3)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    result = await pool.call_tool(server="sick", tool="echo", arguments={"text": "free again"})
    assert result.content[0].text == "free again"


async def test_stopping_the_pool_does_not_wait_for_a_server_stuck_in_initialize(
    make_pool: PoolFactory,
) -> None:
    pool = await make_pool(misbehaving_config("--garbage", connect_timeout=120), wait=None)
    assert pool.server_status("sick").state is ServerState.STARTING
    # Ends with the stdio shutdown (stdin close, grace, SIGTERM), not with the 120 s connect
    # timeout: a wait bounded well below it would raise TimeoutError otherwise.
    async with asyncio.timeout(60):
        await pool.stop()
    assert pool.server_status("sick").state is ServerState.STOPPED


async def test_meta_is_passed_through_to_the_server(make_pool: PoolFactory, tmp_path: Path) -> None:
    log = tmp_path / "meta"
    pool = await make_pool(misbehaving_config("--meta-log", str(log)))
    await pool.call_tool(server="sick", tool="echo", meta='{"requestor": "chat-42", "progressToken": "p1"}')
    (line,) = await wait_for_lines(log, 1)
    meta = json.loads(line)
    assert meta["requestor"] == "chat-42"
    assert meta["progressToken"] == "p1"


async def test_a_server_that_cannot_start_reports_its_exit_status_and_last_stderr_line_masked(
    make_pool: PoolFactory,
) -> None:
    script = (
        "import os, sys; print('ModuleNotFoundError: no module named mcp_thing', file=sys.stderr); "
        "print('giving up; token was', os.environ['SERVICE_TOKEN'], file=sys.stderr); sys.exit(3)"
    )
    sick = {"command": sys.executable, "args": ["-c", script], "env": {"SERVICE_TOKEN": "tok-0123456789"}}
    pool = await make_pool(sick)
    await pool.wait_until(lambda: "last stderr line" in pool.server_status("sick").last_error, 15)
    error = pool.server_status("sick").last_error
    assert "exited with status 3" in error
    assert error.endswith("its last stderr line: giving up; token was [REDACTED]")
    assert "tok-0123456789" not in error
