"""CallToolRelay over a real pool: the server's requests during a call reach the caller, and its
answers the server, through the async, sharded and sync clients (issue 29 item 3).

The MCP server is ``tests/fixtures/relay/server.py`` over stdio (revision 2025-11-25).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from toolscout import client as tc
from toolscout.mcp_pool.v1 import mcp_pool_pb2, mcp_pool_pb2_grpc

from mcp_pool_svc.server import build_server
from tests.support.mcp_servers import REPO_ROOT
from toolscout_kit.config import parse_config
from toolscout_kit.server import RunningServer

SERVER = REPO_ROOT / "tests" / "fixtures" / "relay" / "server.py"
SAMPLING = json.dumps({"sampling": {}})
_SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "a reply"}, "model": "m"}


@pytest.fixture
async def pool(tmp_path: Path) -> AsyncIterator[RunningServer]:
    config = parse_config(
        {
            "servers": {
                "relay": {"command": sys.executable, "args": [str(SERVER), str(tmp_path / "record.txt")]}
            }
        },
        base_dir=tmp_path,
    )
    server = await build_server(config, listen="127.0.0.1:0", metrics_port=-1)
    try:
        yield server
    finally:
        await server.stop(0.5)


def _text(result: tc.CallToolResult) -> str:
    return "".join(block.text for block in result.content)


async def test_a_sampling_request_reaches_the_async_caller_and_its_answer_the_server(
    pool: RunningServer,
) -> None:
    asked: list[tc.RelayedRequest] = []

    async def answer(request: tc.RelayedRequest) -> tc.RelayAnswer:
        asked.append(request)
        return tc.RelayAnswer.of(request.id, _SAMPLED)

    async with tc.AsyncPoolClient.connect(pool.address) as client:
        result = await client.call(
            tc.CallRequest.to("relay__sample", {"prompt": "hi"}), relay=tc.CallRelay(SAMPLING, answer)
        )
    assert _text(result) == "sampled: a reply"
    (request,) = asked
    assert request.method == "sampling/createMessage"
    assert request.params["messages"] == [{"role": "user", "content": {"type": "text", "text": "hi"}}]
    assert request.params["maxTokens"] == 50


async def test_the_callers_error_answer_reaches_the_server_with_its_code(pool: RunningServer) -> None:
    async def decline(request: tc.RelayedRequest) -> tc.RelayAnswer:
        return tc.RelayAnswer.error(request.id, -1, "User rejected sampling request")

    async with tc.AsyncShardedPoolClient.connect([pool.address]) as client:
        result = await client.call(
            tc.CallRequest.to("relay__sample", {}), relay=tc.CallRelay(SAMPLING, decline)
        )
    assert result.is_error
    assert _text(result) == "refused -1: User rejected sampling request"


async def test_a_request_the_callers_host_did_not_declare_is_refused_without_asking_it(
    pool: RunningServer,
) -> None:
    asked: list[tc.RelayedRequest] = []

    async def answer(request: tc.RelayedRequest) -> tc.RelayAnswer:
        asked.append(request)
        return tc.RelayAnswer.of(request.id, {"roots": []})

    async with tc.AsyncPoolClient.connect(pool.address) as client:
        relay = tc.CallRelay(json.dumps({"roots": {}}), answer)
        result = await client.call(tc.CallRequest.to("relay__sample", {}), relay=relay)
        rooted = await client.call(tc.CallRequest.to("relay__roots", {}), relay=relay)
    assert result.is_error
    assert _text(result).startswith("refused -32601: the host of this call did not declare sampling")
    assert [r.method for r in asked] == ["roots/list"]
    assert _text(rooted) == ""


async def test_the_sync_client_answers_requests_and_gets_log_messages(pool: RunningServer) -> None:
    logs: list[tc.RelayedLog] = []

    def answer(request: tc.RelayedRequest) -> tc.RelayAnswer:
        return tc.RelayAnswer.of(request.id, {"action": "accept", "content": {"name": "Grace"}})

    def run() -> tuple[tc.CallToolResult, tc.CallToolResult]:
        with tc.PoolClient.connect(pool.address) as client:
            relay = tc.SyncCallRelay(json.dumps({"elicitation": {}}), answer, on_log=logs.append)
            asked = client.call(tc.CallRequest.to("relay__ask", {}), relay=relay)
            chatty = client.call(tc.CallRequest.to("relay__chatty", {}), relay=relay)
            return asked, chatty

    asked, chatty = await asyncio.to_thread(run)
    assert _text(asked) == 'accept {"name": "Grace"}'
    assert _text(chatty) == "logged"
    assert [(log.level, log.logger, json.loads(log.data_json)) for log in logs] == [
        ("info", "relay", f"line {n}") for n in (1, 2, 3)
    ]


async def test_a_relay_stream_that_does_not_start_with_the_call_is_refused(pool: RunningServer) -> None:
    async with grpc.aio.insecure_channel(pool.address) as channel:
        stub = mcp_pool_pb2_grpc.McpPoolStub(channel)
        call = stub.CallToolRelay(timeout=10)
        await call.write(mcp_pool_pb2.CallToolRelayRequest(answer=mcp_pool_pb2.RelayAnswer(id=1)))
        await call.done_writing()
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await call.read()
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_a_relay_stream_the_caller_closes_after_the_result_ends_as_a_success(
    pool: RunningServer,
) -> None:
    # Not as a cancelled RPC: relayed calls would all count as cancelled.
    async with grpc.aio.insecure_channel(pool.address) as channel:
        stub = mcp_pool_pb2_grpc.McpPoolStub(channel)
        call = stub.CallToolRelay(timeout=30)
        start = mcp_pool_pb2.CallToolRelayStart(
            call=mcp_pool_pb2.CallToolRequest(llm_name="relay__ticks", arguments_json='{"count": 0}')
        )
        await call.write(mcp_pool_pb2.CallToolRelayRequest(start=start))
        event = await call.read()
        await call.done_writing()
        assert event.result.content[0].text == "ticked"
        assert await call.code() == grpc.StatusCode.OK
