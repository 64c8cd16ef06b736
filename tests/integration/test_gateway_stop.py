"""The gateway's stop with requests still running at the end of its grace: real pool, discovery
and MCP server processes, the gateway's real HTTP server, each way a host calls a tool.

A tool call still running is cancelled (the pool cancels it at the MCP server) and its caller is
told that the outcome is unknown; any other request still running is ended; nothing is left for
uvicorn to cancel (it would log a traceback per request, after a timeout of its own on top of the
grace).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import mcp_types as types
import pytest
import structlog
from mcp.client import Client

from tests.support.gateway import LEGACY, GatewayStack, gateway_stack, post
from tests.support.mcp_servers import misbehaving_config, wait_for_lines
from toolscout_kit.config import ToolscoutConfig, parse_config

WAIT = 30.0
GRACE = 0.5
_ENDED = (
    "Error: the outcome of this call of 'mis__hang' is unknown: the gateway stopped before the tool "
    "answered, and the call was cancelled. The tool may or may not have run, and it was not run again."
)


def _config(tmp: Path) -> ToolscoutConfig:
    flags = (
        "--call-log",
        str(tmp / "called.log"),
        "--cancel-log",
        str(tmp / "cancelled.log"),
        "--hang-reads",
    )
    return parse_config(
        {
            "servers": {"mis": misbehaving_config(*flags)},
            "tool_sets": {"every": {"servers": {"mis": True}}},
            "toolscout": {"gateway": {"modes": {"every": "all"}}},
        },
        base_dir=tmp,
    )


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@asynccontextmanager
async def _uvicorn_records() -> AsyncIterator[list[logging.LogRecord]]:
    """What uvicorn logs meanwhile (its loggers do not reach the root logger)."""
    handler = _Records()
    logger = logging.getLogger("uvicorn.error")
    logger.addHandler(handler)
    try:
        yield handler.records
    finally:
        logger.removeHandler(handler)


def _text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def _session_call(gw: GatewayStack, progress: bool) -> tuple[bool, str]:
    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        pass

    async with Client(f"{gw.url}/every", mode="legacy") as host:
        result = await host.call_tool("mis__hang", {}, progress_callback=on_progress if progress else None)
    return bool(result.is_error), _text(result)


async def _raw_call(url: str, modern: bool) -> tuple[bool, str]:
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "mis__hang", "arguments": {}},
    }
    headers = {} if modern else {"mcp-protocol-version": LEGACY}
    answer = await post(url, body, modern=modern, headers=headers)
    assert answer.status_code == 200, answer.text
    text = answer.text
    if answer.headers["content-type"].startswith("text/event-stream"):
        text = next(line[len("data: ") :] for line in text.splitlines() if line.startswith("data: "))
    result = json.loads(text)["result"]
    return bool(result.get("isError")), result["content"][0]["text"]


_CALLERS: dict[str, Callable[[GatewayStack], Awaitable[tuple[bool, str]]]] = {
    # The lean path on a session's stream.
    "session": lambda gw: _session_call(gw, progress=False),
    # The SDK's own path (a call that reports progress).
    "session_with_progress": lambda gw: _session_call(gw, progress=True),
    # A stateless 2025-11-25 request on the meta endpoint (the SDK's stateless transport).
    "stateless_2025": lambda gw: _raw_call(gw.url, modern=False),
    # A 2026-07-28 request (the lean path without a session).
    "modern": lambda gw: _raw_call(f"{gw.url}/every", modern=True),
}


@pytest.mark.parametrize("caller", list(_CALLERS))
async def test_a_call_still_running_when_the_grace_ends_is_cancelled_and_told_its_outcome_is_unknown(
    tmp_path: Path, caller: str
) -> None:
    async with gateway_stack(_config(tmp_path)) as gw, _uvicorn_records() as uvicorn_logs:
        call = asyncio.ensure_future(_CALLERS[caller](gw))
        try:
            assert await wait_for_lines(tmp_path / "called.log", 1, within=WAIT) == ["hang"]
            with structlog.testing.capture_logs() as logs:
                await gw.gateway.stop(GRACE)
            with anyio.fail_after(WAIT):
                is_error, text = await call
        finally:
            call.cancel()
        # The pool cancelled the call at the MCP server.
        assert len(await wait_for_lines(tmp_path / "cancelled.log", 1, within=WAIT)) == 1
    assert is_error
    assert text.startswith(_ENDED), text
    ended = [entry for entry in logs if entry["event"].startswith("the shutdown grace is over")]
    assert [(e["tool_calls"], e["other_requests"], e["log_level"]) for e in ended] == [(1, 0, "warning")]
    assert [r.getMessage() for r in uvicorn_logs] == []


async def test_another_request_still_running_when_the_grace_ends_is_answered_503(tmp_path: Path) -> None:
    read = {"jsonrpc": "2.0", "id": 3, "method": "resources/read", "params": {"uri": "misbehaving://forever"}}
    async with gateway_stack(_config(tmp_path)) as gw, _uvicorn_records() as uvicorn_logs:
        answer = asyncio.ensure_future(post(gw.url, read, headers={"mcp-protocol-version": LEGACY}))
        try:
            read_log = await wait_for_lines(tmp_path / "called.log", 1, within=WAIT)
            assert read_log == ["read:misbehaving://forever"]
            with structlog.testing.capture_logs() as logs:
                await gw.gateway.stop(GRACE)
            with anyio.fail_after(WAIT):
                response = await answer
        finally:
            answer.cancel()
    assert response.status_code == 503
    assert response.json()["error"]["message"] == "the gateway stopped before this request was answered"
    ended = [entry for entry in logs if entry["event"].startswith("the shutdown grace is over")]
    assert [(e["tool_calls"], e["other_requests"]) for e in ended] == [(0, 1)]
    assert [r.getMessage() for r in uvicorn_logs] == []


async def test_a_call_answered_within_the_grace_is_answered_as_usual(tmp_path: Path) -> None:
    async with gateway_stack(_config(tmp_path)) as gw, Client(f"{gw.url}/every", mode="legacy") as host:
        # (listed first: the client checks a result against the tool's schema, and a request
        # made once nothing is left running is refused)
        await host.list_tools()
        call = asyncio.ensure_future(host.call_tool("mis__sleep", {"seconds": 0.3}))
        try:
            assert await wait_for_lines(tmp_path / "called.log", 1, within=WAIT) == ["sleep"]
            with structlog.testing.capture_logs() as logs:
                stopping = asyncio.ensure_future(gw.gateway.stop(WAIT))
                with anyio.fail_after(WAIT):
                    result = await call
                await stopping
        finally:
            call.cancel()
    assert not result.is_error
    assert not [entry for entry in logs if entry["event"].startswith("the shutdown grace is over")]
