"""The pool's feature RPCs over a real grpc.aio server on 127.0.0.1:0, through the client library
(async and blocking), with our SDK server offering resources, templates, prompts, completion,
logging and subscriptions (``tests/fixtures/features/server.py``) as a real subprocess."""

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
    CompletionRequest,
    FeatureKind,
    InvalidArgumentError,
    NotFoundError,
    PoolClient,
    PromptRequest,
    ResourceReadRequest,
)

from mcp_pool_svc.server import build_server
from tests.support.mcp_servers import REPO_ROOT
from toolscout_kit.config import parse_config
from toolscout_kit.server import RunningServer

SERVER = REPO_ROOT / "tests" / "fixtures" / "features" / "server.py"

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def pool_address(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    tmp_path: Path = tmp_path_factory.mktemp("pool-features")
    config = parse_config(
        {
            "servers": {
                name: {"command": sys.executable, "args": [str(SERVER), name]} for name in ("alpha", "beta")
            }
        },
        base_dir=tmp_path,
    )
    running: RunningServer = await build_server(config, listen="127.0.0.1:0", metrics_port=-1)
    try:
        yield running.address
    finally:
        await running.stop(0.5)


@pytest_asyncio.fixture(loop_scope="module")
async def client(pool_address: str) -> AsyncIterator[AsyncPoolClient]:
    async with AsyncPoolClient.connect(pool_address) as pool:
        yield pool


async def test_listings_come_in_pages_whose_cursors_are_checked(client: AsyncPoolClient) -> None:
    first = await client.list_features(FeatureKind.RESOURCE, page_size=3)
    assert len(first.features) == 3
    assert first.next_cursor
    pages = [first]
    while pages[-1].next_cursor:
        pages.append(
            await client.list_features(FeatureKind.RESOURCE, page_size=3, cursor=pages[-1].next_cursor)
        )
    served = [f.served_name for p in pages for f in p.features]
    assert [len(p.features) for p in pages] == [3, 3, 2]
    assert len(set(served)) == 8
    assert [o.server for o in first.offers] == ["alpha", "beta"]
    assert all(o.prompts and o.completions and o.logging and o.subscribe for o in first.offers)
    with pytest.raises(InvalidArgumentError):
        await client.list_features(FeatureKind.PROMPT, cursor=first.next_cursor)
    with pytest.raises(InvalidArgumentError):
        await client.list_features(FeatureKind.RESOURCE, cursor="not-a-cursor")
    with pytest.raises(NotFoundError):
        await client.list_features(FeatureKind.RESOURCE, ["nobody"])
    only_beta = await client.list_prompts(["beta"])
    assert [f.served_name for f in only_beta.features] == ["beta__greet", "beta__plain"]


async def test_requests_are_routed_and_server_errors_are_data(client: AsyncPoolClient) -> None:
    read = await client.read_resource(ResourceReadRequest("feature://beta/items/5"))
    assert read.server == "beta"
    assert read.result["contents"][0]["text"] == "item 5 of beta"
    prompt = await client.get_prompt(PromptRequest("alpha__greet", '{"name": "Kay"}'))
    assert prompt.result["messages"][0]["content"]["text"].startswith("Say hello to Kay")
    refused = await client.get_prompt(PromptRequest("alpha__greet"))
    assert refused.jsonrpc_error_code == -32602
    assert "name" in refused.error_message
    done = await client.complete(CompletionRequest(FeatureKind.PROMPT, "beta__greet", "style", "fr"))
    assert done.result["completion"]["values"] == ["friendly"]
    with pytest.raises(NotFoundError):
        await client.read_resource(ResourceReadRequest("feature://shared/readme"))  # two servers list it
    with pytest.raises(NotFoundError):
        await client.get_prompt(PromptRequest("nobody__greet"))
    with pytest.raises(InvalidArgumentError):
        await client.get_prompt(PromptRequest("alpha__greet", '{"name": 3}'))


async def test_levels_fan_out_and_subscriptions_follow_updates(client: AsyncPoolClient) -> None:
    assert await client.set_logging_level("error") == ("alpha", "beta")
    with pytest.raises(InvalidArgumentError):
        await client.set_logging_level("loud")
    stream = client.watch_resource("feature://alpha/counter")
    async with contextlib.aclosing(stream):
        assert await anext(stream) == ("feature://alpha/counter", True)
        await client.call_tool("alpha__bump")
        assert await asyncio.wait_for(anext(stream), 10) == ("feature://alpha/counter", False)
    with pytest.raises(NotFoundError):
        await anext(client.watch_resource("feature://nobody/x"))


async def test_a_new_prompt_reaches_feature_watchers(client: AsyncPoolClient) -> None:
    stream = client.watch_features()
    async with contextlib.aclosing(stream):
        first = await anext(stream)
        await client.call_tool("beta__add_prompt", {"name": "fresh"})
        changed = await asyncio.wait_for(anext(stream), 10)
    assert changed.features_version != first.features_version
    assert changed.changed_kinds == (FeatureKind.PROMPT,)
    assert "beta__fresh" in {f.served_name for f in changed.features}


async def test_the_blocking_client_offers_the_same(pool_address: str) -> None:
    # In a thread: the pool serves on this test's event loop.
    await asyncio.to_thread(_blocking_checks, pool_address)


def _blocking_checks(pool_address: str) -> None:
    with PoolClient.connect(pool_address) as pool:
        assert {f.served_name for f in pool.list_resource_templates().features} == {
            "feature://alpha/items/{id}",
            "feature://beta/items/{id}",
        }
        assert pool.read_resource(ResourceReadRequest("feature://alpha/text")).result["contents"][0][
            "text"
        ] == ("hello from alpha")
        updates = pool.watch_resource("toolscout://server/beta/feature://shared/readme")
        assert next(updates) == ("toolscout://server/beta/feature://shared/readme", True)
        updates.close()
        with pytest.raises(NotFoundError):
            pool.get_prompt(PromptRequest("greet"))
