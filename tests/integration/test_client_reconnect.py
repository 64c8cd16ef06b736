"""A pool that comes back is called as soon as the channel reconnects, not reported unreachable.

After a failed connection attempt a gRPC channel waits out its reconnect backoff; a call made
meanwhile used to fail at once with "not reachable" although the pool was serving again (issue
19, item 6: chats failed for 0.5–2 s after a shard restarted). The channels here back off 3 s,
so without the wait the call right after the pool's return fails every time.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from toolscout import client as tc

from mcp_pool_svc.server import build_server
from tests.support.mcp_servers import free_port, misbehaving_config
from toolscout_kit.config import parse_config
from toolscout_kit.server import RunningServer

SLOW_BACKOFF = (
    ("grpc.initial_reconnect_backoff_ms", 3000),
    ("grpc.min_reconnect_backoff_ms", 3000),
    ("grpc.max_reconnect_backoff_ms", 3000),
)


async def _serve(tmp_path: Path, port: int) -> RunningServer:
    config = parse_config({"servers": {"fixture": misbehaving_config()}}, base_dir=tmp_path)
    return await build_server(config, listen=f"127.0.0.1:{port}", metrics_port=-1)


async def test_a_call_after_the_pool_returns_waits_for_the_reconnect_instead_of_failing(
    tmp_path: Path,
) -> None:
    port = free_port()
    async with tc.AsyncPoolClient.connect(f"127.0.0.1:{port}", options=SLOW_BACKOFF) as pool:
        server = await _serve(tmp_path, port)
        try:
            assert (await pool.call_tool("fixture__echo", {"text": "up"}, deadline=30)).text == "up"
        finally:
            await server.stop(0.5)
        with pytest.raises(tc.UnavailableError) as down:
            await pool.call_tool("fixture__echo", {"text": "x"}, deadline=0.5)
        assert down.value.not_sent
        server = await _serve(tmp_path, port)
        try:
            result = await pool.call_tool("fixture__echo", {"text": "back"}, deadline=30)
        finally:
            await server.stop(0.5)
    assert result.text == "back"


async def test_the_blocking_client_also_waits_for_the_reconnect(tmp_path: Path) -> None:
    port = free_port()
    with tc.PoolClient.connect(f"127.0.0.1:{port}", options=SLOW_BACKOFF) as pool:
        server = await _serve(tmp_path, port)
        try:
            up = await asyncio.to_thread(pool.call_tool, "fixture__echo", {"text": "up"}, deadline=30)
            assert up.text == "up"
        finally:
            await server.stop(0.5)
        with pytest.raises(tc.UnavailableError) as down:
            await asyncio.to_thread(pool.call_tool, "fixture__echo", {"text": "x"}, deadline=0.5)
        assert down.value.not_sent
        server = await _serve(tmp_path, port)
        try:
            result = await asyncio.to_thread(pool.call_tool, "fixture__echo", {"text": "back"}, deadline=30)
        finally:
            await server.stop(0.5)
    assert result.text == "back"


async def test_a_new_client_right_after_a_restart_waits_for_its_own_attempt(tmp_path: Path) -> None:
    """gRPC shares a connection between channels to the same address, with its reconnect backoff:
    a client created while that backoff runs must not take the old failure for its own."""
    port = free_port()
    target = f"127.0.0.1:{port}"
    async with tc.AsyncPoolClient.connect(target, options=SLOW_BACKOFF) as old:
        server = await _serve(tmp_path, port)
        try:
            assert (await old.call_tool("fixture__echo", {"text": "up"}, deadline=30)).text == "up"
        finally:
            await server.stop(0.5)
        with pytest.raises(tc.UnavailableError):
            await old.call_tool("fixture__echo", {"text": "x"}, deadline=0.5)
        server = await _serve(tmp_path, port)
        try:
            async with tc.AsyncPoolClient.connect(target, options=SLOW_BACKOFF) as new:
                result = await new.call_tool("fixture__echo", {"text": "new"}, deadline=30)
        finally:
            await server.stop(0.5)
    assert result.text == "new"
