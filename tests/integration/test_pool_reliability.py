"""Issue 10: calls run at most once unless safe to repeat, supervision recovers, nothing is lost.

Real MCP server processes (the misbehaving fixture, the npm memory server) behind a real pool,
and where the status code is the point, behind a real gRPC server reached through the client
library with its default retry policy.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from toolscout import client as tc
from toolscout.client import ServerStatus

from mcp_pool_svc.errors import (
    ResultTooLargeError,
    ServerUnavailableError,
    ToolCallTimeoutError,
    ToolOutcomeUnknownError,
)
from mcp_pool_svc.pool import McpPool
from mcp_pool_svc.server import build_server
from mcp_pool_svc.supervisor import ServerState
from tests.support.mcp_servers import (
    live_descendants,
    memory_server_config,
    misbehaving_config,
    wait_for_lines,
    wait_until_gone,
)
from toolscout_kit.config import ToolscoutConfig, parse_config
from toolscout_kit.server import RunningServer

PoolFactory = Callable[..., Any]

_FAST = {
    "initial_backoff": 0.05,
    "max_backoff": 0.1,
    "ping_interval": 5,
    "blip_grace": 0.2,
}


def _config(
    servers: dict[str, Any], *, results: dict[str, Any] | None = None, **settings: Any
) -> ToolscoutConfig:
    toolscout: dict[str, Any] = {"pool": {**_FAST, **settings}}
    if results is not None:
        toolscout["results"] = results
    return parse_config({"servers": servers, "toolscout": toolscout})


@pytest.fixture
async def make_pool() -> AsyncIterator[PoolFactory]:
    before = live_descendants()
    pools: list[McpPool] = []

    async def make(servers: dict[str, Any], **settings: Any) -> McpPool:
        pool = McpPool(_config(servers, **settings))
        pools.append(pool)
        await pool.start(wait=15)
        return pool

    yield make
    for pool in pools:
        await pool.stop()
    assert await wait_until_gone(live_descendants() - before) == set(), "processes outlived the pool"


@pytest.fixture
async def serve() -> AsyncIterator[Callable[..., Any]]:
    before = live_descendants()
    running: list[RunningServer] = []

    async def start(servers: dict[str, Any], **settings: Any) -> tuple[RunningServer, McpPool]:
        config = _config(servers, **settings)
        pool = McpPool(config)
        server = await build_server(config, listen="127.0.0.1:0", metrics_port=-1, pool=pool)
        running.append(server)
        return server, pool

    yield start
    for server in running:
        await server.stop(0.5)
    assert await wait_until_gone(live_descendants() - before) == set(), "processes outlived the pool"


def _record_statuses(pool: McpPool, server: str) -> list[ServerStatus]:
    seen: list[ServerStatus] = []
    pool.add_listener(lambda name: seen.append(pool.server_status(name)) if name == server else None)
    return seen


def _pids(path: Path) -> list[int]:
    return [int(p) for p in path.read_text().split()]


# --- 1. no automatic replay of anything that may have had an effect -------------------------


async def test_a_call_whose_server_dies_mid_call_runs_once_and_is_reported_as_outcome_unknown(
    serve: Callable[..., Any], tmp_path: Path
) -> None:
    calls = tmp_path / "calls"
    server, pool = await serve({"fixture": misbehaving_config("--call-log", str(calls))})
    async with tc.AsyncPoolClient.connect(server.address) as client:
        with pytest.raises(tc.OutcomeUnknownError, match="may or may not have run") as info:
            await client.call_tool("fixture__crash_once", {"marker": str(tmp_path / "marker")})
        assert "fixture" in info.value.message
        await pool.wait_until(lambda: pool.server_status("fixture").state is ServerState.READY, 10)
        # Nothing replayed it, not the channel and not the pool: the tool ran exactly once.
        assert (await wait_for_lines(calls, 1)) == ["crash_once"]
        again = await client.call_tool("fixture__echo", {"text": "back"})
        assert again.text == "back"
    assert calls.read_text().splitlines() == ["crash_once", "echo"]


async def test_an_idempotent_tool_whose_server_dies_mid_call_is_retried_once_after_the_restart(
    make_pool: PoolFactory, tmp_path: Path
) -> None:
    calls = tmp_path / "calls"
    pool = await make_pool({"fixture": misbehaving_config("--call-log", str(calls))})
    result = await pool.call_tool(
        server="fixture", tool="crash_once_idempotent", arguments={"marker": str(tmp_path / "m")}
    )
    assert result.content[0].text == "survived"
    assert calls.read_text().splitlines() == ["crash_once_idempotent"] * 2


async def test_a_call_that_was_never_sent_is_unavailable_and_safe_to_retry(make_pool: PoolFactory) -> None:
    pool = await make_pool({"dead": misbehaving_config("--exit-at-start")})
    with pytest.raises(ServerUnavailableError, match="not sent"):
        await pool.call_tool(server="dead", tool="echo")


async def test_calls_in_flight_when_the_pool_stops_get_outcome_unknown(
    serve: Callable[..., Any], tmp_path: Path
) -> None:
    calls = tmp_path / "calls"
    server, _pool = await serve({"fixture": misbehaving_config("--call-log", str(calls))})
    async with tc.AsyncPoolClient.connect(server.address) as client:
        pending = asyncio.ensure_future(client.call_tool("fixture__hang", deadline=30))
        assert await wait_for_lines(calls, 1) == ["hang"]
        await server.stop(0.5)
        with pytest.raises(tc.OutcomeUnknownError, match="may or may not have run"):
            await asyncio.wait_for(pending, 20)
    assert calls.read_text().splitlines() == ["hang"]


# --- 2. supervision that recovers instead of parking -----------------------------------------


async def test_a_tool_that_crashes_its_server_on_every_call_never_parks_it_in_failed(
    make_pool: PoolFactory,
) -> None:
    pool = await make_pool({"fixture": misbehaving_config()}, crash_loop_restarts=3)
    seen = _record_statuses(pool, "fixture")
    for n in range(6):
        with pytest.raises(ToolOutcomeUnknownError):
            await pool.call_tool(server="fixture", tool="crash")
        await pool.wait_until(
            lambda n=n: (
                pool.server_status("fixture").state is ServerState.READY
                and pool.server_status("fixture").restarts == n + 1
            ),
            10,
        )
    assert ServerState.FAILED not in {s.state for s in seen}


async def test_last_error_carries_the_exit_status_of_each_crash_and_is_cleared_when_ready(
    make_pool: PoolFactory,
) -> None:
    pool = await make_pool({"fixture": misbehaving_config()})
    seen = _record_statuses(pool, "fixture")
    for n in range(3):
        with pytest.raises(ToolOutcomeUnknownError):
            await pool.call_tool(server="fixture", tool="crash")
        await pool.wait_until(
            lambda n=n: (
                pool.server_status("fixture").state is ServerState.READY
                and pool.server_status("fixture").restarts == n + 1
            ),
            10,
        )
    # Each crash is reported once its process is gone (the status changes then, in RECONNECTING).
    # A listener hears every change of a status (the next retry's time too), so one crash can be
    # seen in several snapshots: count the spells in RECONNECTING, each must carry its exit status.
    spells: list[list[str]] = []
    for before, status in zip([None, *seen], seen, strict=False):
        if status.state is ServerState.RECONNECTING:
            if before is None or before.state is not ServerState.RECONNECTING:
                spells.append([])
            spells[-1].append(status.last_error)
    assert len(spells) == 3, spells
    assert all(any("exited with status 7" in e for e in spell) for spell in spells), spells
    assert pool.server_status("fixture").last_error == ""


async def test_a_server_that_exits_at_start_reports_its_exit_status_on_every_attempt(
    make_pool: PoolFactory,
) -> None:
    pool = await make_pool({"dead": misbehaving_config("--exit-at-start")}, crash_loop_restarts=3)
    seen = _record_statuses(pool, "dead")
    await pool.wait_until(lambda: pool.server_status("dead").restarts >= 4, 15)
    errors = [s.last_error for s in seen if s.state is not ServerState.READY and s.last_error]
    assert len(errors) >= 4
    assert all("exited with status 3" in e for e in errors), errors


async def test_a_crash_looping_server_is_failed_but_probed_again_with_a_next_retry_time(
    make_pool: PoolFactory,
) -> None:
    pool = await make_pool(
        {"dead": misbehaving_config("--exit-at-start")}, crash_loop_restarts=2, failed_retry_interval=60
    )
    await pool.wait_until(lambda: pool.server_status("dead").state is ServerState.FAILED, 10)
    status = pool.server_status("dead")
    assert status.next_retry_unix > status.state_since_unix
    # FAILED is not terminal: the next probe runs (and fails again) on its own.
    restarts = status.restarts
    await pool.wait_until(lambda: pool.server_status("dead").restarts > restarts, 10)
    with pytest.raises(ServerUnavailableError, match=r"'dead' is failed"):
        await pool.call_tool(server="dead", tool="echo")


# --- 3. nothing acknowledged is lost, nothing left behind -------------------------------------


async def test_concurrent_writes_to_a_server_that_is_not_concurrency_safe_are_all_kept(
    make_pool: PoolFactory, tmp_path: Path
) -> None:
    pool = await make_pool({"memory": memory_server_config(tmp_path / "memory.jsonl")})

    async def create(n: int) -> None:
        entity = {"name": f"entity-{n}", "entityType": "test", "observations": [f"observation {n}"]}
        result = await pool.call_tool(
            server="memory", tool="create_entities", arguments={"entities": [entity]}, timeout_seconds=60
        )
        assert not result.is_error, result.content[0].text

    await asyncio.gather(*(create(n) for n in range(100)))
    graph = await pool.call_tool(server="memory", tool="read_graph", timeout_seconds=60)
    kept = {e["name"] for e in json.loads(graph.structured_content_json or graph.content[0].text)["entities"]}
    assert kept == {f"entity-{n}" for n in range(100)}


async def test_writes_are_serialized_per_server_while_reads_stay_concurrent(
    make_pool: PoolFactory, tmp_path: Path
) -> None:
    calls = tmp_path / "calls"
    pool = await make_pool({"fixture": misbehaving_config("--call-log", str(calls))})
    first = asyncio.ensure_future(pool.call_tool(server="fixture", tool="hang", timeout_seconds=30))
    assert await wait_for_lines(calls, 1) == ["hang"]
    # A read passes the write in progress; a second write waits for it (and here times out unsent).
    read = await pool.call_tool(server="fixture", tool="echo", arguments={"text": "read"})
    assert read.content[0].text == "read"
    with pytest.raises(ToolCallTimeoutError):
        await pool.call_tool(server="fixture", tool="add_tool", timeout_seconds=0.3)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    assert calls.read_text().splitlines() == ["hang", "echo"]


async def test_serialize_writes_false_lets_writes_run_concurrently(
    make_pool: PoolFactory, tmp_path: Path
) -> None:
    calls = tmp_path / "calls"
    pool = await make_pool({"fixture": misbehaving_config("--call-log", str(calls), serialize_writes=False)})
    first = asyncio.ensure_future(pool.call_tool(server="fixture", tool="hang", timeout_seconds=30))
    assert await wait_for_lines(calls, 1) == ["hang"]
    await pool.call_tool(server="fixture", tool="add_tool", timeout_seconds=10)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first


async def test_a_detached_grandchild_outlives_neither_a_restart_nor_a_stop(
    make_pool: PoolFactory, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pids"
    pool = await make_pool({"fixture": misbehaving_config("--spawn-detached", "--pid-file", str(pid_file))})
    server_pid, detached_pid = _pids(pid_file)
    with pytest.raises(ToolOutcomeUnknownError):
        await pool.call_tool(server="fixture", tool="crash")
    assert await wait_until_gone([server_pid, detached_pid]) == set()
    await pool.wait_until(lambda: pool.server_status("fixture").state is ServerState.READY, 10)
    second = _pids(pid_file)
    assert second[0] != server_pid
    await pool.stop()
    assert await wait_until_gone(second) == set()


# --- 4. large results -------------------------------------------------------------------------


async def test_a_reply_line_over_the_limit_is_refused_and_the_session_survives(
    make_pool: PoolFactory, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pids"
    pool = await make_pool(
        {
            "fixture": misbehaving_config("--pid-file", str(pid_file)),
            "other": misbehaving_config(),
        },
        max_result_bytes=2048,
        # The reading limit follows the larger of max_result_bytes and results.max_kept_bytes.
        results={"max_kept_bytes": 2048},
    )
    pid = _pids(pid_file)[0]
    with pytest.raises(ResultTooLargeError, match="bytes"):
        await pool.call_tool(server="fixture", tool="big", arguments={"size": 3_000_000})
    again = await pool.call_tool(server="fixture", tool="echo", arguments={"text": "still here"})
    assert again.content[0].text == "still here"
    assert _pids(pid_file)[0] == pid
    assert pool.server_status("fixture").restarts == 0
    other = await pool.call_tool(server="other", tool="echo", arguments={"text": "unaffected"})
    assert other.content[0].text == "unaffected"


async def test_the_client_library_shows_when_a_down_server_is_tried_next(serve: Callable[..., Any]) -> None:
    server, pool = await serve({"dead": misbehaving_config("--exit-at-start")}, crash_loop_restarts=1)
    await pool.wait_until(lambda: pool.server_status("dead").state is ServerState.FAILED, 10)
    async with tc.AsyncPoolClient.connect(server.address) as client:
        [status] = await client.list_servers()
    assert status.state == "failed"
    assert status.next_retry_unix > status.state_since_unix
