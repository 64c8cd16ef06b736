"""McpPool over a real grpc.aio server on 127.0.0.1:0, with real MCP server subprocesses."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from toolscout.mcp_pool.v1 import mcp_pool_pb2, mcp_pool_pb2_grpc

from mcp_pool_svc.pool import McpPool
from mcp_pool_svc.server import build_server
from mcp_pool_svc.supervisor import ServerState
from tests.support.mcp_servers import live_descendants, logging_fixture_pool, wait_for_lines, wait_until_gone
from toolscout_kit.config import parse_config
from toolscout_kit.server import RunningServer

pb = mcp_pool_pb2


def _config(tmp_path: Path, **pool: Any) -> Any:
    return parse_config(logging_fixture_pool(tmp_path, max_result_bytes=4096, **pool), base_dir=tmp_path)


@pytest.fixture
async def pool(tmp_path: Path) -> McpPool:
    return McpPool(_config(tmp_path))


@pytest.fixture
async def server(pool: McpPool, tmp_path: Path) -> AsyncIterator[RunningServer]:
    before = live_descendants()
    running = await build_server(_config(tmp_path), listen="127.0.0.1:0", metrics_port=-1, pool=pool)
    try:
        yield running
    finally:
        await running.stop(0.5)
    assert await wait_until_gone(live_descendants() - before) == set()


@pytest.fixture
async def stub(server: RunningServer) -> AsyncIterator[Any]:
    async with grpc.aio.insecure_channel(server.address) as channel:
        yield mcp_pool_pb2_grpc.McpPoolStub(channel)


async def _until_failed(pool: McpPool, stub: Any, name: str) -> Any:
    await pool.wait_until(lambda: pool.server_status(name).state is ServerState.FAILED, 10)
    servers = {s.name: s for s in (await stub.ListServers(pb.ListServersRequest(), timeout=5)).servers}
    return servers[name]


async def test_list_servers_reports_each_server_with_its_state_and_health_service(
    server: RunningServer, pool: McpPool, stub: Any
) -> None:
    dead = await _until_failed(pool, stub, "dead")
    resp = await stub.ListServers(pb.ListServersRequest(), timeout=5)
    by_name = {s.name: s for s in resp.servers}
    assert [s.name for s in resp.servers] == ["dead", "fixture"]
    assert by_name["fixture"].state == pb.SERVER_STATE_READY
    assert by_name["fixture"].transport == "stdio"
    assert by_name["fixture"].server_info == "misbehaving 1.0"
    assert by_name["fixture"].tool_count == 11
    assert dead.restarts == 1
    assert "closed the connection while starting" in dead.last_error
    async with grpc.aio.insecure_channel(server.address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        ok = await health.Check(
            health_pb2.HealthCheckRequest(service=by_name["fixture"].health_service), timeout=5
        )
        bad = await health.Check(
            health_pb2.HealthCheckRequest(service="toolscout.mcp_pool.v1.server.dead"), timeout=5
        )
    assert ok.status == health_pb2.HealthCheckResponse.SERVING
    assert bad.status == health_pb2.HealthCheckResponse.NOT_SERVING


async def test_list_tools_returns_the_catalog_with_llm_names_and_a_version(stub: Any) -> None:
    resp = await stub.ListTools(pb.ListToolsRequest(), timeout=5)
    names = [t.llm_name for t in resp.tools]
    assert names == sorted(names)
    assert "fixture__echo" in names
    echo = next(t for t in resp.tools if t.name == "echo")
    assert json.loads(echo.input_schema_json)["additionalProperties"] is False
    assert json.loads(echo.output_schema_json)["properties"]["text"] == {"type": "string"}
    assert echo.available
    assert resp.catalog_version
    again = await stub.ListTools(pb.ListToolsRequest(servers=["fixture"]), timeout=5)
    assert again.catalog_version == resp.catalog_version


async def test_list_tools_for_an_unknown_server_is_not_found(stub: Any) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.ListTools(pb.ListToolsRequest(servers=["nope"]), timeout=5)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    assert "fixture" in (err.value.details() or "")


async def test_call_tool_by_llm_name_returns_content_and_structured_content(stub: Any) -> None:
    resp = await stub.CallTool(
        pb.CallToolRequest(
            llm_name="fixture__echo", arguments_json='{"text": "hello"}', meta_json='{"trace": "t1"}'
        ),
        timeout=10,
    )
    assert [(c.type, c.text) for c in resp.content] == [("text", "hello")]
    assert json.loads(resp.structured_content_json) == {"text": "hello"}
    assert (resp.server, resp.tool, resp.is_error, resp.truncated) == ("fixture", "echo", False, False)


@pytest.mark.parametrize("budget", [0, 2000])
async def test_a_result_with_a_lone_surrogate_arrives_with_the_replacement_character(
    stub: Any, budget: int
) -> None:
    # Valid JSON from the server ("\\ud800"), but not valid Unicode: protobuf refused the string,
    # and the call failed. Each such character arrives as U+FFFD, wherever the result has text.
    resp = await stub.CallTool(
        pb.CallToolRequest(server="fixture", tool="lone_surrogate", result_budget_tokens=budget), timeout=10
    )
    assert [(c.type, c.text) for c in resp.content] == [("text", "a\ufffdb")]
    assert json.loads(resp.structured_content_json) == {"text": "a\ufffdb"}
    assert json.loads(resp.meta_json) == {"note": "\ufffd"}
    assert not resp.is_error


async def test_a_tool_error_reaches_the_caller_with_the_servers_own_text(stub: Any) -> None:
    resp = await stub.CallTool(
        pb.CallToolRequest(
            server="fixture", tool="fail", arguments_json='{"message": "city must be a string"}'
        ),
        timeout=10,
    )
    assert resp.is_error
    assert resp.content[0].text == "city must be a string"


@pytest.mark.parametrize("arguments", ["[1, 2]", '"text"', "{not json", "42"])
async def test_arguments_that_are_not_a_json_object_are_invalid(stub: Any, arguments: str) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.CallTool(
            pb.CallToolRequest(server="fixture", tool="echo", arguments_json=arguments), timeout=5
        )
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_unknown_tools_and_servers_are_not_found(stub: Any) -> None:
    for request in (
        pb.CallToolRequest(server="fixture", tool="nope"),
        pb.CallToolRequest(server="nope", tool="echo"),
        pb.CallToolRequest(llm_name="fixture_echo"),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.CallTool(request, timeout=5)
        assert err.value.code() == grpc.StatusCode.NOT_FOUND


async def test_an_unknown_tool_is_not_found_naming_the_closest_tools_in_the_status(stub: Any) -> None:
    expected = [
        (pb.CallToolRequest(llm_name="fixture_echo"), "unknown tool 'fixture_echo' (closest: fixture__echo"),
        (
            pb.CallToolRequest(server="fixture", tool="ecko"),
            "unknown tool 'ecko' on server 'fixture' (closest: echo",
        ),
    ]
    for request, message in expected:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.CallTool(request, timeout=5)
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
        assert (err.value.details() or "").startswith(message), err.value.details()


async def test_a_call_to_a_server_that_is_down_is_unavailable(pool: McpPool, stub: Any) -> None:
    await _until_failed(pool, stub, "dead")
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.CallTool(pb.CallToolRequest(server="dead", tool="echo"), timeout=5)
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE


async def test_a_call_timeout_is_deadline_exceeded_and_cancels_the_request_on_the_server(
    stub: Any, tmp_path: Path
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.CallTool(
            pb.CallToolRequest(server="fixture", tool="hang", timeout_seconds=0.3), timeout=10
        )
    assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert len(await wait_for_lines(tmp_path / "cancelled.log", 1)) == 1
    ok = await stub.CallTool(pb.CallToolRequest(server="fixture", tool="echo"), timeout=10)
    assert not ok.is_error


async def test_the_grpc_deadline_bounds_the_call_and_cancels_it_on_the_server(
    stub: Any, tmp_path: Path
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.CallTool(pb.CallToolRequest(server="fixture", tool="hang"), timeout=0.5)
    assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert len(await wait_for_lines(tmp_path / "cancelled.log", 1)) == 1


async def test_a_cancelled_grpc_call_is_cancelled_on_the_server(stub: Any, tmp_path: Path) -> None:
    call = stub.CallTool(pb.CallToolRequest(server="fixture", tool="hang"), timeout=30)
    # Cancel only once the MCP server has the request, so there is something to cancel.
    assert await wait_for_lines(tmp_path / "called.log", 1) == ["hang"]
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert len(await wait_for_lines(tmp_path / "cancelled.log", 1)) == 1


async def test_an_oversized_result_is_truncated_with_a_marker(stub: Any) -> None:
    resp = await stub.CallTool(
        pb.CallToolRequest(server="fixture", tool="big", arguments_json='{"size": 100000}'), timeout=10
    )
    assert resp.truncated
    assert len(resp.content[-1].text.encode()) <= 4096
    assert "[toolscout: result truncated: 100000 bytes exceed the 4096-byte limit" in resp.content[-1].text


async def test_an_oversized_result_is_rejected_in_reject_mode(tmp_path: Path) -> None:
    running = await build_server(
        _config(tmp_path, result_overflow="reject"), listen="127.0.0.1:0", metrics_port=-1
    )
    try:
        async with grpc.aio.insecure_channel(running.address) as channel:
            stub = mcp_pool_pb2_grpc.McpPoolStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.CallTool(
                    pb.CallToolRequest(server="fixture", tool="big", arguments_json='{"size": 100000}'),
                    timeout=10,
                )
    finally:
        await running.stop(0.5)
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


async def test_watch_catalog_streams_the_snapshot_then_list_changed_updates(stub: Any) -> None:
    stream = stub.WatchCatalog(pb.WatchCatalogRequest(), timeout=30)
    first = await asyncio.wait_for(stream.read(), 10)
    assert "fixture__echo" in [t.llm_name for t in first.tools]
    assert list(first.changed_servers) == []
    await stub.CallTool(pb.CallToolRequest(server="fixture", tool="add_tool"), timeout=10)
    update = await asyncio.wait_for(stream.read(), 10)
    assert list(update.changed_servers) == ["fixture"]
    assert "fixture__extra" in [t.llm_name for t in update.tools]
    assert update.catalog_version != first.catalog_version
    called = await stub.CallTool(pb.CallToolRequest(llm_name="fixture__extra"), timeout=10)
    assert called.content[0].text == "extra called"
    stream.cancel()


async def test_watch_catalog_with_the_current_version_waits_for_the_next_change(stub: Any) -> None:
    version = (await stub.ListTools(pb.ListToolsRequest(), timeout=5)).catalog_version
    stream = stub.WatchCatalog(pb.WatchCatalogRequest(known_version=version), timeout=30)
    await stub.CallTool(pb.CallToolRequest(server="fixture", tool="add_tool"), timeout=10)
    update = await asyncio.wait_for(stream.read(), 10)
    assert update.catalog_version != version
    assert list(update.changed_servers) == ["fixture"]
    stream.cancel()


async def test_list_servers_tells_when_a_down_server_is_tried_next(pool: McpPool, stub: Any) -> None:
    dead = await _until_failed(pool, stub, "dead")
    assert dead.next_retry_unix > dead.state_since_unix
    fixture = next(
        s for s in (await stub.ListServers(pb.ListServersRequest(), timeout=5)).servers if s.name == "fixture"
    )
    assert fixture.next_retry_unix == 0


@pytest.mark.parametrize("seconds", [float("inf"), float("nan"), -1.0])
async def test_a_timeout_that_is_not_a_finite_non_negative_number_is_invalid(
    stub: Any, tmp_path: Path, seconds: float
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.CallTool(
            pb.CallToolRequest(server="fixture", tool="echo", timeout_seconds=seconds), timeout=10
        )
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "timeout_seconds" in (err.value.details() or "")
    assert not (tmp_path / "called.log").exists()


@pytest.mark.parametrize("depth", [100, 100_000])
async def test_arguments_nested_too_deeply_are_invalid(stub: Any, depth: int) -> None:
    arguments = '{"a":' + "[" * depth + "]" * depth + "}"
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.CallTool(
            pb.CallToolRequest(server="fixture", tool="echo", arguments_json=arguments), timeout=10
        )
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "nested deeper than" in (err.value.details() or "")


def _raw(channel: grpc.aio.Channel, method: str, streaming: bool = False) -> Any:
    path = f"/toolscout.mcp_pool.v1.McpPool/{method}"
    # Identity serializers: the bytes go on the wire exactly as given.
    if streaming:
        return channel.unary_stream(path, request_serializer=None, response_deserializer=None)
    return channel.unary_unary(path, request_serializer=None, response_deserializer=None)


MALFORMED = [b"\xff\xff\xff\xff", b"\x0a\x05ab", b"\x0a\x02\xc3\x28", b"\x08" + b"\xff" * 11]


@pytest.mark.parametrize("payload", MALFORMED, ids=["garbage", "truncated", "bad-utf8", "bad-varint"])
@pytest.mark.parametrize(
    ("method", "streaming"), [("CallTool", False), ("ListTools", False), ("WatchCatalog", True)]
)
async def test_a_malformed_request_is_invalid_argument_with_a_fixed_message_and_no_traceback(
    server: RunningServer, payload: bytes, method: str, streaming: bool, caplog: pytest.LogCaptureFixture
) -> None:
    async with grpc.aio.insecure_channel(server.address) as channel:
        call = _raw(channel, method, streaming)

        async def send() -> None:
            if streaming:
                async for _ in call(payload, timeout=10):
                    pass
            else:
                await call(payload, timeout=10)

        with pytest.raises(grpc.aio.AioRpcError) as err:
            await send()
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.details() == "malformed request: not a valid protobuf message for this method"
    assert [r for r in caplog.records if r.exc_info or r.levelname in ("ERROR", "CRITICAL")] == []


async def test_a_malformed_request_without_a_token_is_refused_before_it_is_decoded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLSCOUT_AUTH_TOKEN", "s3cret-token-for-tests")
    running = await build_server(_config(tmp_path), listen="127.0.0.1:0", metrics_port=-1)
    try:
        async with grpc.aio.insecure_channel(running.address) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await _raw(channel, "CallTool")(MALFORMED[0], timeout=10)
    finally:
        await running.stop(0.5)
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_call_tool_with_progress_ends_with_the_result_and_fails_as_call_tool_does(
    pool: McpPool, stub: Any
) -> None:
    events = [
        e
        async for e in stub.CallToolWithProgress(
            pb.CallToolRequest(server="fixture", tool="echo", arguments_json='{"text": "hi"}'), timeout=10
        )
    ]
    assert [e.WhichOneof("event") for e in events] == ["result"]
    assert events[0].result.content[0].text
    with pytest.raises(grpc.aio.AioRpcError) as unknown:
        async for _ in stub.CallToolWithProgress(
            pb.CallToolRequest(server="fixture", tool="nope"), timeout=5
        ):
            pass
    assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
    await _until_failed(pool, stub, "dead")
    call = stub.CallToolWithProgress(pb.CallToolRequest(server="dead", tool="echo"), timeout=5)
    with pytest.raises(grpc.aio.AioRpcError) as down:
        async for _ in call:
            pass
    assert down.value.code() == grpc.StatusCode.UNAVAILABLE
    assert ("toolscout-not-sent", "1") in tuple(down.value.trailing_metadata() or ())
