"""Cancelling a tools/call at the gateway cancels the pool's call and tells the MCP server.

Our SDK server (``tests/fixtures/fidelity/server.py``) has a ``hang`` tool that records when it
starts and when it is cancelled. The host is the ``mcp`` SDK's client: at 2025-11-25 it cancels by
``notifications/cancelled`` (an endpoint with sessions: progressive, all), at 2026-07-28 by closing
the request's response stream (every endpoint). The call is never retried, counted once as
cancelled by the gateway and by the pool, and the session goes on (a progressive session keeps what
its searches loaded).
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import anyio
import pytest
from mcp import Client

from tests.support.gateway import MODERN, GatewayStack, gateway_stack
from tests.support.mcp_servers import REPO_ROOT, wait_for_lines
from toolscout_kit.config import parse_config

SERVER = REPO_ROOT / "tests" / "fixtures" / "fidelity" / "server.py"
WAIT = 30.0


@pytest.fixture
async def gw(tmp_path: Path) -> AsyncIterator[GatewayStack]:
    config = parse_config(
        {
            "namespace_tools": False,
            "tool_discovery": {"enabled": True},
            "servers": {
                "fid": {
                    "command": sys.executable,
                    "args": [str(SERVER), str(tmp_path / "record.txt")],
                    "defer_loading": True,
                }
            },
            "tool_sets": {
                "fid_all": {"servers": {"fid": True}},
                "fid_progressive": {"servers": {"fid": True}},
            },
            "toolscout": {
                "gateway": {"mode": "meta", "modes": {"fid_all": "all", "fid_progressive": "progressive"}}
            },
        },
        base_dir=tmp_path,
    )
    async with gateway_stack(config) as stack:
        yield stack


async def _until(check: Callable[[], bool]) -> None:
    """Waits (bounded) until ``check()`` holds: the server's file and the pool's counter give no event
    to wait on from here."""
    with anyio.fail_after(WAIT):
        for _ in itertools.count():
            if check():
                return
            await anyio.sleep(0.02)


def _count(gw: GatewayStack, name: str, labels: dict[str, str]) -> float:
    registry = gw.gateway.registry if name.startswith("toolscout_gateway") else gw.stack.pool.registry
    return registry.get_sample_value(name, labels) or 0.0


@pytest.mark.parametrize(
    ("endpoint", "revision"),
    [("fid_all", "legacy"), ("fid_progressive", "legacy"), ("", MODERN), ("fid_all", MODERN)],
    ids=["all-2025", "progressive-2025", "meta-2026", "all-2026"],
)
async def test_a_cancelled_call_cancels_the_servers_call_once_and_the_session_goes_on(
    gw: GatewayStack, tmp_path: Path, endpoint: str, revision: str
) -> None:
    record = tmp_path / "record.txt"
    url = gw.gateway.toolset_url(endpoint) if endpoint else gw.url
    mode = {"fid_all": "all", "fid_progressive": "progressive", "": "meta"}[endpoint]
    mode = "meta" if revision == MODERN and mode == "progressive" else mode
    async with Client(url, mode=revision) as host:  # type: ignore[arg-type]
        if mode == "progressive":
            await host.call_tool("search_tools", {"query": "waits until cancelled"})
        before = [t.name for t in (await host.list_tools()).tools]
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                await host.call_tool("hang", {"token": "t1"})

            tg.start_soon(call)
            await wait_for_lines(record, 1, within=WAIT)
            tg.cancel_scope.cancel()
        lines = await wait_for_lines(record, 2, within=WAIT)
        # The session goes on, with what it had loaded.
        after = [t.name for t in (await host.list_tools()).tools]
    assert lines == ["started t1", "cancelled t1"]  # sent once, never again
    assert after == before
    if mode == "progressive":
        assert "hang" in after
    # The pool counts when its call has ended.
    await _until(
        lambda: _count(gw, "toolscout_pool_tool_calls_total", {"server": "fid", "outcome": "cancelled"}) >= 1
    )
    assert _count(gw, "toolscout_pool_tool_calls_total", {"server": "fid", "outcome": "cancelled"}) == 1
    assert _count(gw, "toolscout_gateway_tool_calls_total", {"mode": mode, "outcome": "cancelled"}) == 1
