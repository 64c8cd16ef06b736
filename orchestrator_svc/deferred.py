"""A toolset's deferred tools, fetched from discovery once per catalog version.

Append mode needs only their names, to tell a model that calls a deferred tool before loading it
to search first (instead of "unknown tool"); that is rare. Native mode declares every deferred
definition on every request. Either list can be long, so it is neither shipped with every plan
nor fetched per chat: one fetch per (catalog version, toolset), shared by every chat.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass

from orchestrator_svc.messages import ToolDef
from orchestrator_svc.seams import DiscoverySeam

__all__ = ["DeferredTools", "DeferredToolsCache"]


@dataclass(frozen=True, slots=True)
class DeferredTools:
    names: frozenset[str]
    # Every deferred definition (flagged ``deferred``), catalog order; None when only the names
    # were fetched.
    definitions: tuple[ToolDef, ...] | None = None


class DeferredToolsCache:
    """A small LRU of ``(catalog version, toolset, inline toolset) -> deferred tools``, shared by
    every chat."""

    def __init__(self, discovery: DiscoverySeam, *, size: int = 32) -> None:
        self._discovery = discovery
        self._size = size
        self._cache: OrderedDict[tuple[str, str, str], DeferredTools] = OrderedDict()
        self._lock = asyncio.Lock()

    async def get(
        self,
        *,
        toolset: str,
        catalog_version: str,
        provider: str,
        time_limit: float | None,
        definitions: bool = False,
        toolset_json: str = "",
    ) -> DeferredTools:
        """The deferred tools of ``toolset`` at ``catalog_version`` (fetched on first use; with
        ``definitions``, fetched again once if only the names were known).

        Raises:
            the discovery seam's errors (NotFoundError, UnavailableError).
        """
        key = (catalog_version, toolset, toolset_json)
        async with self._lock:
            found = self._cache.get(key)
            if found is None or (definitions and found.definitions is None):
                plan = await self._discovery.plan_tools(
                    toolset=toolset,
                    discovered=(),
                    provider=provider,
                    time_limit=time_limit,
                    with_deferred_names=True,
                    with_deferred_tools=definitions,
                    toolset_json=toolset_json,
                )
                found = DeferredTools(
                    plan.deferred_names, tuple(plan.deferred_tools) if definitions else None
                )
                # The catalog may have moved on meanwhile: file the tools under what was read.
                key = (plan.catalog_version or catalog_version, toolset, toolset_json)
                self._cache[key] = found
                while len(self._cache) > self._size:
                    self._cache.popitem(last=False)
            self._cache.move_to_end(key)
            return found
