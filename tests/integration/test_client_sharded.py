"""The sharded pool client against fake shards (in-process gRPC servers on 127.0.0.1:0).

Each fake shard answers CallTool for the servers it runs and refuses the others the way a pool
shard does: UNAVAILABLE marked "not sent", with the owners in the trailing metadata, or NOT_FOUND
for a name it does not know. Every call a shard executes is recorded, so "never run twice" is
counted.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from toolscout import client as tc
from toolscout.client.testing import FakePool
from toolscout.mcp_pool.v1 import mcp_pool_pb2_grpc

from toolscout_kit.config import PoolSettings, SecuritySettings
from toolscout_kit.server import RunningServer, ServiceBinding, start_server


class FakeShard(FakePool):
    """Runs ``owned`` (an ``echo`` tool each); refuses ``elsewhere`` (server -> (owners, count));
    NOT_FOUND for the rest: the client library's fake pool as one shard."""

    def __init__(
        self, index: int, owned: set[str], elsewhere: dict[str, tuple[tuple[int, ...], int]] | None = None
    ) -> None:
        async def answer(request: tc.CallRequest, tool: tc.Tool) -> tc.CallToolResult:
            text = tc.ContentBlock("text", text=f"{tool.server} on shard {index}")
            return tc.CallToolResult(content=(text,), server=tool.server)

        tools = [tc.Tool(server, "echo", f"{server}__echo") for server in sorted(owned)]
        super().__init__(tools, elsewhere=elsewhere, answer=answer)

    @property
    def executed(self) -> list[str]:
        return [tool.server for tool in self.ran]

    @property
    def refusals(self) -> int:
        return len(self.refused)

    @property
    def marked(self) -> bool:
        return self.mark_not_sent

    @marked.setter
    def marked(self, value: bool) -> None:
        self.mark_not_sent = value


async def _serve(shard: FakeShard) -> RunningServer:
    binding = ServiceBinding(
        "toolscout.mcp_pool.v1.McpPool", mcp_pool_pb2_grpc.add_McpPoolServicer_to_server, shard
    )
    return await start_server(
        [binding], PoolSettings(), SecuritySettings(), listen="127.0.0.1:0", metrics_port=-1
    )


@pytest.fixture
async def shards() -> AsyncIterator[list[tuple[FakeShard, RunningServer]]]:
    # By the hash: srv4 -> 0, srv0 -> 1, srv1 -> 2 (of 3); srv7 -> 2 of 3 and 3 of 4.
    fakes = [
        FakeShard(0, {"srv4", "all"}),
        FakeShard(1, {"srv0", "all"}, elsewhere={"memory": ((2,), 3)}),
        FakeShard(2, {"srv1", "all", "memory"}, elsewhere={"srv7": ((3,), 4)}),
        FakeShard(3, {"srv7"}),
    ]
    running = [(fake, await _serve(fake)) for fake in fakes]
    yield running
    for _, server in running:
        await server.stop(0)


def _client(
    shards: list[tuple[FakeShard, RunningServer]], count: int = 3, **kw: Any
) -> tc.AsyncShardedPoolClient:
    return tc.AsyncShardedPoolClient.connect([server.address for _, server in shards[:count]], **kw)


async def test_a_call_goes_to_the_shard_that_runs_its_server(
    shards: list[tuple[FakeShard, RunningServer]],
) -> None:
    async with _client(shards) as pool:
        for server in ("srv4", "srv0", "srv1"):
            result = await pool.call_tool("echo", {"text": "x"}, server=server)
            assert result.content[0].text.startswith(server)
    assert [fake.executed for fake, _ in shards] == [["srv4"], ["srv0"], ["srv1"], []]


async def test_a_refusal_is_sent_on_to_the_owner_it_names_and_remembered(
    shards: list[tuple[FakeShard, RunningServer]],
) -> None:
    # The client does not know "memory" is pinned to shard 2: the hash sends it to shard 1.
    async with _client(shards) as pool:
        assert pool.shard_of("memory") == 1
        first = await pool.call_tool("echo", server="memory")
        second = await pool.call_tool("echo", server="memory")
    assert first.content[0].text == second.content[0].text == "memory on shard 2"
    assert shards[2][0].executed == ["memory", "memory"]
    assert shards[1][0].executed == []
    assert shards[1][0].refusals == 1  # the second call went straight to the owner


async def test_an_unavailable_without_the_not_sent_mark_is_never_sent_on_to_another_shard(
    shards: list[tuple[FakeShard, RunningServer]],
) -> None:
    # Owners in the metadata but no mark: nothing proves shard 1 did not run it, so no re-send.
    shards[1][0].marked = False
    async with _client(shards) as pool:
        with pytest.raises(tc.OutcomeUnknownError):
            await pool.call_tool("echo", server="memory")
    assert all(fake.executed == [] for fake, _ in shards)
    assert shards[1][0].refusals == 1


async def test_a_refusal_naming_a_shard_this_client_cannot_reach_is_not_sent(
    shards: list[tuple[FakeShard, RunningServer]],
) -> None:
    async with _client(shards) as pool:
        with pytest.raises(tc.UnavailableError) as refused:
            await pool.call_tool("echo", server="srv7")
    assert tc.parse_owners(refused.value) == ((3,), 4)
    assert all(fake.executed == [] for fake, _ in shards)


async def test_with_the_address_of_new_shards_the_client_follows_a_grown_count(
    shards: list[tuple[FakeShard, RunningServer]],
) -> None:
    addresses = [server.address for _, server in shards]
    async with _client(shards, target_of=lambda k: addresses[k]) as pool:
        result = await pool.call_tool("echo", server="srv7")
    assert result.content[0].text == "srv7 on shard 3"
    assert shards[3][0].executed == ["srv7"]


async def test_an_llm_name_routes_by_its_hint_or_by_asking_shard_after_shard(
    shards: list[tuple[FakeShard, RunningServer]],
) -> None:
    async with _client(shards) as pool:
        hinted = await pool.call_tool("srv1__echo", server_hint="srv1")
        guessed = await pool.call_tool("srv0__echo")
        with pytest.raises(tc.NotFoundError):
            await pool.call_tool("nowhere__echo")
    assert hinted.content[0].text == "srv1 on shard 2"
    assert guessed.content[0].text == "srv0 on shard 1"
    assert sum(len(fake.executed) for fake, _ in shards) == 2


async def test_calls_to_a_server_on_every_shard_are_spread_over_them(
    shards: list[tuple[FakeShard, RunningServer]],
) -> None:
    async with _client(shards, placement={"all": tc.ServerPlacement(placement="all")}) as pool:
        for _ in range(9):
            await pool.call_tool("echo", server="all")
    assert [len(fake.executed) for fake, _ in shards[:3]] == [3, 3, 3]
