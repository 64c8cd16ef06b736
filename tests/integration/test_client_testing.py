"""The client library's fake pool (toolscout.client.testing) keeps the pool's contracts callers rely on."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from toolscout import client as tc
from toolscout.client.testing import FakePool, KeptResult

WAIT = 10.0


async def test_a_down_server_is_refused_not_sent_and_an_unmarked_unavailable_is_outcome_unknown() -> None:
    fake = FakePool([tc.Tool("weather", "get_forecast", "weather__get_forecast")], down={"time"})
    async with fake.serve() as target, tc.AsyncPoolClient.connect(target) as pool:
        result = await pool.call_tool("weather__get_forecast", {"city": "Oslo"})
        assert result.text == 'called weather__get_forecast with {"city":"Oslo"}'
        assert (result.server, result.tool, result.structured_content) == (
            "weather",
            "get_forecast",
            {"ok": True},
        )
        with pytest.raises(tc.UnavailableError) as refused:
            await pool.call_tool("get_current_time", server="time")
        assert refused.value.not_sent
        fake.script.fail("CallTool", grpc.StatusCode.UNAVAILABLE)
        with pytest.raises(tc.OutcomeUnknownError):
            await pool.call_tool("weather__get_forecast")
        with pytest.raises(tc.NotFoundError, match="Unknown tool 'nope__x'"):
            await pool.call_tool("nope__x")
    assert [c.request.name for c in fake.calls] == ["weather__get_forecast", "get_current_time", "nope__x"]
    # Plain calls go on the call stream, as to a pool; each counts and fails as a CallTool.
    assert all(c.streamed for c in fake.calls)
    assert fake.script.attempts["CallTool"] == 4
    assert [r.server for r in fake.refused] == ["time"]
    assert [t.llm_name for t in fake.ran] == ["weather__get_forecast"]


async def test_a_sharded_client_follows_a_refusal_to_the_owner_it_names() -> None:
    owner = FakePool([tc.Tool("memory", "recall", "memory__recall")])
    other = FakePool(elsewhere={"memory": ((1,), 2)})
    # The client believes shard 0 runs "memory": shard 0 refuses, naming shard 1, and it goes there.
    stale = {"memory": tc.ServerPlacement(shard=0)}
    async with (
        other.serve() as first,
        owner.serve() as second,
        tc.AsyncShardedPoolClient.connect([first, second], placement=stale) as pool,
    ):
        result = await pool.call_tool("recall", server="memory")
    assert result.text == "called memory__recall with {}"
    assert [r.server for r in other.refused] == ["memory"]
    assert [t.llm_name for t in owner.ran] == ["memory__recall"]


async def test_a_watcher_gets_the_catalog_then_each_published_change() -> None:
    fake = FakePool([tc.Tool("a", "x", "a__x")], catalog_version="v1")
    async with fake.serve() as target, tc.AsyncPoolClient.connect(target) as pool:
        watch = pool.watch_catalog()
        first = await asyncio.wait_for(anext(watch), WAIT)
        fake.publish([tc.Tool("a", "x", "a__x"), tc.Tool("b", "y", "b__y")], "v2", ["b"])
        second = await asyncio.wait_for(anext(watch), WAIT)
        await watch.aclose()
        listed = await pool.list_tools(["b"])
    assert (first.catalog_version, [t.llm_name for t in first.tools]) == ("v1", ["a__x"])
    assert (second.catalog_version, second.changed_servers) == ("v2", ("b",))
    assert [t.llm_name for t in listed.tools] == ["b__y"]
    await asyncio.wait_for(fake.script.cancelled.wait(), WAIT)


async def test_a_kept_result_is_read_by_its_owner_only_a_page_or_the_matching_lines() -> None:
    fake = FakePool()
    text = "\n".join(f"line {i}: {'needle' if i == 700 else 'hay'}" for i in range(1000))
    fake.keep("r0-abc", KeptResult(text, "alice", "c1", "logs", "tail"))
    async with fake.serve() as target, tc.AsyncPoolClient.connect(target) as pool:
        page = await pool.read_result(tc.ReadRequest("r0-abc", "alice", "c1", budget_tokens=100))
        found = await pool.read_result(tc.ReadRequest("r0-abc", "alice", "c1", pattern="NEEDLE"))
        with pytest.raises(tc.NotFoundError, match="no result handle 'r0-abc'"):
            await pool.read_result(tc.ReadRequest("r0-abc", "mallory", "c1"))
        with pytest.raises(tc.InvalidArgumentError):
            await pool.read_result(tc.ReadRequest("r0-abc", "alice", "c1", path="items[0]"))
    assert page.text == text[:400]
    assert page.next_offset == 400
    assert page.total_chars == len(text)
    assert (page.server, page.tool) == ("logs", "tail")
    assert found.text == "line 700: needle"
    assert found.next_offset == -1
    assert [r.principal for r in fake.reads] == ["alice", "alice", "mallory", "alice"]


async def test_a_streamed_call_past_its_deadline_is_cancelled_in_the_fake_as_in_a_pool() -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def hang(request: tc.CallRequest, tool: tc.Tool) -> tc.CallToolResult:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        raise AssertionError("unreachable")

    fake = FakePool([tc.Tool("slow", "wait", "slow__wait"), tc.Tool("time", "now", "time__now")], answer=hang)
    async with fake.serve() as target, tc.AsyncPoolClient.connect(target) as pool:
        with pytest.raises(tc.DeadlineExceededError):
            await pool.call_tool("slow__wait", deadline=0.5)
        await asyncio.wait_for(cancelled.wait(), WAIT)
        # A caller that gives up cancels its call on the stream too; the stream serves on.
        started.clear()
        cancelled.clear()
        waiting = asyncio.create_task(pool.call_tool("time__now"))
        await asyncio.wait_for(started.wait(), WAIT)
        waiting.cancel()
        await asyncio.wait_for(cancelled.wait(), WAIT)
    (first, second) = fake.calls
    assert [first.streamed, second.streamed] == [True, True]
    assert 0 < (first.time_remaining or 0) <= 0.5
