"""``tools/list`` in pages: an ``all`` endpoint over a catalog of 1,000 tools, paged through by the
``mcp`` SDK's client (both revisions), continued on another gateway replica, and refused (-32602)
for a stale, foreign or damaged cursor.

Discovery runs as its real gRPC service with the catalog installed in its engine (listing needs no
pool); two gateways follow it, as two replicas behind a load balancer would.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from toolscout.discovery.v1 import discovery_pb2_grpc

from discovery_svc.catalog import Catalog
from discovery_svc.engine import DiscoveryEngine
from discovery_svc.servicer import DiscoveryServicer
from mcp_gateway_svc.server import build_server
from mcp_gateway_svc.tool_lists import PAGE_SIZE
from tests.support.discovery_catalogs import synthetic_tools
from tests.support.gateway import MODERN
from toolscout_kit.config import parse_config
from toolscout_kit.server import ServiceBinding, start_server

pytestmark = pytest.mark.asyncio(loop_scope="module")

WAIT = 30.0
TOOLS = 1_000


@asynccontextmanager
async def replicas(count: int) -> AsyncIterator[list[str]]:
    """``count`` gateways (default endpoint in ``all`` mode) over one discovery: their URLs."""
    config = parse_config(
        {
            "tool_discovery": {"enabled": True, "defer_all": True},
            "toolscout": {"gateway": {"mode": "all"}},
        }
    )
    engine = DiscoveryEngine(config)
    engine.set_catalog(Catalog("v1", synthetic_tools(TOOLS)))
    await engine.warm()
    binding = ServiceBinding(
        "toolscout.discovery.v1.Discovery",
        discovery_pb2_grpc.add_DiscoveryServicer_to_server,
        DiscoveryServicer(engine),
        endless_streams=("WatchPlan",),
    )
    discovery = await start_server(
        [binding],
        config.toolscout.discovery,
        config.toolscout.security,
        listen="127.0.0.1:0",
        metrics_port=-1,
    )
    async with AsyncExitStack() as stack:
        stack.push_async_callback(discovery.stop, 0.5)
        urls = []
        for _ in range(count):
            gateway = await build_server(
                config,
                listen="127.0.0.1:0",
                metrics_port=-1,
                discovery_target=discovery.address,
                pool_target="127.0.0.1:9",
            )
            stack.push_async_callback(gateway.stop, 0.5)
            urls.append(gateway.url)
        yield urls


async def _page(client: Client, cursor: str | None) -> types.ListToolsResult:
    params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
    return await client.session.list_tools(params=params)


@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_the_sdk_client_pages_through_every_tool_of_a_large_all_list(mode: str) -> None:
    async with replicas(1) as (url,):
        with anyio.fail_after(WAIT):
            async with Client(url, mode=mode) as client:
                names: list[str] = []
                cursor: str | None = None
                pages = 0
                while True:
                    result = await _page(client, cursor)
                    pages += 1
                    assert 0 < len(result.tools) <= PAGE_SIZE
                    names += [t.name for t in result.tools]
                    cursor = result.next_cursor
                    if cursor is None:
                        break
    assert pages == -(-TOOLS // PAGE_SIZE)
    assert len(names) == len(set(names)) == TOOLS


async def test_a_cursor_from_one_replica_continues_on_another() -> None:
    async with replicas(2) as (first, second):
        with anyio.fail_after(WAIT):
            async with Client(first, mode=MODERN) as a, Client(second, mode=MODERN) as b:
                page_a = await _page(a, None)
                rest = await _page(b, page_a.next_cursor)
                again = await _page(a, page_a.next_cursor)
    assert [t.name for t in rest.tools] == [t.name for t in again.tools]
    assert not {t.name for t in rest.tools} & {t.name for t in page_a.tools}


def _altered(cursor: str, **fields: object) -> str:
    token = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    token.update(fields)
    return base64.urlsafe_b64encode(json.dumps(token).encode()).decode().rstrip("=")


async def test_a_stale_foreign_or_damaged_cursor_is_refused_with_invalid_params() -> None:
    async with replicas(1) as (url,):
        with anyio.fail_after(WAIT):
            async with Client(url, mode=MODERN) as client:
                cursor = (await _page(client, None)).next_cursor
                assert cursor is not None
                bad = [
                    _altered(cursor, v="an-older-catalog-version"),
                    _altered(cursor, w="another-endpoint/all"),
                    _altered(cursor, o=10 * TOOLS),
                    _altered(cursor, o=-1),
                    "not a cursor",
                    cursor[:-3],
                ]
                codes = []
                for each in bad:
                    with pytest.raises(MCPError) as caught:
                        await _page(client, each)
                    codes.append(caught.value.code)
                    assert "list again without a cursor" in caught.value.message
    assert codes == [types.INVALID_PARAMS] * len(bad)
