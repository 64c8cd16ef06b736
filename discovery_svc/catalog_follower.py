"""The seam to the pool: follow its catalog through the client library and hand snapshots to discovery.

On start (and after every disconnect) it calls ``ListTools`` for the full catalog, then follows
``WatchCatalog`` from that version. When the pool restarts or the stream breaks it reconnects with
exponential backoff. Client errors become domain errors here and nowhere else.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable

from toolscout.client import AsyncPoolClient, ToolscoutClientError
from toolscout.client import Tool as PoolTool

from discovery_svc.catalog import Catalog, Tool
from toolscout_kit.logging import get_logger
from toolscout_kit.status import error_from_client

__all__ = ["PoolCatalogFollower", "catalog_from_pool"]

_log = get_logger(__name__)


def catalog_from_pool(version: str, tools: Iterable[PoolTool]) -> Catalog:
    """A domain catalog from the pool's tools (schemas parsed once, here)."""
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
        pool: AsyncPoolClient,
        on_catalog: Callable[[Catalog], None],
        *,
        initial_backoff: float = 0.2,
        max_backoff: float = 10.0,
        list_timeout: float = 10.0,
    ) -> None:
        self._pool = pool
        self._on_catalog = on_catalog
        self._initial_backoff = initial_backoff
        self._max_backoff = max_backoff
        self._list_timeout = list_timeout
        self._version = ""
        self.connected = asyncio.Event()

    async def _install(self, version: str, tools: tuple[PoolTool, ...]) -> None:
        if version == self._version:
            return
        # Parsing 50k schemas takes a while: keep the event loop (health checks, RPCs) responsive.
        catalog = await asyncio.to_thread(catalog_from_pool, version, tools)
        self._version = version
        self._on_catalog(catalog)

    async def _follow_once(self) -> None:
        listing = await self._pool.list_tools(
            include_unavailable=True, wait_for_ready=True, deadline=self._list_timeout
        )
        await self._install(listing.catalog_version, listing.tools)
        self.connected.set()
        _log.info("following pool catalog", catalog_version=listing.catalog_version, tools=len(listing.tools))
        # Closed explicitly: a cancelled follower must end the stream now, not when the generator
        # is garbage-collected (possibly after its event loop is gone).
        async with contextlib.aclosing(self._pool.watch_catalog(self._version)) as updates:
            async for update in updates:
                await self._install(update.catalog_version, update.tools)

    async def run(self) -> None:
        """Follows the catalog forever, reconnecting with backoff; returns only when cancelled."""
        backoff = self._initial_backoff
        while True:
            try:
                await self._follow_once()
                problem = "catalog stream ended"
            except ToolscoutClientError as err:
                problem = error_from_client(err, "pool").message
            if self.connected.is_set():
                # The session was healthy: the next outage starts with a short wait again.
                backoff = self._initial_backoff
                self.connected.clear()
            _log.warning("pool catalog unavailable; reconnecting", error=problem, retry_in=round(backoff, 2))
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self._max_backoff)
