"""The pool's CallToolStream through the client library: real grpc.aio server, real MCP servers.

A call that relays nothing goes on the stream; a call with metadata of its own goes unary (which is
how each test gets CallTool's answer to compare with). Everything a caller sees must be the same.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from toolscout import client as tc
from toolscout.client.testing import FakePool
from toolscout.mcp_pool.v1 import mcp_pool_pb2_grpc

from mcp_pool_svc.pool import McpPool
from mcp_pool_svc.server import build_server
from mcp_pool_svc.supervisor import ServerState
from tests.support.mcp_servers import live_descendants, logging_fixture_pool, wait_for_lines, wait_until_gone
from toolscout_kit.config import parse_config
from toolscout_kit.server import RunningServer

# Metadata of the caller's own: the client sends such a call as a unary CallTool.
UNARY = [("x-request-id", "unary-for-comparison")]


def _config(tmp_path: Path) -> Any:
    return parse_config(logging_fixture_pool(tmp_path), base_dir=tmp_path)


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[tuple[McpPool, RunningServer]]:
    before = live_descendants()
    config = _config(tmp_path)
    pool = McpPool(config)
    running = await build_server(config, listen="127.0.0.1:0", metrics_port=-1, pool=pool)
    try:
        yield pool, running
    finally:
        await running.stop(0.5)
    assert await wait_until_gone(live_descendants() - before) == set()


@pytest.fixture
async def client(stack: tuple[McpPool, RunningServer]) -> AsyncIterator[tc.AsyncPoolClient]:
    async with tc.AsyncPoolClient.connect(stack[1].address) as pool_client:
        yield pool_client


def _on_stream(pool_client: tc.AsyncPoolClient) -> bool:
    stream = pool_client._call_stream
    return stream is not None and not stream.unsupported and stream._open is not None


async def test_concurrent_plain_calls_share_one_stream_and_answer_as_call_tool(
    client: tc.AsyncPoolClient,
) -> None:
    texts = [f"hello {i}" for i in range(20)]
    results = await asyncio.gather(*(client.call_tool("fixture__echo", {"text": t}) for t in texts))
    assert [r.text for r in results] == texts
    assert _on_stream(client)
    opened = client._call_stream._open  # type: ignore[union-attr]
    streamed = await client.call_tool("fixture__echo", {"text": "same"})
    assert client._call_stream._open is opened  # type: ignore[union-attr]  # the same stream again
    unary = await client.call_tool("fixture__echo", {"text": "same"}, metadata=UNARY)
    # Everything but the wall time is CallTool's answer.
    assert dataclasses.replace(streamed, duration_seconds=0) == dataclasses.replace(unary, duration_seconds=0)


def _seen(err: tc.ToolscoutClientError) -> tuple[Any, ...]:
    return (type(err), err.code, err.message, err.not_sent if isinstance(err, tc.UnavailableError) else None)


async def test_every_refusal_on_the_stream_is_call_tools_own(
    stack: tuple[McpPool, RunningServer], client: tc.AsyncPoolClient
) -> None:
    pool = stack[0]
    await pool.wait_until(lambda: pool.server_status("dead").state is ServerState.FAILED, 10)
    requests = [
        tc.CallRequest.to("fixture__nope"),  # NOT_FOUND naming the closest tools
        tc.CallRequest("fixture", "echo", arguments_json="[1, 2]"),  # INVALID_ARGUMENT
        tc.CallRequest.to("fixture__echo", {"text": "x"}, timeout_seconds=float("nan")),  # INVALID_ARGUMENT
        tc.CallRequest("dead", "echo"),  # UNAVAILABLE, not sent
        tc.CallRequest("nope", "echo"),  # NOT_FOUND
    ]
    for request in requests:
        with pytest.raises(tc.ToolscoutClientError) as streamed:
            await client.call(request)
        assert _on_stream(client)
        with pytest.raises(tc.ToolscoutClientError) as unary:
            await client.call(request, metadata=UNARY)
        assert _seen(streamed.value) == _seen(unary.value), request
        assert streamed.value.trailing_metadata == unary.value.trailing_metadata
    # The refused calls left the stream as it was: the next call answers.
    assert (await client.call_tool("fixture__echo", {"text": "after"})).text == "after"


async def test_the_deadline_ends_the_wait_and_cancels_the_call_on_the_server(
    client: tc.AsyncPoolClient, tmp_path: Path
) -> None:
    await client.call_tool("fixture__echo", {"text": "open the stream"})
    with pytest.raises(tc.DeadlineExceededError):
        await client.call(tc.CallRequest.to("fixture__hang"), deadline=0.5)
    assert len(await wait_for_lines(tmp_path / "cancelled.log", 1)) == 1
    assert (await client.call_tool("fixture__echo", {"text": "still open"})).text == "still open"
    assert _on_stream(client)


async def test_a_cancelled_caller_cancels_its_call_on_the_server(
    client: tc.AsyncPoolClient, tmp_path: Path
) -> None:
    waiting = asyncio.create_task(client.call_tool("fixture__hang", {}))
    assert await wait_for_lines(tmp_path / "called.log", 1) == ["hang"]
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert len(await wait_for_lines(tmp_path / "cancelled.log", 1)) == 1
    assert (await client.call_tool("fixture__echo", {"text": "next"})).text == "next"


async def test_a_stopping_pool_answers_the_calls_it_read_then_ends_the_stream(
    stack: tuple[McpPool, RunningServer], client: tc.AsyncPoolClient
) -> None:
    await client.call_tool("fixture__echo", {"text": "open the stream"})
    stream = client._call_stream._open  # type: ignore[union-attr]
    slow = asyncio.create_task(client.call_tool("fixture__sleep", {"seconds": 0.5}))
    await asyncio.sleep(0.2)  # the call is on its way to the server
    await stack[1].stop(5)
    assert (await slow).text == "slept"  # answered within the grace, not cut off
    assert stream is not None
    assert stream.ended
    with pytest.raises(tc.UnavailableError) as err:
        await client.call_tool("fixture__echo", {"text": "too late"}, deadline=2)
    assert err.value.not_sent


class _PoolWithoutTheStream(FakePool):
    """A pool of a version before the call stream: gRPC answers its ``CallToolStream`` UNIMPLEMENTED."""

    CallToolStream = mcp_pool_pb2_grpc.McpPoolServicer.CallToolStream  # type: ignore[assignment]


async def test_a_pool_without_the_stream_is_called_with_call_tool() -> None:
    fake = _PoolWithoutTheStream([tc.Tool("weather", "get_forecast", "weather__get_forecast")])
    async with fake.serve() as target, tc.AsyncPoolClient.connect(target) as pool_client:
        for _ in range(2):
            result = await pool_client.call_tool("weather__get_forecast", {"city": "Oslo"})
            assert result.text == 'called weather__get_forecast with {"city":"Oslo"}'
        assert pool_client._call_stream is not None
        assert pool_client._call_stream.unsupported
    assert [c.streamed for c in fake.calls] == [False, False]


async def test_each_call_on_the_stream_is_counted_as_a_call_tool(
    stack: tuple[McpPool, RunningServer], client: tc.AsyncPoolClient
) -> None:
    registry = stack[1].registry

    def handled(code: str) -> float:
        labels = {
            "grpc_service": "toolscout.mcp_pool.v1.McpPool",
            "grpc_method": "CallTool",
            "grpc_code": code,
        }
        return registry.get_sample_value("grpc_server_handled_total", labels) or 0.0

    for text in ("a", "b", "c"):
        await client.call_tool("fixture__echo", {"text": text})
    with pytest.raises(tc.NotFoundError):
        await client.call_tool("fixture__nope")
    assert _on_stream(client)
    assert (handled("OK"), handled("NOT_FOUND")) == (3, 1)


async def test_a_client_closed_with_a_call_in_flight_cancels_it_on_the_server(
    stack: tuple[McpPool, RunningServer], tmp_path: Path
) -> None:
    pool_client = tc.AsyncPoolClient.connect(stack[1].address)
    waiting = asyncio.create_task(pool_client.call_tool("fixture__hang", {}))
    assert await wait_for_lines(tmp_path / "called.log", 1) == ["hang"]
    await pool_client.close()
    with pytest.raises(tc.CancelledError):
        await waiting
    assert len(await wait_for_lines(tmp_path / "cancelled.log", 1)) == 1
