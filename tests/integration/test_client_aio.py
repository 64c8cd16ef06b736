"""The async clients against fake services on a real grpc.aio server (127.0.0.1:0)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from toolscout import client as tc

from tests.support.fake_services import FakeStack, FakeState, fake_stack
from tests.support.mcp_servers import free_port


@pytest.fixture
async def stack() -> AsyncIterator[FakeStack]:
    async with fake_stack() as running:
        yield running


@pytest.fixture
async def ts(stack: FakeStack) -> AsyncIterator[tc.AsyncToolscoutClient]:
    async with tc.AsyncToolscoutClient.connect(
        pool=stack.target, discovery=stack.target, orchestrator=stack.target
    ) as client:
        yield client


async def test_pool_methods_return_typed_results(ts: tc.AsyncToolscoutClient) -> None:
    servers = await ts.pool.list_servers()
    assert [(s.name, s.state) for s in servers] == [("time", "ready"), ("weather", "reconnecting")]
    assert servers[1].last_error == "connection refused"
    catalog = await ts.pool.list_tools(["time"])
    assert [t.llm_name for t in catalog.tools] == ["time_get_current_time"]
    assert catalog.catalog_version == "v1"
    result = await ts.pool.call_tool("time_get_current_time", {"timezone": "UTC"})
    assert result.text == 'called time_get_current_time with {"timezone":"UTC"}'
    assert result.structured_content == {"ok": True}
    assert (result.server, result.tool, result.is_error) == ("time", "get_current_time", False)


async def test_discovery_methods_return_typed_results(ts: tc.AsyncToolscoutClient) -> None:
    plan = await ts.discovery.plan_tools(include_deferred_names=True)
    assert plan.deferred_tool_names == ("weather_forecast",)
    assert plan.search_tool is not None
    assert plan.search_tool.llm_name == "search_tools"
    assert plan.tokens.saved_tokens == 180
    assert plan.manifest_placement == "tool_description"
    hits = await ts.discovery.search_tools("weather in paris")
    assert hits.mode == "query"
    assert [m.tool.llm_name for m in hits.matches] == ["weather_forecast"]
    manifest = await ts.discovery.get_manifest("basic")
    assert (manifest.tokens, manifest.budget_tokens, manifest.deferred_tools) == (9, 2000, 1)


async def test_orchestrator_methods_return_typed_results(ts: tc.AsyncToolscoutClient) -> None:
    models = await ts.orchestrator.list_models()
    assert [(m.name, m.provider) for m in models] == [("gpt", "openai")]
    toolsets = await ts.orchestrator.list_toolsets()
    assert toolsets[0].servers[0] == tc.ToolsetServer(server="time", mode="all")
    result = await ts.orchestrator.chat("hello", model="gpt", discovered_tools=["a"])
    assert result.text == "echo: hello"
    assert result.loaded_tools == ("a", "weather_forecast")
    assert result.stop_reason == "completed"
    assert result.stats.discovery.tokens_saved == 360


async def test_stream_chat_yields_events_in_order_ending_with_the_final_result(
    ts: tc.AsyncToolscoutClient,
) -> None:
    events = [e async for e in ts.orchestrator.stream_chat("hi", model="gpt")]
    kinds = [type(e).__name__ for e in events]
    assert kinds == [
        "ToolCallStarted",
        "ToolsDiscovered",
        "ToolCallFinished",
        "TextDelta",
        "TextDelta",
        "UsageUpdate",
        "ChatFinished",
    ]
    assert "".join(e.text for e in events if isinstance(e, tc.TextDelta)) == "echo: hi"
    final = events[-1]
    assert isinstance(final, tc.ChatFinished)
    assert final.result.text == "echo: hi"


async def test_stopping_a_stream_early_cancels_it_on_the_server(
    stack: FakeStack, ts: tc.AsyncToolscoutClient
) -> None:
    stream = ts.pool.watch_catalog()
    first = await anext(stream)
    assert first.catalog_version == "v1"
    await stream.aclose()
    await asyncio.wait_for(stack.state.cancelled.wait(), 30)  # bounded: generous under load


async def test_watch_catalog_streams_snapshots_with_changed_servers(ts: tc.AsyncToolscoutClient) -> None:
    seen = []
    async for snapshot in ts.pool.watch_catalog():
        seen.append(snapshot)
        if len(seen) == 2:
            break
    assert [s.catalog_version for s in seen] == ["v1", "v2"]
    assert seen[1].changed_servers == ("time",)
    assert len(seen[1].tools) == 2


CODES = [c for c in grpc.StatusCode if c is not grpc.StatusCode.OK]


@pytest.mark.parametrize("code", CODES, ids=[c.name for c in CODES])
async def test_every_status_code_from_a_server_raises_its_exception(
    stack: FakeStack, code: grpc.StatusCode
) -> None:
    stack.state.fail("ListModels", code, details="what went wrong")
    async with tc.AsyncOrchestratorClient.connect(stack.target, max_attempts=1) as client:
        with pytest.raises(tc.ToolscoutClientError) as info:
            await client.list_models()
    assert info.value.code is code
    assert info.value.message == "what went wrong"
    assert info.value.method == "/toolscout.orchestrator.v1.Orchestrator/ListModels"
    assert type(info.value) is type(tc.error_for_code(code, ""))


async def test_unavailable_is_retried_by_the_channel_until_the_call_succeeds(stack: FakeStack) -> None:
    stack.state.fail("ListServers", grpc.StatusCode.UNAVAILABLE, times=3)
    async with tc.AsyncPoolClient.connect(stack.target) as pool:
        servers = await pool.list_servers()
    assert len(servers) == 2
    assert stack.state.attempts["ListServers"] == 4


async def test_retries_stop_at_max_attempts_and_raise_unavailable(stack: FakeStack) -> None:
    stack.state.fail("ListTools", grpc.StatusCode.UNAVAILABLE, times=5)
    async with tc.AsyncPoolClient.connect(stack.target, max_attempts=2) as pool:
        with pytest.raises(tc.UnavailableError):
            await pool.list_tools()
    assert stack.state.attempts["ListTools"] == 2


async def test_a_tool_call_is_never_retried_by_the_channel(stack: FakeStack) -> None:
    # UNAVAILABLE from a pool may come after the tool ran: a replay would run it twice. Without
    # the pool's "not sent" mark it is what gRPC says when a connection dies mid-call.
    stack.state.fail("CallTool", grpc.StatusCode.UNAVAILABLE, times=5)
    async with tc.AsyncPoolClient.connect(stack.target) as pool:
        with pytest.raises(tc.OutcomeUnknownError, match="may or may not have run") as lost:
            await pool.call_tool("time_get_current_time")
    assert stack.state.attempts["CallTool"] == 1
    assert "scripted" not in lost.value.message


async def test_an_unavailable_marked_not_sent_stays_unavailable_and_says_so(stack: FakeStack) -> None:
    stack.state.fail(
        "CallTool", grpc.StatusCode.UNAVAILABLE, details="server down", trailing=tc.NOT_SENT_METADATA
    )
    async with tc.AsyncPoolClient.connect(stack.target) as pool:
        with pytest.raises(tc.UnavailableError, match="server down") as refused:
            await pool.call_tool("time_get_current_time")
    assert refused.value.not_sent
    assert stack.state.attempts["CallTool"] == 1


async def test_a_call_to_a_pool_that_does_not_answer_is_not_sent_and_says_so() -> None:
    port = free_port()  # nothing listens there
    async with tc.AsyncPoolClient.connect(f"127.0.0.1:{port}") as pool:
        with pytest.raises(tc.UnavailableError, match="not reachable") as down:
            await pool.call_tool("time_get_current_time", deadline=0.5)
    assert down.value.not_sent
    assert "127.0.0.1" not in down.value.message


async def test_a_chat_is_never_retried_by_the_channel(stack: FakeStack) -> None:
    # A chat runs tools; replaying it whole would run them again.
    stack.state.fail("Chat", grpc.StatusCode.UNAVAILABLE, times=5)
    stack.state.fail("StreamChat", grpc.StatusCode.UNAVAILABLE, times=5)
    async with tc.AsyncOrchestratorClient.connect(stack.target) as orch:
        with pytest.raises(tc.UnavailableError):
            await orch.chat("hi", model="gpt")
        with pytest.raises(tc.UnavailableError):
            _ = [e async for e in orch.stream_chat("hi", model="gpt")]
    assert stack.state.attempts["Chat"] == 1
    assert stack.state.attempts["StreamChat"] == 1


@pytest.mark.parametrize(
    ("method", "call"),
    [
        ("ListServers", lambda ts: ts.pool.list_servers()),
        ("ListTools", lambda ts: ts.pool.list_tools()),
        ("PlanTools", lambda ts: ts.discovery.plan_tools()),
        ("SearchTools", lambda ts: ts.discovery.search_tools("weather")),
        ("GetManifest", lambda ts: ts.discovery.get_manifest("basic")),
        ("ListModels", lambda ts: ts.orchestrator.list_models()),
        ("ListToolsets", lambda ts: ts.orchestrator.list_toolsets()),
    ],
)
async def test_methods_without_side_effects_are_retried_on_unavailable(
    stack: FakeStack, ts: tc.AsyncToolscoutClient, method: str, call: Any
) -> None:
    stack.state.fail(method, grpc.StatusCode.UNAVAILABLE, times=2)
    await call(ts)
    assert stack.state.attempts[method] == 3


async def test_other_codes_are_never_retried(stack: FakeStack) -> None:
    stack.state.fail("SearchTools", grpc.StatusCode.INTERNAL, times=3)
    async with tc.AsyncDiscoveryClient.connect(stack.target) as discovery:
        with pytest.raises(tc.InternalError):
            await discovery.search_tools("x")
    assert stack.state.attempts["SearchTools"] == 1


async def test_a_watch_stream_is_retried_before_its_first_message_but_not_mid_stream(
    stack: FakeStack,
) -> None:
    stack.state.fail("WatchCatalog", grpc.StatusCode.UNAVAILABLE, times=1)
    async with tc.AsyncPoolClient.connect(stack.target) as pool:
        watch = pool.watch_catalog()
        first = await asyncio.wait_for(anext(watch), 10)
        assert first.catalog_version == "v1"
        await watch.aclose()
        assert stack.state.attempts["WatchCatalog"] == 2

        stack.state.stream_fail_after = 1
        received: list[Any] = []

        async def consume() -> None:
            async for update in pool.watch_catalog():
                received.append(update)

        with pytest.raises(tc.UnavailableError, match="stream broke"):
            await asyncio.wait_for(consume(), 10)
    assert len(received) == 1
    assert stack.state.attempts["WatchCatalog"] == 3


async def test_default_deadlines_reach_the_server_and_can_be_overridden(stack: FakeStack) -> None:
    async with tc.AsyncToolscoutClient.connect(
        pool=stack.target, discovery=stack.target, orchestrator=stack.target, deadlines={"ListTools": 3.0}
    ) as ts:
        await ts.pool.list_tools()
        await ts.orchestrator.chat("x", model="gpt")
        await ts.discovery.plan_tools(deadline=1.5)
    remaining = stack.state.deadlines
    assert remaining["ListTools"] is not None
    assert 2.0 < remaining["ListTools"] <= 3.1
    assert remaining["Chat"] is not None
    assert 500 < remaining["Chat"] <= 601
    assert remaining["PlanTools"] is not None
    assert remaining["PlanTools"] <= 1.6


async def test_a_deadline_that_passes_raises_deadline_exceeded(stack: FakeStack) -> None:
    async with tc.AsyncPoolClient.connect(stack.target) as pool:
        with pytest.raises(tc.DeadlineExceededError):
            async for _ in pool.watch_catalog(deadline=0.3):
                pass


async def test_the_token_is_sent_as_bearer_metadata_on_an_insecure_channel(stack: FakeStack) -> None:
    async with tc.AsyncToolscoutClient.connect(
        pool=stack.target, discovery=stack.target, orchestrator=stack.target, token="s3cret"
    ) as ts:
        await ts.pool.list_servers(metadata=[("x-request-id", "r1")])
        _ = [e async for e in ts.orchestrator.stream_chat("hi", model="gpt")]
    for method in ("ListServers", "StreamChat"):
        assert stack.state.metadata[method][-1]["authorization"] == "Bearer s3cret"
    assert stack.state.metadata["ListServers"][-1]["x-request-id"] == "r1"


async def test_no_authorization_header_is_sent_without_a_token(
    ts: tc.AsyncToolscoutClient, stack: FakeStack
) -> None:
    await ts.pool.list_servers()
    assert "authorization" not in stack.state.metadata["ListServers"][-1]


async def test_an_unreachable_target_raises_unavailable() -> None:
    async with tc.AsyncPoolClient.connect("127.0.0.1:1", max_attempts=1) as pool:
        with pytest.raises(tc.UnavailableError):
            await pool.list_servers(deadline=5)


async def test_a_client_on_a_borrowed_channel_leaves_it_open(stack: FakeStack) -> None:
    channel = tc.create_channel(stack.target)
    async with tc.AsyncPoolClient(channel):
        pass
    # Still usable: closing the client did not close the caller's channel.
    assert len(await tc.AsyncPoolClient(channel).list_servers()) == 2
    await channel.close()


async def test_fake_state_is_fresh_per_stack() -> None:
    async with fake_stack(FakeState()) as s:
        assert s.state.attempts == {}
