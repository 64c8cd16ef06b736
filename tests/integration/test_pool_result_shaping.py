"""Result shaping through the pool over real gRPC, with the real npm server-everything over stdio:
budgets, previews with a handle, ReadResult bound to its caller, expiry, sharded routing."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from toolscout import client as tc

from mcp_pool_svc.pool import McpPool
from mcp_pool_svc.server import build_server
from tests.support.mcp_servers import everything_bin, live_descendants, wait_until_gone
from toolscout_kit.config import parse_config
from toolscout_kit.server import RunningServer
from toolscout_kit.tokens import count_tokens

REPO = Path(__file__).resolve().parents[2]
# A real, long text: this repository's README (about 50,000 tokens), echoed back by the server.
README = (REPO / "README.md").read_text(encoding="utf-8")


def _config(tmp_path: Path, **results: Any) -> Any:
    exe = str(everything_bin())
    return parse_config(
        {
            "servers": {
                "everything": {"command": exe, "args": ["stdio"]},
                "small": {"command": exe, "args": ["stdio"], "result_budget": 300},
            },
            "toolscout": {"pool": {"max_result_bytes": 4_000_000}, "results": results},
        },
        base_dir=tmp_path,
    )


@pytest.fixture
async def running(tmp_path: Path) -> AsyncIterator[RunningServer]:
    before = live_descendants()
    config = _config(tmp_path, handle_ttl=600)
    pool = McpPool(config)
    running = await build_server(config, listen="127.0.0.1:0", metrics_port=-1, pool=pool)
    await pool.start(wait=60)
    try:
        yield running
    finally:
        await running.stop(0.5)
    assert await wait_until_gone(live_descendants() - before) == set()


@pytest.fixture
async def client(running: RunningServer) -> AsyncIterator[tc.AsyncPoolClient]:
    async with tc.AsyncPoolClient.connect(running.address) as pool:
        yield pool


def _echo(
    budget: int, principal: str = "alice", conversation: str = "c1", server: str = "everything"
) -> tc.CallRequest:
    return tc.CallRequest(
        server=server,
        tool="echo",
        arguments_json=json.dumps({"message": README}),
        result_budget_tokens=budget,
        principal=principal,
        conversation=conversation,
        preview_tokens=500,
    )


async def test_a_result_over_the_budget_becomes_a_preview_with_a_handle(client: tc.AsyncPoolClient) -> None:
    result = await client.call(_echo(2000))
    (preview,) = result.content
    assert result.result_handle.startswith("r0-")
    assert result.result_handle in preview.text
    assert count_tokens(preview.text) == result.tokens_delivered <= 500
    assert result.tokens_returned > 20 * result.tokens_delivered
    assert result.handle_expires_unix > 0


async def test_without_a_budget_the_result_comes_whole(client: tc.AsyncPoolClient) -> None:
    result = await client.call(_echo(0))
    assert result.result_handle == ""
    assert README in result.text
    assert result.tokens_returned == 0


async def test_deferred_token_counts_come_after_the_answer_and_are_the_ones_counted_before(
    client: tc.AsyncPoolClient,
) -> None:
    # The gateway's way (defer_token_counts): a result that fits unchanged is answered without
    # its counts, and the pool counts it afterwards for its status and metrics.
    # (3,000 characters of the README: their UTF-8 length, the bound, is within the budget)
    request = dataclasses.replace(_echo(4000), arguments_json=json.dumps({"message": README[:3000]}))
    counted = await client.call(request)
    assert counted.tokens_returned == counted.tokens_delivered > 0
    (before,) = [s for s in await client.list_servers() if s.name == "everything"]
    assert before.result_tokens_returned == counted.tokens_returned

    deferred = await client.call(dataclasses.replace(request, defer_token_counts=True))
    assert (deferred.tokens_returned, deferred.tokens_delivered, deferred.result_handle) == (0, 0, "")
    assert deferred.content == counted.content
    assert deferred.structured_content_json == counted.structured_content_json
    (after,) = [s for s in await client.list_servers() if s.name == "everything"]
    assert after.result_tokens_returned == 2 * counted.tokens_returned
    assert after.result_tokens_delivered == 2 * counted.tokens_delivered


async def test_deferred_token_counts_leave_a_result_over_the_budget_shaped_and_counted(
    client: tc.AsyncPoolClient,
) -> None:
    result = await client.call(dataclasses.replace(_echo(2000), defer_token_counts=True))
    assert result.result_handle.startswith("r0-")
    assert count_tokens(result.content[0].text) == result.tokens_delivered <= 500
    assert result.tokens_returned > 20 * result.tokens_delivered


async def test_read_result_greps_pages_and_stays_within_its_budget(client: tc.AsyncPoolClient) -> None:
    result = await client.call(_echo(2000))
    last_heading = [line for line in README.splitlines() if line.startswith("## ")][-1]
    found = await client.read_result(
        tc.ReadRequest(result.result_handle, "alice", "c1", pattern=last_heading, context_lines=1)
    )
    assert last_heading in found.text
    assert found.tokens <= 2000
    assert (found.server, found.tool) == ("everything", "echo")
    page = await client.read_result(
        tc.ReadRequest(result.result_handle, "alice", "c1", offset=0, budget_tokens=300)
    )
    assert page.tokens <= 300
    assert page.next_offset > 0


async def test_a_handle_read_by_another_principal_or_conversation_is_not_found(
    client: tc.AsyncPoolClient,
) -> None:
    result = await client.call(_echo(2000))
    for principal, conversation in (("mallory", "c1"), ("alice", "c2")):
        with pytest.raises(tc.NotFoundError) as caught:
            await client.read_result(tc.ReadRequest(result.result_handle, principal, conversation))
        assert "no longer available" not in str(caught.value)


async def test_a_server_result_budget_bounds_the_callers_budget(client: tc.AsyncPoolClient) -> None:
    result = await client.call(_echo(4000, server="small"))
    assert result.tokens_delivered <= 300
    assert result.result_handle


async def test_bad_budgets_and_reads_are_invalid_arguments(client: tc.AsyncPoolClient) -> None:
    with pytest.raises(tc.InvalidArgumentError, match="result_budget_tokens"):
        await client.call(_echo(10))
    result = await client.call(_echo(2000))
    with pytest.raises(tc.InvalidArgumentError, match=r"JMESPath|not JSON"):
        await client.read_result(tc.ReadRequest(result.result_handle, "alice", "c1", path="a[?"))


async def test_an_expired_handle_says_so_and_what_to_run_again(tmp_path: Path) -> None:
    now = [1000.0]
    config = _config(tmp_path, handle_ttl=60)
    pool = McpPool(config)
    pool._results._clock = lambda: now[0]  # the store's clock: the process edge patched
    running = await build_server(config, listen="127.0.0.1:0", metrics_port=-1, pool=pool)
    await pool.start(wait=60)
    try:
        async with tc.AsyncPoolClient.connect(running.address) as client:
            result = await client.call(_echo(2000))
            now[0] += 61
            with pytest.raises(tc.NotFoundError, match=r"no longer available: it expired.*Call 'echo'"):
                await client.read_result(tc.ReadRequest(result.result_handle, "alice", "c1"))
            with pytest.raises(tc.NotFoundError) as other:
                await client.read_result(tc.ReadRequest(result.result_handle, "mallory", "c1"))
            assert "expired" not in str(other.value)
    finally:
        await running.stop(0.5)


async def test_the_sharded_client_reads_a_handle_on_the_shard_that_keeps_it(running: RunningServer) -> None:
    async with tc.AsyncPoolClient.connect(running.address) as shard0:
        sharded = tc.AsyncShardedPoolClient([shard0])
        result = await sharded.call(_echo(2000))
        read = await sharded.read_result(
            tc.ReadRequest(result.result_handle, "alice", "c1", pattern="toolscout")
        )
        assert "matching line" in read.text
        with pytest.raises(tc.NotFoundError):
            await sharded.read_result(tc.ReadRequest("r7-unknown", "alice", "c1"))
        with pytest.raises(tc.NotFoundError):
            await sharded.read_result(tc.ReadRequest("not-a-handle", "alice", "c1"))


async def test_a_shaped_result_past_max_result_bytes_is_kept_whole_and_read_to_its_end(
    tmp_path: Path,
) -> None:
    exe = str(everything_bin())
    config = parse_config(
        {
            "servers": {"everything": {"command": exe, "args": ["stdio"]}},
            # The README is ~200 KB: past this cap an unshaped result is cut, a shaped one is kept.
            "toolscout": {"pool": {"max_result_bytes": 50_000}, "results": {"max_kept_bytes": 4_000_000}},
        },
        base_dir=tmp_path,
    )
    before = live_descendants()
    pool = McpPool(config)
    running = await build_server(config, listen="127.0.0.1:0", metrics_port=-1, pool=pool)
    await pool.start(wait=60)
    last_line = next(line for line in reversed(README.splitlines()) if len(line.split()) >= 4)
    try:
        async with tc.AsyncPoolClient.connect(running.address) as client:
            cut = await client.call(_echo(0))
            shaped = await client.call(_echo(2000))
            found = await client.read_result(
                tc.ReadRequest(shaped.result_handle, principal="alice", conversation="c1", pattern=last_line)
            )
    finally:
        await running.stop(0.5)
    assert await wait_until_gone(live_descendants() - before) == set()
    assert cut.truncated
    assert last_line not in cut.text
    assert not shaped.truncated
    assert last_line in found.text
