"""The feature requests over two real pool shards through the sharded clients (async and
blocking): listings merged, requests found on the shard that runs their server.

Both servers list the URI ``feature://shared/readme``, each shard serving it bare: the merge tells
the two servers' URIs apart as one pool does. (Prompt names cannot clash across shards: a sharded
pool namespaces every server; the merge's rule for them is a unit test's.)"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from toolscout.client import (
    AsyncPoolClient,
    AsyncShardedPoolClient,
    FeatureKind,
    NotFoundError,
    PoolClient,
    PromptRequest,
    ResourceReadRequest,
    ShardedPoolClient,
)

from mcp_pool_svc.server import build_server
from tests.support.mcp_servers import REPO_ROOT
from toolscout_kit.config import parse_config
from toolscout_kit.shards import ShardIdentity

SERVER = REPO_ROOT / "tests" / "fixtures" / "features" / "server.py"

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def shard_addresses(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[list[str]]:
    tmp_path: Path = tmp_path_factory.mktemp("pool-shards")
    config = parse_config(
        {
            "servers": {
                name: {"command": sys.executable, "args": [str(SERVER), name], "shard": shard}
                for name, shard in (("alpha", 0), ("beta", 1))
            },
            "toolscout": {"pool": {"shards": {"count": 2}}},
        },
        base_dir=tmp_path,
    )
    shards = [
        await build_server(config, listen="127.0.0.1:0", metrics_port=-1, shard=ShardIdentity(k, 2))
        for k in (0, 1)
    ]
    try:
        yield [s.address for s in shards]
    finally:
        for shard in shards:
            await shard.stop(0.5)


async def test_the_async_sharded_client_merges_and_routes(shard_addresses: list[str]) -> None:
    async with AsyncShardedPoolClient(
        [AsyncPoolClient.connect(a) for a in shard_addresses], owns_clients=True
    ) as pool:
        prompts = await pool.list_prompts()
        assert {f.served_name for f in prompts.features} == {
            "alpha__greet",
            "alpha__plain",
            "beta__greet",
            "beta__plain",
        }
        assert [o.server for o in prompts.offers] == ["alpha", "beta"]
        read = await pool.read_resource(ResourceReadRequest("feature://beta/text"))
        assert read.server == "beta"
        got = await pool.get_prompt(PromptRequest("alpha__plain"))
        assert got.server == "alpha"
        with pytest.raises(NotFoundError):
            await pool.get_prompt(PromptRequest("gamma__plain"))
        assert await pool.set_logging_level("info") == ("alpha", "beta")
        updates = pool.watch_resource("feature://beta/counter")
        async with contextlib.aclosing(updates):
            assert await anext(updates) == ("feature://beta/counter", True)
        stream = pool.watch_features()
        async with contextlib.aclosing(stream):
            first = await anext(stream)
            assert len({f.server for f in first.features}) == 2
            await pool.call_tool("beta__add_prompt", {"name": "sharded"})
            changed = await asyncio.wait_for(anext(stream), 10)
        assert "beta__sharded" in {f.served_name for f in changed.features}


async def test_a_uri_servers_on_two_shards_list_is_served_once_per_server(shard_addresses: list[str]) -> None:
    async with AsyncShardedPoolClient(
        [AsyncPoolClient.connect(a) for a in shard_addresses], owns_clients=True
    ) as pool:
        resources = await pool.list_resources()
        by_uri = {f.served_name: f for f in resources.features}
        shared = "feature://shared/readme"
        assert shared not in by_uri
        for server in ("alpha", "beta"):
            qualified = f"toolscout://server/{server}/{shared}"
            assert (by_uri[qualified].server, by_uri[qualified].definition["uri"]) == (server, qualified)
            # Each qualified URI reaches its own server's shard.
            read = await pool.read_resource(ResourceReadRequest(qualified))
            assert (read.server, read.result["contents"][0]["text"]) == (server, f"readme of {server}")
        # The bare URI is never silently one server's.
        with pytest.raises(NotFoundError):
            await pool.read_resource(ResourceReadRequest(shared))


async def test_the_blocking_sharded_client_merges_and_routes(shard_addresses: list[str]) -> None:
    await asyncio.to_thread(_blocking_checks, shard_addresses)


def _blocking_checks(shard_addresses: list[str]) -> None:
    with ShardedPoolClient([PoolClient.connect(a) for a in shard_addresses], owns_clients=True) as pool:
        resources = pool.list_features(FeatureKind.RESOURCE, ["alpha"])
        assert {f.server for f in resources.features} == {"alpha"}
        assert len(resources.features) == 4
        assert pool.read_resource(ResourceReadRequest("feature://alpha/items/9")).server == "alpha"
        assert pool.set_logging_level("debug", ["beta"]) == ("beta",)
