"""The seam to the pool: follow its catalog over gRPC and hand snapshots to discovery.

On start (and after every disconnect) it calls ``ListTools`` for the full catalog, then follows
``WatchCatalog`` from that version. When the pool restarts or the stream breaks it reconnects with
exponential backoff. gRPC errors are translated to domain errors here and nowhere else.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

import grpc
from toolscout.common.v1 import common_pb2
from toolscout.mcp_pool.v1 import mcp_pool_pb2, mcp_pool_pb2_grpc

from discovery_svc.catalog import Catalog, Tool
from toolscout_kit.errors import ToolscoutError
from toolscout_kit.logging import get_logger
from toolscout_kit.status import error_from_rpc

__all__ = ["PoolCatalogFollower", "catalog_from_proto"]

_log = get_logger(__name__)


def catalog_from_proto(version: str, tools: Iterable[common_pb2.Tool]) -> Catalog:
    """A domain catalog from the pool's tool messages (schemas parsed once, here)."""
    return Catalog(
        version,
        (
            Tool.create(
                server=t.server,
                name=t.name,
                llm_name=t.llm_name,
                description=t.description,
                input_schema_json=t.input_schema_json,
                title=t.title,
                output_schema_json=t.output_schema_json,
                annotations_json=t.annotations_json,
                available=t.available,
            )
            for t in tools
        ),
    )


class PoolCatalogFollower:
    """Keeps discovery's catalog in step with the pool until cancelled."""

    def __init__(
        self,
        channel: grpc.aio.Channel,
        on_catalog: Callable[[Catalog], None],
        *,
        initial_backoff: float = 0.2,
        max_backoff: float = 10.0,
        list_timeout: float = 10.0,
    ) -> None:
        self._stub = mcp_pool_pb2_grpc.McpPoolStub(channel)
        self._on_catalog = on_catalog
        self._initial_backoff = initial_backoff
        self._max_backoff = max_backoff
        self._list_timeout = list_timeout
        self._version = ""
        self.connected = asyncio.Event()

    async def _install(self, version: str, tools: Iterable[common_pb2.Tool]) -> None:
        if version == self._version:
            return
        # Parsing 50k schemas takes a while: keep the event loop (health checks, RPCs) responsive.
        catalog = await asyncio.to_thread(catalog_from_proto, version, list(tools))
        self._version = version
        self._on_catalog(catalog)

    async def _follow_once(self) -> None:
        listing = await self._stub.ListTools(
            mcp_pool_pb2.ListToolsRequest(include_unavailable=True),
            timeout=self._list_timeout,
            wait_for_ready=True,
        )
        await self._install(listing.catalog_version, listing.tools)
        self.connected.set()
        _log.info("following pool catalog", catalog_version=listing.catalog_version, tools=len(listing.tools))
        stream = self._stub.WatchCatalog(mcp_pool_pb2.WatchCatalogRequest(known_version=self._version))
        async for update in stream:
            await self._install(update.catalog_version, update.tools)

    async def run(self) -> None:
        """Follows the catalog forever, reconnecting with backoff; returns only when cancelled."""
        backoff = self._initial_backoff
        while True:
            try:
                await self._follow_once()
                problem = "catalog stream ended"
            except grpc.aio.AioRpcError as err:
                translated: ToolscoutError = error_from_rpc(err, "pool")
                problem = translated.message
            if self.connected.is_set():
                # The session was healthy: the next outage starts with a short wait again.
                backoff = self._initial_backoff
                self.connected.clear()
            _log.warning("pool catalog unavailable; reconnecting", error=problem, retry_in=round(backoff, 2))
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self._max_backoff)
