"""The deferred tool names of a toolset, fetched from discovery once per catalog version.

The loop needs them only to tell a model that calls a deferred tool before loading it to search
first (instead of "unknown tool"); that is rare, and the list can be long, so it is neither
shipped with every plan nor fetched per chat.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict

from orchestrator_svc.seams import DiscoverySeam

__all__ = ["DeferredNames"]


class DeferredNames:
    """A small LRU of ``(catalog version, toolset) -> deferred names``, shared by every chat."""

    def __init__(self, discovery: DiscoverySeam, *, size: int = 32) -> None:
        self._discovery = discovery
        self._size = size
        self._cache: OrderedDict[tuple[str, str], frozenset[str]] = OrderedDict()
        self._lock = asyncio.Lock()

    async def get(
        self, *, toolset: str, catalog_version: str, provider: str, time_limit: float | None
    ) -> frozenset[str]:
        """Every deferred tool of ``toolset`` at ``catalog_version`` (fetched on first use).

        Raises:
            the discovery seam's errors (NotFoundError, UnavailableError).
        """
        key = (catalog_version, toolset)
        async with self._lock:
            names = self._cache.get(key)
            if names is None:
                plan = await self._discovery.plan_tools(
                    toolset=toolset,
                    discovered=(),
                    provider=provider,
                    time_limit=time_limit,
                    with_deferred_names=True,
                )
                names = plan.deferred_names
                # The catalog may have moved on meanwhile: file the names under what was read.
                key = (plan.catalog_version or catalog_version, toolset)
                self._cache[key] = names
                while len(self._cache) > self._size:
                    self._cache.popitem(last=False)
            self._cache.move_to_end(key)
            return names
