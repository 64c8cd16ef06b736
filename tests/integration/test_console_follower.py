"""The console's catalog follower over real gRPC pool shards (the client library's FakePool): one
WatchCatalog stream per shard, every change counted, a lost shard followed again, close ends the
waits."""

from __future__ import annotations

import asyncio

from toolscout.client import AsyncShardedPoolClient, Tool
from toolscout.client.testing import FakePool

from mcp_gateway_svc.console.data import CatalogFollower

WITHIN = 10.0  # seconds any one wait may take (a missed change fails the test, it does not hang)


def _tool(server: str, name: str) -> Tool:
    return Tool(server=server, name=name, llm_name=f"{server}__{name}")


async def _until(follower: CatalogFollower, at_least: int) -> int:
    seen = follower.changes
    async with asyncio.timeout(WITHIN):
        while seen < at_least:
            seen = await follower.wait(seen, WITHIN)
    return seen


async def test_changes_on_every_shard_are_counted_and_close_ends_every_wait() -> None:
    first, second = FakePool([_tool("a", "x")]), FakePool([_tool("b", "y")])
    async with first.serve() as one, second.serve() as two:
        pool = AsyncShardedPoolClient.connect([one, two])
        follower = CatalogFollower(pool)
        try:
            seen = await _until(follower, 2)  # each shard's first snapshot
            second.publish([_tool("b", "y"), _tool("b", "z")], "v2", ["b"])
            seen = await _until(follower, seen + 1)
            first.publish([], "v2", ["a"])
            seen = await _until(follower, seen + 1)
            assert seen == follower.changes
        finally:
            await follower.close()
            await pool.close()
        async with asyncio.timeout(WITHIN):
            assert await follower.wait(seen, 3600.0) == follower.changes


async def test_a_shard_that_goes_away_counts_as_a_change_and_is_followed_again() -> None:
    fake = FakePool([_tool("a", "x")])
    target = await fake.start()
    pool = AsyncShardedPoolClient.connect([target])
    follower = CatalogFollower(pool)
    try:
        seen = await _until(follower, 1)
        await fake.stop()
        seen = await _until(follower, seen + 1)  # the broken stream
        back = FakePool([_tool("a", "x"), _tool("a", "w")], catalog_version="v2")
        await back.start(target)
        try:
            # Each failed attempt counts too; the follower keeps trying until the shard answers,
            # and its first snapshot is a change.
            async with asyncio.timeout(WITHIN):
                while not back.script.attempts["WatchCatalog"]:
                    seen = await follower.wait(seen, WITHIN)
        finally:
            await back.stop()
    finally:
        await follower.close()
        await pool.close()
