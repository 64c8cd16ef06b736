"""A sharded pool as real processes: 3 shards, discovery and the orchestrator (issue 15).

Every service is a ``toolscout serve`` process on 127.0.0.1; the MCP servers are the misbehaving
fixture (standard library, starts in milliseconds), each logging the calls it receives. The
placement of the server names used here is fixed by the hash (``srv4`` on shard 0, ``srv0`` on 1,
``srv1`` on 2; going to 4 shards moves ``srv7`` and ``srv8`` to shard 3), asserted below rather
than assumed.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
import pytest_asyncio
from toolscout import client as tc

from mcp_pool_svc.pool import McpPool
from tests.support.fake_provider import FakeProvider, RecordedRequest, Reply, ScriptedCall
from tests.support.mcp_servers import misbehaving_config
from tests.support.sharded_stack import ShardedStack, running_sharded_stack, scrape
from toolscout_kit.config import parse_config
from toolscout_kit.shards import placement_for

# Every service here is a `toolscout serve` process: end to end (and the slowest of the stacks).
pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

WAIT = 60.0
SERVERS = [f"srv{i}" for i in range(9)]


def _servers(tmp: Path, *, logs: bool) -> dict[str, Any]:
    def flags(name: str) -> list[str]:
        if not logs:
            return []
        pid = [] if name == "everywhere" else ["--pid-file", str(tmp / f"{name}.pid")]
        return ["--call-log", str(tmp / f"{name}.calls"), *pid]

    servers = {name: misbehaving_config(*flags(name)) for name in SERVERS}
    servers["pinned"] = misbehaving_config(*flags("pinned"), shard=0)
    servers["everywhere"] = misbehaving_config(*flags("everywhere"), placement="all")
    return servers


def _document(tmp: Path, provider_url: str = "http://127.0.0.1:9/v1") -> dict[str, Any]:
    return {
        "clients": {
            "oai": {"provider": "openai", "base_url": provider_url, "api_key": "k", "max_retries": 0}
        },
        "models": {"gpt": {"client": "oai", "model": "gpt-test"}},
        "servers": _servers(tmp, logs=True),
    }


async def _unsharded_catalog(tmp: Path) -> tuple[str, list[tuple[str, ...]]]:
    """What one unsharded pool with the same servers lists: version and tools."""
    await anyio.Path(tmp).mkdir(parents=True, exist_ok=True)
    pool = McpPool(parse_config({"servers": _servers(tmp, logs=False)}, base_dir=tmp))
    await pool.start(wait=WAIT)
    try:
        snapshot = pool.list_tools(include_unavailable=True)
    finally:
        await pool.stop()
    rows = [
        (t.server, t.name, t.llm_name, t.description, t.input_schema_json, t.annotations_json)
        for t in snapshot.tools
    ]
    assert {row[0] for row in rows} == {*SERVERS, "pinned", "everywhere"}
    return snapshot.catalog_version, rows


def _rows(tools: tuple[tc.Tool, ...]) -> list[tuple[str, ...]]:
    return [
        (t.server, t.name, t.llm_name, t.description, t.input_schema_json, t.annotations_json) for t in tools
    ]


async def eventually(check: Callable[[], Awaitable[bool]], within: float = WAIT) -> None:
    """Polls ``check`` (other processes give us no event to wait on), bounded by ``within``."""
    async with asyncio.timeout(within):
        while not await check():  # noqa: ASYNC110 - a bounded poll of other processes
            await asyncio.sleep(0.1)


def _answer_with_tool_result(request: RecordedRequest) -> Reply:
    """The fake model calls the tool named in the user message, then repeats what it returned."""
    last = request.body["messages"][-1]
    if last["role"] == "user":
        tool = last["content"].split()[-1]
        return Reply.calls(ScriptedCall(tool, {"text": f"hello from {tool}"}))
    return Reply.answer(f"result: {last['content']}")


def _ok_calls(metrics: str) -> dict[str, float]:
    found = re.findall(r'toolscout_pool_tool_calls_total\{outcome="ok",server="([^"]+)"\} ([0-9.]+)', metrics)
    return {server: float(count) for server, count in found}


# --- three shards, discovery and the orchestrator ---------------------------------------------------


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def provider() -> AsyncIterator[FakeProvider]:
    async with FakeProvider() as fake:
        fake.responder = _answer_with_tool_result
        yield fake


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def stack(
    provider: FakeProvider, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[ShardedStack]:
    tmp = tmp_path_factory.mktemp("sharded")
    async with running_sharded_stack(
        tmp, _document(tmp, provider.openai_base_url), shards=3, orchestrator=True
    ) as running:
        yield running


async def _plan(stack: ShardedStack) -> tc.ToolPlan:
    async with tc.AsyncDiscoveryClient.connect(stack.discovery_address) as discovery:
        return await discovery.plan_tools(deadline=WAIT)


async def _chat(stack: ShardedStack, tool: str) -> tc.ChatResult:
    assert stack.orchestrator is not None
    async with tc.AsyncOrchestratorClient.connect(stack.orchestrator.address) as orchestrator:
        return await orchestrator.chat(f"please call {tool}", model="gpt", deadline=WAIT)


async def test_the_placement_used_here_is_the_one_the_hash_gives() -> None:
    three, four = tc.Placement(3), tc.Placement(4)
    assert [three.owners(s)[0] for s in ("srv4", "srv0", "srv1")] == [0, 1, 2]
    assert [s for s in SERVERS if three.owners(s) != four.owners(s)] == ["srv7", "srv8"]


def _placement(count: int) -> tc.Placement:
    return placement_for(parse_config({"servers": _servers(Path("/"), logs=False)}), count)


async def test_each_shard_runs_and_reports_only_the_servers_placed_on_it(stack: ShardedStack) -> None:
    placement = _placement(3)
    for index in range(3):
        async with tc.AsyncPoolClient.connect(stack.shard_address(index)) as shard:
            listed = await shard.list_servers()
            catalog = await shard.list_tools()
        assert [s.name for s in listed] == placement.servers_for(index)
        assert all(s.state == "ready" and index in s.shards for s in listed)
        assert catalog.shard == tc.ShardInfo(index, 3)
        assert {t.server for t in catalog.tools} == set(placement.servers_for(index))
    assert "pinned" in placement.servers_for(0)
    assert all("everywhere" in placement.servers_for(k) for k in range(3))


async def test_the_merged_catalog_is_the_unsharded_one_names_version_and_all(
    stack: ShardedStack, tmp_path: Path
) -> None:
    version, rows = await _unsharded_catalog(tmp_path)
    plan = await _plan(stack)
    assert plan.catalog_version == version
    assert sorted(_rows(plan.loaded_tools)) == rows
    async with tc.AsyncShardedPoolClient.connect([stack.shard_address(k) for k in range(3)]) as pool:
        merged = await pool.list_tools()
    assert (merged.catalog_version, _rows(merged.tools)) == (version, rows)


async def test_calls_through_the_orchestrator_land_on_the_owning_shard(stack: ShardedStack) -> None:
    for server in ("srv4", "srv0", "srv1", "pinned", "everywhere"):
        result = await _chat(stack, f"{server}__echo")
        assert result.messages[-1].content == f"result: hello from {server}__echo"
    per_shard = [_ok_calls(await asyncio.to_thread(scrape, stack.pools[k].metrics_port)) for k in range(3)]
    assert per_shard[0].get("srv4") == 1
    assert per_shard[0].get("pinned") == 1
    assert per_shard[1].get("srv0") == 1
    assert per_shard[2].get("srv1") == 1
    assert sum(shard.get("everywhere", 0) for shard in per_shard) == 1
    # Nothing reached a shard that does not run the server.
    placement = _placement(3)
    for index, calls in enumerate(per_shard):
        assert set(calls) <= set(placement.servers_for(index))


async def test_the_blocking_sharded_client_routes_each_call_to_its_owner_and_learns_pins_from_refusals(
    stack: ShardedStack, tmp_path: Path
) -> None:
    """What the CLI uses for ``--pool-target A,B,C``. Given a stale placement (srv0 pinned to shard
    2, which does not run it), the call is refused there before anything runs and sent to shard 1."""
    version, rows = await _unsharded_catalog(tmp_path)
    before = [_ok_calls(await asyncio.to_thread(scrape, stack.pools[k].metrics_port)) for k in range(3)]

    def use() -> tuple[tc.ToolCatalog, list[str], dict[str, str]]:
        shards = [tc.PoolClient.connect(stack.shard_address(k)) for k in range(3)]
        stale = {"srv0": tc.ServerPlacement(shard=2)}
        with tc.ShardedPoolClient(shards, placement=stale, owns_clients=True) as pool:
            texts = {
                server: pool.call_tool(f"{server}__echo", {"text": server}, deadline=WAIT).content[0].text
                for server in ("srv4", "srv0", "srv1", "pinned")
            }
            return pool.list_tools(), [s.name for s in pool.list_servers()], texts

    merged, servers, texts = await asyncio.to_thread(use)
    after = [_ok_calls(await asyncio.to_thread(scrape, stack.pools[k].metrics_port)) for k in range(3)]
    assert (merged.catalog_version, _rows(merged.tools)) == (version, rows)
    assert servers == sorted([*SERVERS, "pinned", "everywhere"])
    assert texts == {server: server for server in ("srv4", "srv0", "srv1", "pinned")}
    landed = {
        (k, server)
        for k in range(3)
        for server, count in after[k].items()
        if count > before[k].get(server, 0)
    }
    assert landed == {(0, "srv4"), (1, "srv0"), (2, "srv1"), (0, "pinned")}


async def test_a_killed_shard_takes_only_its_tools_down_and_they_return_with_it(stack: ShardedStack) -> None:
    victim = stack.pools[1]
    # Its own servers; "everywhere" also runs on the other shards and stays available.
    on_victim = set(_placement(3).servers_for(1)) - {"everywhere"}
    assert on_victim == {"srv0", "srv2", "srv3", "srv5"}
    await stack.kill(victim)

    async def victim_tools_unavailable() -> bool:
        plan = await _plan(stack)
        down = {t.server for t in plan.loaded_tools if not t.available}
        return down == on_victim

    await eventually(victim_tools_unavailable)
    plan = await _plan(stack)
    # Still listed (an LLM learns they are down, not that they are gone), everything else usable.
    assert {t.server for t in plan.loaded_tools} >= on_victim
    assert all(t.available for t in plan.loaded_tools if t.server not in on_victim)
    for tool in ("srv4__echo", "srv1__echo", "everywhere__echo"):
        result = await _chat(stack, tool)
        assert result.messages[-1].content == f"result: hello from {tool}"
    down = await _chat(stack, "srv0__echo")
    assert "hello from" not in down.messages[-1].content

    await stack.start_pool(1)

    async def victim_tools_back() -> bool:
        plan = await _plan(stack)
        return all(t.available for t in plan.loaded_tools)

    await eventually(victim_tools_back)

    async def calls_reach_it_again() -> bool:
        # The orchestrator's channel to the shard reconnects within its (short) backoff.
        result = await _chat(stack, "srv0__echo")
        return result.messages[-1].content == "result: hello from srv0__echo"

    await eventually(calls_reach_it_again, within=30)


# --- going from 3 to 4 shards ---------------------------------------------------------------------


def _pid(tmp: Path, server: str) -> int:
    return int((tmp / f"{server}.pid").read_text().split()[0])


def _calls(tmp: Path, server: str) -> int:
    path = tmp / f"{server}.calls"
    return len(path.read_text().splitlines()) if path.exists() else 0


async def test_growing_from_3_to_4_shards_moves_only_the_servers_whose_owner_changed(tmp_path: Path) -> None:
    version, rows = await _unsharded_catalog(tmp_path / "reference")
    async with running_sharded_stack(tmp_path, _document(tmp_path), shards=3) as stack:
        before = {name: _pid(tmp_path, name) for name in [*SERVERS, "pinned"]}
        # A client routing for 3 shards that can open a shard beyond them when a refusal names one.
        old_routes = tc.AsyncShardedPoolClient.connect(
            [stack.shard_address(k) for k in range(3)], target_of=stack.shard_address
        )
        moved = ["srv7", "srv8"]
        outcomes: list[str] = []
        stop = asyncio.Event()

        async def keep_calling(server: str) -> None:
            # Calls keep coming, with the old count (3 shards), while the shards reshard.
            n = 0
            while not stop.is_set():
                n += 1
                try:
                    await old_routes.call_tool("echo", {"text": str(n)}, server=server, deadline=WAIT)
                    outcomes.append("ok")
                except tc.UnavailableError:
                    outcomes.append("not sent")

        callers = [asyncio.create_task(keep_calling(server)) for server in moved]
        try:
            stack.set_shard_count(4)
            await stack.start_pool(3)
            stack.reload()

            async def resharded() -> bool:
                for index in range(3):
                    async with tc.AsyncPoolClient.connect(stack.shard_address(index)) as shard:
                        names = {s.name for s in await shard.list_servers()}
                    if names & set(moved):
                        return False
                return True

            await eventually(resharded)
            mark = len(outcomes)
            # The shard that ran them refuses calls for them now, naming the new owner, before sending.
            async with tc.AsyncPoolClient.connect(stack.shard_address(2)) as old_owner:
                with pytest.raises(tc.UnavailableError) as refused:
                    await old_owner.call_tool("echo", {"text": "x"}, server="srv7")
            assert tc.parse_owners(refused.value) == ((3,), 4)

            async def routed_to_the_new_owner() -> bool:
                # The client still routing for 3 shards is refused, learns the owner, gets through.
                return "ok" in outcomes[mark:]

            await eventually(routed_to_the_new_owner)
        finally:
            stop.set()
            await asyncio.gather(*callers)
            await old_routes.close()

        async with tc.AsyncShardedPoolClient.connect([stack.shard_address(k) for k in range(4)]) as pool:
            listed = {s.name: s for s in await pool.list_servers()}
            for server in moved:
                assert listed[server].shards == (3,)
                result = await pool.call_tool("echo", {"text": "after"}, server=server, deadline=WAIT)
                assert result.content[0].text == "after"
        after = {name: _pid(tmp_path, name) for name in before}
        assert {n for n in before if before[n] != after[n]} == set(moved)
        # Every call that was answered ran exactly once; none that was refused ran at all.
        executed = sum(_calls(tmp_path, server) for server in moved)
        assert executed == outcomes.count("ok") + len(moved)

        async def merged_again() -> bool:
            plan = await _plan(stack)
            return plan.catalog_version == version

        await eventually(merged_again)
        plan = await _plan(stack)
        assert sorted(_rows(plan.loaded_tools)) == rows
