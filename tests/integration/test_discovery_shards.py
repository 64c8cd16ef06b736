"""Discovery following a sharded pool: fake shards (gRPC on 127.0.0.1:0) merged into one catalog."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from toolscout.client import AsyncPoolClient, wire
from toolscout.client.testing import FakePool

from discovery_svc.catalog import Catalog
from discovery_svc.catalog_follower import FOLLOW_PACE, MAX_FOLLOW_PAUSE, CatalogFollower, follow_pause
from tests.integration.test_discovery_grpc import fake_pool, pb_tool, start_pool

WAIT = 10.0


class Shards:
    def __init__(self) -> None:
        self.pools = [
            fake_pool([pb_tool("alpha", "a", "A."), pb_tool("both", "b", "B.")], "s0-v1"),
            fake_pool([pb_tool("beta", "b", "B."), pb_tool("both", "b", "B.")], "s1-v1"),
        ]
        self.servers: list[FakePool] = []
        self.ports: list[int] = []
        self.seen: asyncio.Queue[Catalog] = asyncio.Queue()
        self.follower: CatalogFollower | None = None

    def on_catalog(self, catalog: Catalog) -> None:
        self.seen.put_nowait(catalog)

    async def next(self) -> Catalog:
        return await asyncio.wait_for(self.seen.get(), WAIT)


@pytest.fixture
async def shards() -> AsyncIterator[Shards]:
    fixture = Shards()
    for pool in fixture.pools:
        server, port = await start_pool(pool)
        fixture.servers.append(server)
        fixture.ports.append(port)
    yield fixture
    for server in fixture.servers:
        await server.stop(0)


async def _follow(shards: Shards, **kw: object) -> tuple[asyncio.Task[None], list[AsyncPoolClient]]:
    clients = [AsyncPoolClient.connect(f"127.0.0.1:{port}") for port in shards.ports]
    follower = CatalogFollower(
        dict(enumerate(clients)),
        shards.on_catalog,
        configured=["alpha", "beta", "both"],
        initial_backoff=0.05,
        max_backoff=0.2,
        **kw,  # type: ignore[arg-type]
    )
    shards.follower = follower
    return asyncio.create_task(follower.run()), clients


def _availability(catalog: Catalog) -> dict[str, bool]:
    return {t.server: t.available for t in catalog.tools}


async def test_the_first_catalog_has_every_shard_and_each_server_once(shards: Shards) -> None:
    task, clients = await _follow(shards)
    try:
        first = await shards.next()
        assert [t.llm_name for t in first.tools] == ["alpha_a", "beta_b", "both_b"]
        assert shards.seen.empty()
        shards.pools[1].publish(
            [wire.tool(pb_tool("beta", "b", "B.")), wire.tool(pb_tool("beta", "c", "C."))], "s1-v2"
        )
        second = await shards.next()
        # "both" is still on shard 0: a server on several shards stays while one lists it.
        assert [t.llm_name for t in second.tools] == ["alpha_a", "beta_b", "beta_c", "both_b"]
        assert second.version != first.version
    finally:
        task.cancel()
        for client in clients:
            await client.close()


async def test_a_fault_in_handling_a_snapshot_does_not_end_the_following(shards: Shards) -> None:
    faults = [RuntimeError("a bug in installing the catalog")]
    failed = asyncio.Event()
    installed = shards.on_catalog

    def on_catalog(catalog: Catalog) -> None:
        if faults:
            failed.set()
            raise faults.pop()
        installed(catalog)

    shards.on_catalog = on_catalog  # type: ignore[method-assign]
    task, clients = await _follow(shards)
    try:
        await asyncio.wait_for(failed.wait(), WAIT)
        # The next change reaches discovery: the follower followed on after the fault.
        shards.pools[1].publish([wire.tool(pb_tool("beta", "c", "C."))], "s1-v2")
        caught_up = await shards.next()
        assert [t.llm_name for t in caught_up.tools] == ["alpha_a", "beta_c", "both_b"]
        assert not task.done()
    finally:
        task.cancel()
        for client in clients:
            await client.close()


async def test_a_shard_that_goes_away_keeps_its_tools_unavailable_until_it_returns(shards: Shards) -> None:
    task, clients = await _follow(shards, down_grace=0.0)
    try:
        first = await shards.next()
        await shards.servers[1].stop(0)  # type: ignore[attr-defined]
        down = await shards.next()
        assert _availability(down) == {"alpha": True, "beta": False, "both": True}
        server, _ = await start_pool(shards.pools[1], f"127.0.0.1:{shards.ports[1]}")
        shards.servers[1] = server
        back = await shards.next()
        assert _availability(back) == {"alpha": True, "beta": True, "both": True}
        assert back.version == first.version
    finally:
        task.cancel()
        for client in clients:
            await client.close()


async def test_a_shard_with_no_servers_does_not_hold_back_the_first_catalog(shards: Shards) -> None:
    shards.pools[1].publish([], "empty")
    task, clients = await _follow(shards)
    try:
        first = await shards.next()
        assert [t.llm_name for t in first.tools] == ["alpha_a", "both_b"]
    finally:
        task.cancel()
        for client in clients:
            await client.close()


async def test_a_shard_unreachable_from_the_start_lets_the_others_catalog_out_after_the_grace(
    shards: Shards,
) -> None:
    await shards.servers[1].stop(0)  # type: ignore[attr-defined]
    # The first attempt waits list_timeout for the shard, then the grace; both short here.
    task, clients = await _follow(shards, down_grace=0.0, list_timeout=1.0)
    try:
        first = await shards.next()
        # Nothing is known of shard 1's servers: the catalog is shard 0's.
        assert [t.llm_name for t in first.tools] == ["alpha_a", "both_b"]
    finally:
        task.cancel()
        for client in clients:
            await client.close()


async def test_equal_definitions_of_different_servers_share_one_parsed_schema_and_text(
    shards: Shards,
) -> None:
    task, clients = await _follow(shards)
    try:
        await shards.next()
        shards.pools[1].publish([wire.tool(pb_tool("beta", "b", "B.", {"q": {"type": "string"}}))], "s1-v2")
        shards.pools[0].publish([wire.tool(pb_tool("alpha", "b", "B.", {"q": {"type": "string"}}))], "s0-v2")
        catalog = await shards.next()
        # Both shards' new catalogs merged (in whichever order they came).
        while (
            len(pair := [t.input_schema_json for t in catalog.tools if t.llm_name in ("alpha_b", "beta_b")])
            != 2
            or pair[0] != pair[1]
        ):
            catalog = await shards.next()
        alpha = catalog.by_llm_name("alpha_b")
        beta = catalog.by_llm_name("beta_b")
        assert alpha is not None
        assert beta is not None
        # Decoded separately from two shards' answers, kept once: the texts and the parsed schema.
        assert (
            alpha.input_schema
            == beta.input_schema
            == {"type": "object", "properties": {"q": {"type": "string"}}}
        )
        assert alpha.parsed_schema is beta.parsed_schema
        assert alpha.input_schema_json is beta.input_schema_json
        assert alpha.description is beta.description
    finally:
        task.cancel()
        for client in clients:
            await client.close()


def test_the_pause_after_a_snapshot_grows_with_its_handling_and_is_bounded() -> None:
    assert follow_pause(0.0) == 0.0
    assert follow_pause(0.002) == pytest.approx(0.002 * FOLLOW_PACE)
    assert follow_pause(2.0) == pytest.approx(2.0 * FOLLOW_PACE)
    assert follow_pause(3600.0) == MAX_FOLLOW_PAUSE
    assert follow_pause(-1.0) == 0.0  # a clock that stepped back never pauses
    assert follow_pause(2.0, pace=0.0) == 0.0


async def test_a_catalog_that_keeps_changing_is_followed_at_a_pace_to_its_newest_version(
    shards: Shards,
) -> None:
    """Versions published one after another: the follower waits after each snapshot it handled
    (reads are paced) and still ends at the newest version, with every tool of it."""
    follower_task, clients = await _follow(shards)
    try:
        await shards.next()
        tools = [wire.tool(pb_tool("beta", "b", "B."))]
        for n in range(5):
            tools.append(wire.tool(pb_tool("beta", f"t{n}", f"Tool {n}.")))
            shards.pools[1].publish(list(tools), f"s1-v{n + 2}")
        names: list[str] = []
        while "beta_t4" not in names:
            names = [t.llm_name for t in (await shards.next()).tools]
        assert names == ["alpha_a", "beta_b", *(f"beta_t{n}" for n in range(5)), "both_b"]
        assert shards.follower is not None
        assert shards.follower.paused_seconds > 0
    finally:
        follower_task.cancel()
        for client in clients:
            await client.close()


async def test_a_follower_without_a_pace_reads_every_snapshot_at_once(shards: Shards) -> None:
    follower_task, clients = await _follow(shards, pace=0.0)
    try:
        await shards.next()
        shards.pools[1].publish([wire.tool(pb_tool("beta", "c", "C."))], "s1-v2")
        assert [t.llm_name for t in (await shards.next()).tools] == ["alpha_a", "beta_c", "both_b"]
        assert shards.follower is not None
        assert shards.follower.paused_seconds == 0.0
    finally:
        follower_task.cancel()
        for client in clients:
            await client.close()


async def test_a_long_pause_is_taken_with_the_stream_closed_and_a_new_stream_opened_after_it(
    shards: Shards,
) -> None:
    """Every pause counts as long here: after each snapshot the follower closes its stream and
    opens a new one (the catalog as it is then) instead of reading what the old one queued
    meanwhile, and still follows every change."""
    follower_task, clients = await _follow(shards, reopen_after=0.0)
    try:
        await shards.next()
        assert shards.follower is not None
        opened = shards.follower.streams_opened
        shards.pools[1].publish([wire.tool(pb_tool("beta", "c", "C."))], "s1-v2")
        assert [t.llm_name for t in (await shards.next()).tools] == ["alpha_a", "beta_c", "both_b"]
        shards.pools[0].publish([wire.tool(pb_tool("alpha", "d", "D."))], "s0-v2")
        assert [t.llm_name for t in (await shards.next()).tools] == ["alpha_d", "beta_c", "both_b"]
        assert shards.follower.streams_opened > opened
        assert not follower_task.done()
    finally:
        follower_task.cancel()
        for client in clients:
            await client.close()
