"""A call right after a remote streamable-HTTP server died is "not sent" at once, in every window of
the reconnect cycle and on every session generation, for npm server-everything and for our own
Python SDK server (issue 30, item 5).

Before: server-everything's connection error on the call's POST ended the whole SDK transport, so
the pool read the call as sent and lost, and a repeatable tool waited for the server to come back
until its call_timeout ran out.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from mcp_pool_svc.errors import ServerUnavailableError, ToolCallTimeoutError, ToolOutcomeUnknownError
from mcp_pool_svc.pool import McpPool
from mcp_pool_svc.supervisor import ServerState
from tests.support.mcp_servers import HttpServer, _running, everything_bin, free_port, running_example_http
from toolscout_kit.config import parse_config

GENERATIONS = 3
WAIT = 60.0


@contextmanager
def _server(kind: str, port: int) -> Iterator[HttpServer]:
    if kind == "everything":
        with _running([str(everything_bin()), "streamableHttp"], port=port, path="/mcp") as server:
            yield server
    else:
        with running_example_http("text", "streamable-http", port=port) as server:
            yield server


_TOOL = {"everything": ("echo", {"message": "hi"}), "python": ("slugify", {"text": "a b"})}


async def _outcome(pool: McpPool, kind: str) -> str:
    tool, arguments = _TOOL[kind]
    try:
        await pool.call_tool(server="s", tool=tool, arguments=arguments)
    except ServerUnavailableError:
        return "not sent"
    except ToolOutcomeUnknownError:
        return "unknown"
    except ToolCallTimeoutError:
        return "timeout"
    return "ok"


async def _wait_state(pool: McpPool, *, ready: bool) -> None:
    def reached() -> bool:
        return (pool.server_status("s").state is ServerState.READY) is ready

    await pool.wait_until(reached, WAIT)


@pytest.mark.parametrize("kind", ["everything", "python"])
async def test_a_call_after_the_remote_server_died_is_not_sent_in_every_window_of_every_generation(
    kind: str,
) -> None:
    port = free_port()
    seen: list[tuple[int, str, str]] = []
    pool: McpPool | None = None
    try:
        for generation in range(GENERATIONS):
            with _server(kind, port) as server:
                if pool is None:
                    settings: dict[str, Any] = {"initial_backoff": 0.2, "max_backoff": 1.0}
                    config = parse_config(
                        {
                            # A long call_timeout: a call that hangs shows as "timeout", not as a wait.
                            "servers": {"s": {"url": server.url, "transport": "http", "call_timeout": 30}},
                            "toolscout": {"pool": settings},
                        }
                    )
                    pool = McpPool(config)
                    await pool.start(wait=WAIT)
                live = pool
                await _wait_state(live, ready=True)
                seen.append((generation, "ready", await _outcome(live, kind)))
                os.killpg(server.process.pid, signal.SIGKILL)
                server.process.wait(timeout=10)
                # At once: the pool has not noticed yet (its session still looks ready).
                seen.append((generation, "just died", await _outcome(live, kind)))
                await _wait_state(live, ready=False)
                # Noticed: reconnecting, backing off or dialling again.
                seen.append((generation, "reconnecting", await _outcome(live, kind)))
    finally:
        if pool is not None:
            await pool.stop()
    expected = [
        (g, window, "ok" if window == "ready" else "not sent")
        for g in range(GENERATIONS)
        for window in ("ready", "just died", "reconnecting")
    ]
    assert seen == expected
