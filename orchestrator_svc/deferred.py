"""A toolset's deferred tools, fetched from discovery once per catalog version.

Append mode needs only their names, to tell a model that calls a deferred tool before loading it
to search first (instead of "unknown tool"); that is rare. Native mode declares every deferred
definition on every request. Either list can be long, so it is neither shipped with every plan
nor fetched per chat: one fetch per (catalog version, toolset), shared by every chat. With
``per_user`` servers a principal's own (their tools of those servers) are kept per principal, for
10 s (as discovery keeps what those servers list to them), so a sign-in shows soon.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from toolscout.client import PlanRequest, Tool, ToolsetRef

from orchestrator_svc.seams import DiscoverySeam

__all__ = ["DeferredTools", "DeferredToolsCache"]

# (catalog version, toolset, principal): a per_user server's deferred tools are each principal's.
_Key = tuple[str, ToolsetRef, str]


@dataclass(frozen=True, slots=True)
class DeferredTools:
    names: frozenset[str]
    # Every deferred definition, catalog order; None when only the names were fetched.
    definitions: tuple[Tool, ...] | None = None
    # When it was fetched (the cache's clock).
    fetched: float = 0.0


class DeferredToolsCache:
    """A small LRU of ``(catalog version, toolset, principal) -> deferred tools``, shared by
    every chat of that principal (none named: every chat without one).

    A hit takes no lock and never waits. A miss joins the fetch already in flight for its key (one
    PlanTools per key at a time), and fetches of different keys run side by side. A failed fetch
    is not kept: every caller waiting on it gets its error, the next one fetches again.
    """

    def __init__(
        self,
        discovery: DiscoverySeam,
        *,
        size: int = 32,
        per_user: bool = False,
        user_ttl: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``per_user``: the config has ``per_user`` servers (else the principal is not asked: every
        chat shares one fetch); a principal's own are then kept ``user_ttl`` seconds."""
        self._discovery = discovery
        self._per_user = per_user
        self._user_ttl = user_ttl
        self._clock = clock
        self._size = size
        self._cache: OrderedDict[_Key, DeferredTools] = OrderedDict()
        # Fetches in flight by (key, with definitions); each runs as its own task so that a caller
        # that goes away (a cancelled chat) does not cancel it for the others.
        self._flights: dict[tuple[_Key, bool], asyncio.Task[DeferredTools]] = {}

    async def get(
        self,
        toolset: ToolsetRef,
        *,
        catalog_version: str,
        principal: str = "",
        provider: str,
        deadline: float | None,
        definitions: bool = False,
    ) -> DeferredTools:
        """The deferred tools of ``toolset`` at ``catalog_version`` as ``principal`` sees them
        (``per_user`` servers: :class:`PlanRequest` ``principal``; fetched on first use; with
        ``definitions``, fetched again once if only the names were known).

        Raises:
            the discovery seam's errors (NotFoundError, UnavailableError).
        """
        key = (catalog_version, toolset, principal if self._per_user else "")
        found = self._cache.get(key)
        if found is not None and key[2] and self._clock() - found.fetched >= self._user_ttl:
            found = None  # a principal's own: their sign-ins change them within a catalog version
        if found is not None and (not definitions or found.definitions is not None):
            self._cache.move_to_end(key)
            return found
        flight = (key, definitions)
        task = self._flights.get(flight)
        if task is None:
            request = PlanRequest(
                toolset,
                provider=provider,
                include_deferred_names=True,
                include_deferred_tools=definitions,
                principal=key[2],
            )
            task = asyncio.create_task(self._fetch(key, request, deadline))
            self._flights[flight] = task
            task.add_done_callback(lambda done: self._landed(flight, done))
        return await asyncio.shield(task)

    def _landed(self, flight: tuple[_Key, bool], task: asyncio.Task[DeferredTools]) -> None:
        if self._flights.get(flight) is task:
            del self._flights[flight]
        if not task.cancelled():
            task.exception()  # retrieved: the waiters (if any are left) raise it themselves

    async def _fetch(self, key: _Key, request: PlanRequest, deadline: float | None) -> DeferredTools:
        plan = await self._discovery.plan_tools(request, deadline=deadline)
        definitions = plan.deferred_tools if request.include_deferred_tools else None
        found = DeferredTools(frozenset(plan.deferred_tool_names), definitions, self._clock())
        # The catalog may have moved on meanwhile: file the tools under what was read.
        self._cache[(plan.catalog_version or key[0], request.toolset, request.principal)] = found
        while len(self._cache) > self._size:
            self._cache.popitem(last=False)
        return found
