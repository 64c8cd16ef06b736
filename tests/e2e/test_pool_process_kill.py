"""A pool process killed while a call is in flight: the call ran once, and nobody is told "not sent".

gRPC answers ``UNAVAILABLE`` when the connection dies mid-call, the same code the pool uses for a
call it did not send. Only the pool's explicit mark proves "not sent" (issue 19, item 1). Every
service here is a ``toolscout serve`` process on 127.0.0.1: one unsharded pool, or three shards
(``--shard K/3``). The MCP server is the misbehaving fixture, whose ``hang`` tool (a write: not
annotated) logs each call as it arrives and never answers, so it is in flight when the pool
process is SIGKILLed.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from toolscout import client as tc

from tests.support.fake_provider import FakeProvider, RecordedRequest, Reply, ScriptedCall
from tests.support.mcp_servers import misbehaving_config, wait_for_lines
from tests.support.sharded_stack import ShardedStack, running_sharded_stack
from toolscout_kit.config import parse_config
from toolscout_kit.shards import placement_for

# Every service here is a `toolscout serve` process, killed and started again: end to end.
pytestmark = pytest.mark.e2e

WAIT = 60.0
# Transport text gRPC writes for a dead connection: never for the LLM.
_TRANSPORT_WORDS = ("Socket closed", "Stream removed", "Connection reset", "unavailable", "ipv4:")


def _document(tmp: Path, provider_url: str = "http://127.0.0.1:9/v1") -> dict[str, Any]:
    return {
        "clients": {
            "oai": {"provider": "openai", "base_url": provider_url, "api_key": "k", "max_retries": 0}
        },
        "models": {"gpt": {"client": "oai", "model": "gpt-test"}},
        "servers": {
            "slow": misbehaving_config("--call-log", str(tmp / "slow.calls")),
            "other": misbehaving_config(),
        },
    }


def _owner(stack: ShardedStack, server: str) -> int:
    if stack.unsharded:
        return 0
    config = parse_config(stack.document, base_dir=stack.tmp)
    return placement_for(config, stack.count).owners(server)[0]


def _pool_client(stack: ShardedStack) -> tc.AsyncShardedPoolClient:
    shards = max(stack.count, 1)
    return tc.AsyncShardedPoolClient.connect([stack.shard_address(k) for k in range(shards)])


@pytest.mark.parametrize("shards", [0, 3], ids=["unsharded", "three-shards"])
async def test_a_pool_process_killed_mid_call_gives_outcome_unknown_and_the_tool_ran_once(
    tmp_path: Path, shards: int
) -> None:
    async with running_sharded_stack(tmp_path, _document(tmp_path), shards=shards) as stack:
        owner = _owner(stack, "slow")
        # Through the sharded client (what the orchestrator uses) and a plain one to the owner.
        async with (
            _pool_client(stack) as pool,
            tc.AsyncPoolClient.connect(stack.shard_address(owner)) as plain,
        ):
            clients: list[tc.AsyncShardedPoolClient | tc.AsyncPoolClient] = [pool, plain]
            for n, client in enumerate(clients, start=1):
                if n > 1:
                    await stack.start_pool(owner)
                call = asyncio.ensure_future(client.call_tool("slow__hang", {}, deadline=WAIT))
                assert len(await wait_for_lines(tmp_path / "slow.calls", n, within=WAIT)) == n
                await stack.kill(stack.pools[owner])
                with pytest.raises(tc.OutcomeUnknownError) as lost:
                    await call
                assert "may or may not have run" in lost.value.message
                assert (tmp_path / "slow.calls").read_text().splitlines() == ["hang"] * n


def _call_slow_then_answer(request: RecordedRequest) -> Reply:
    last = request.body["messages"][-1]
    if last["role"] == "user":
        return Reply.calls(ScriptedCall("slow__hang", {}))
    return Reply.answer("done")


@pytest.mark.parametrize("shards", [0, 3], ids=["unsharded", "three-shards"])
async def test_a_chat_whose_pool_process_dies_mid_call_tells_the_llm_it_may_have_run(
    tmp_path: Path, shards: int
) -> None:
    async with FakeProvider() as fake:
        fake.responder = _call_slow_then_answer
        document = _document(tmp_path, fake.openai_base_url)
        async with running_sharded_stack(tmp_path, document, shards=shards, orchestrator=True) as stack:
            assert stack.orchestrator is not None
            async with tc.AsyncOrchestratorClient.connect(stack.orchestrator.address) as orchestrator:
                chat = asyncio.ensure_future(orchestrator.chat("run it", model="gpt", deadline=WAIT))
                assert await wait_for_lines(tmp_path / "slow.calls", 1, within=WAIT) == ["hang"]
                await stack.kill(stack.pools[_owner(stack, "slow")])
                result = await chat
        tool_message = fake.requests[-1].body["messages"][-1]
    assert (tmp_path / "slow.calls").read_text().splitlines() == ["hang"]
    assert tool_message["role"] == "tool"
    assert "may or may not have run" in tool_message["content"]
    assert not [word for word in _TRANSPORT_WORDS if word in tool_message["content"]]
    assert result.messages[-1].content == "done"
    # The model was asked once more (with the result), and the tool was not called again.
    assert len(fake.requests) == 2


def _echo_the_named_tool(request: RecordedRequest) -> Reply:
    last = request.body["messages"][-1]
    if last["role"] == "user":
        return Reply.calls(ScriptedCall(last["content"].split()[-1], {"text": "hello"}))
    return Reply.answer(f"result: {last['content']}")


async def _server_ready(address: str, server: str) -> None:
    async with tc.AsyncPoolClient.connect(address) as shard:
        async with asyncio.timeout(WAIT):
            while True:
                states = {s.name: s.state for s in await shard.list_servers()}
                if states.get(server) == "ready":
                    return
                # Another process: no event to wait on; a bounded poll.
                await asyncio.sleep(0.05)


@pytest.mark.parametrize("shards", [0, 3], ids=["unsharded", "three-shards"])
async def test_a_chat_right_after_a_pool_process_restarts_reaches_it(tmp_path: Path, shards: int) -> None:
    """Issue 19, item 6: the shard is READY, so the orchestrator's channel must not still be in its
    reconnect backoff saying "not reachable"."""
    async with FakeProvider() as fake:
        fake.responder = _echo_the_named_tool
        document = _document(tmp_path, fake.openai_base_url)
        async with running_sharded_stack(tmp_path, document, shards=shards, orchestrator=True) as stack:
            assert stack.orchestrator is not None
            owner = _owner(stack, "other")
            async with tc.AsyncOrchestratorClient.connect(stack.orchestrator.address) as orchestrator:
                first = await orchestrator.chat("call other__echo", model="gpt", deadline=WAIT)
                assert first.messages[-1].content == "result: hello"
                await stack.kill(stack.pools[owner])
                down = await orchestrator.chat("call other__echo", model="gpt", deadline=WAIT)
                assert "hello" not in down.messages[-1].content
                await stack.start_pool(owner)
                await _server_ready(stack.shard_address(owner), "other")
                again = await orchestrator.chat("call other__echo", model="gpt", deadline=WAIT)
    assert again.messages[-1].content == "result: hello"
