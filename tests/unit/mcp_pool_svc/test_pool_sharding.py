"""A pool shard against a fake connector: which servers it runs, refusals, and a live reshard."""

from __future__ import annotations

import asyncio
import contextlib
import random
from typing import Any

import anyio
import pytest

from mcp_pool_svc.catalog import Catalog, ListedTool
from mcp_pool_svc.errors import NotOwnerError, UnknownServerError
from mcp_pool_svc.placement import ShardIdentity
from mcp_pool_svc.pool import McpPool
from mcp_pool_svc.supervisor import ServerState
from tests.unit.mcp_pool_svc.test_pool_supervisor import FakeServer, fake_connector
from toolscout_kit.config import ToolscoutConfig, parse_config
from toolscout_kit.errors import ConfigError
from toolscout_kit.shards import placement_for

# Owners by the hash: srv4 -> 0, srv0 -> 1, srv1 -> 2 of 3; of 4, srv7 and srv8 move to shard 3.
NAMES = [f"srv{i}" for i in range(9)]
WAIT = 5.0


def _config(count: int, **extra: dict[str, Any]) -> ToolscoutConfig:
    servers: dict[str, Any] = {name: {"command": "unused"} for name in NAMES}
    servers.update({name: {"command": "unused", **rule} for name, rule in extra.items()})
    return parse_config(
        {
            "servers": servers,
            "toolscout": {
                "pool": {
                    "shards": {"count": count},
                    "initial_backoff": 0.01,
                    "max_backoff": 0.02,
                    "ping_interval": 30,
                    "tool_cache_ttl": 0,
                }
            },
        }
    )


def _pool(config: ToolscoutConfig, shard: ShardIdentity, fakes: dict[str, FakeServer]) -> McpPool:
    return McpPool(config, shard=shard, connector=fake_connector(fakes), rng=random.Random(1))  # noqa: S311


def _fakes(config: ToolscoutConfig) -> dict[str, FakeServer]:
    return {name: FakeServer() for name in config.servers}


async def _ready(pool: McpPool) -> None:
    await pool.wait_until(lambda: all(s.state is ServerState.READY for s in pool.list_servers()), WAIT)


async def test_a_shard_starts_and_reports_only_the_servers_placed_on_it() -> None:
    config = _config(3, pinned={"shard": 2}, everywhere={"placement": "all"})
    fakes = _fakes(config)
    pool = _pool(config, ShardIdentity(2, 3), fakes)
    await pool.start(wait=WAIT)
    try:
        expected = placement_for(config, 3).servers_for(2)
        assert [s.name for s in pool.list_servers()] == expected
        assert {"pinned", "everywhere", "srv1"} <= set(expected)
        assert {name for name, fake in fakes.items() if fake.connects} == set(expected)
        assert {t.server for t in pool.list_tools().tools} == set(expected)
        status = pool.server_status("everywhere")
        assert (status.shards, status.placement) == ((0, 1, 2), "all")
        assert pool.server_status("srv1").shards == (2,)
    finally:
        await pool.stop()


async def test_a_call_for_a_server_of_another_shard_is_refused_naming_its_owner() -> None:
    config = _config(3)
    pool = _pool(config, ShardIdentity(0, 3), _fakes(config))
    await pool.start(wait=WAIT)
    try:
        with pytest.raises(NotOwnerError) as by_pair:
            await pool.call_tool(server="srv0", tool="a")
        with pytest.raises(NotOwnerError) as by_name:
            await pool.call_tool(llm_name="srv1__a")
        with pytest.raises(UnknownServerError):
            await pool.call_tool(server="nowhere", tool="a")
    finally:
        await pool.stop()
    assert (by_pair.value.owners, by_pair.value.count) == ((1,), 3)
    assert (by_name.value.owners, by_name.value.count) == ((2,), 3)
    assert "the call was not sent" in by_pair.value.message


def test_a_sharded_config_needs_the_shard_of_the_process() -> None:
    with pytest.raises(ConfigError, match="--shard K/3"):
        McpPool(_config(3))


async def test_a_reshard_starts_and_stops_only_the_servers_whose_owner_changed() -> None:
    three, four = _config(3), _config(4)
    fakes = _fakes(three)
    pool = _pool(three, ShardIdentity(2, 3), fakes)
    await pool.start(wait=WAIT)
    try:
        await _ready(pool)
        before = {name: fakes[name].live for name in pool.server_names}
        result = await pool.reshard(four)
        assert (result.started, result.stopped) == ((), ("srv7", "srv8"))
        assert result.shard == ShardIdentity(2, 4)
        assert [s.name for s in pool.list_servers()] == placement_for(four, 4).servers_for(2)
        # The others kept their very sessions; the moved ones are closed and out of the catalog.
        for name in pool.server_names:
            assert fakes[name].live is before[name]
            assert fakes[name].connects == 1
        assert fakes["srv7"].live is None
        assert fakes["srv8"].live is None
        assert {t.server for t in pool.list_tools(include_unavailable=True).tools} == set(pool.server_names)
        with pytest.raises(NotOwnerError) as refused:
            await pool.call_tool(server="srv7", tool="a")
        assert refused.value.owners == (3,)
        # Back to 3: they return here, the others are untouched again.
        again = await pool.reshard(three)
        assert (again.started, again.stopped) == (("srv7", "srv8"), ())
        await _ready(pool)
        assert fakes["srv7"].connects == 2
    finally:
        await pool.stop()


async def test_a_shard_beyond_the_new_count_hands_over_everything() -> None:
    four = _config(4)
    fakes = _fakes(four)
    pool = _pool(four, ShardIdentity(3, 4), fakes)
    await pool.start(wait=WAIT)
    try:
        result = await pool.reshard(_config(3))
        assert result.shard is None
        assert set(result.stopped) == set(placement_for(four, 4).servers_for(3))
        assert pool.list_servers() == []
        assert pool.shard_index == 3
    finally:
        await pool.stop()


async def test_a_call_in_flight_on_a_server_moving_away_finishes_before_it_stops() -> None:
    three = _config(3)
    fakes = _fakes(three)
    release = asyncio.Event()
    started = asyncio.Event()

    pool = _pool(three, ShardIdentity(2, 3), fakes)
    await pool.start(wait=WAIT)
    try:
        await _ready(pool)
        live = fakes["srv7"].live
        assert live is not None

        class _Session:
            async def call_tool(self, *_: Any, **__: Any) -> Any:
                started.set()
                await release.wait()
                return type(
                    "R", (), {"content": [], "structured_content": None, "is_error": False, "meta": None}
                )()

        live.session = _Session()  # type: ignore[assignment]
        call = asyncio.create_task(pool.call_tool(server="srv7", tool="a"))
        with anyio.fail_after(WAIT):
            await started.wait()
        reshard = asyncio.create_task(pool.reshard(_config(4)))
        # New calls are refused at once while the one in flight is still running.
        await pool.wait_until(lambda: "srv7" not in pool.server_names, WAIT)
        with pytest.raises(NotOwnerError):
            await pool.call_tool(server="srv7", tool="a")
        assert fakes["srv7"].live is not None
        release.set()
        with anyio.fail_after(WAIT):
            result = await call
            await reshard
        assert not result.is_error
        assert fakes["srv7"].live is None
    finally:
        await pool.stop()


def test_the_catalog_version_is_the_one_a_merge_of_its_parts_computes() -> None:
    from toolscout.client import CatalogMerger, Tool

    whole, parts = Catalog(), [Catalog(), Catalog()]
    for index, server in enumerate(["alpha", "beta", "gamma"]):
        tools = [ListedTool(name=f"t{n}", description=f"{server} {n}") for n in range(3)]
        whole.set_tools(server, tools)
        parts[index % 2].set_tools(server, tools)
    whole.set_tools("empty", [])
    merger = CatalogMerger()
    for index, part in enumerate(parts):
        snap = part.snapshot()
        merger.update(
            index,
            snap.catalog_version,
            [
                Tool(
                    server=t.server,
                    name=t.name,
                    llm_name=t.llm_name,
                    title=t.title,
                    description=t.description,
                    input_schema_json=t.input_schema_json,
                    output_schema_json=t.output_schema_json,
                    annotations_json=t.annotations_json,
                    available=t.available,
                )
                for t in snap.tools
            ],
        )
    assert merger.catalog().catalog_version == whole.version
    assert [t.llm_name for t in merger.catalog().tools] == [t.llm_name for t in whole.snapshot().tools]


async def test_start_up_serves_after_its_wait_even_while_servers_are_still_starting() -> None:
    # Found by the 1,000-server simulation: the bounded start-up wait raised instead of serving.
    config = _config(1)
    hold = asyncio.Event()

    fakes = _fakes(config)
    connector = fake_connector(fakes)

    def slow_connector(name: str, cfg: Any, on_event: Any) -> Any:
        if name == "srv0":

            @contextlib.asynccontextmanager
            async def held() -> Any:
                await hold.wait()
                yield None

            return held()
        return connector(name, cfg, on_event)

    pool = McpPool(config, connector=slow_connector, rng=random.Random(1))  # noqa: S311
    await pool.start(wait=0.2)
    try:
        assert pool.server_status("srv0").state is ServerState.STARTING
        assert pool.server_status("srv1").state is ServerState.READY
    finally:
        hold.set()
        await pool.stop()
