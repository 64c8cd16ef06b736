"""The deferred-tools cache: one fetch per key at a time, fetches of different toolsets side by side,
and cache hits that never wait behind a fetch in flight."""

from __future__ import annotations

import asyncio
from collections import Counter

from toolscout.client import PlanRequest, ToolPlan, ToolsetRef

from orchestrator_svc.deferred import DeferredToolsCache

WAIT = 5.0


class SlowDiscovery:
    """Answers PlanTools only when the test releases the toolset; records which fetches are in flight."""

    def __init__(self) -> None:
        self.release: dict[str, asyncio.Event] = {}
        self.started: dict[str, asyncio.Event] = {}
        self.fetches: Counter[str] = Counter()

    def gate(self, toolset: str) -> None:
        self.release[toolset] = asyncio.Event()
        self.started[toolset] = asyncio.Event()

    async def plan_tools(self, request: PlanRequest, *, deadline: float | None) -> ToolPlan:
        toolset = request.toolset.name
        self.fetches[toolset] += 1
        if toolset in self.release:
            self.started[toolset].set()
            await self.release[toolset].wait()
        return ToolPlan(deferred_tool_names=(f"{toolset}_tool",), catalog_version="v1")


async def get(cache: DeferredToolsCache, toolset: str) -> frozenset[str]:
    found = await cache.get(ToolsetRef(toolset), catalog_version="v1", provider="openai", deadline=None)
    return found.names


async def test_two_toolsets_are_fetched_side_by_side() -> None:
    discovery = SlowDiscovery()
    discovery.gate("a")
    discovery.gate("b")
    cache = DeferredToolsCache(discovery)
    first = asyncio.create_task(get(cache, "a"))
    await asyncio.wait_for(discovery.started["a"].wait(), WAIT)
    second = asyncio.create_task(get(cache, "b"))
    # The second toolset's fetch starts while the first is still waiting for discovery.
    await asyncio.wait_for(discovery.started["b"].wait(), WAIT)
    discovery.release["b"].set()
    assert await asyncio.wait_for(second, WAIT) == frozenset({"b_tool"})
    assert not first.done()
    discovery.release["a"].set()
    assert await asyncio.wait_for(first, WAIT) == frozenset({"a_tool"})


async def test_a_hit_does_not_wait_behind_a_fetch_in_flight() -> None:
    discovery = SlowDiscovery()
    cache = DeferredToolsCache(discovery)
    assert await get(cache, "cached") == frozenset({"cached_tool"})
    discovery.gate("slow")
    slow = asyncio.create_task(get(cache, "slow"))
    await asyncio.wait_for(discovery.started["slow"].wait(), WAIT)
    assert await asyncio.wait_for(get(cache, "cached"), WAIT) == frozenset({"cached_tool"})
    assert not slow.done()
    discovery.release["slow"].set()
    await asyncio.wait_for(slow, WAIT)
    assert discovery.fetches == Counter({"cached": 1, "slow": 1})


async def test_concurrent_misses_of_one_toolset_fetch_it_once() -> None:
    discovery = SlowDiscovery()
    discovery.gate("a")
    cache = DeferredToolsCache(discovery)
    waiters = [asyncio.create_task(get(cache, "a")) for _ in range(5)]
    await asyncio.wait_for(discovery.started["a"].wait(), WAIT)
    discovery.release["a"].set()
    assert await asyncio.wait_for(asyncio.gather(*waiters), WAIT) == [frozenset({"a_tool"})] * 5
    assert discovery.fetches == Counter({"a": 1})


async def test_a_failed_fetch_is_not_cached_and_every_waiter_sees_the_error() -> None:
    class FailingOnce(SlowDiscovery):
        async def plan_tools(self, request: PlanRequest, *, deadline: float | None) -> ToolPlan:
            self.fetches["a"] += 1
            if self.fetches["a"] == 1:
                self.started["a"].set()
                await self.release["a"].wait()
                raise LookupError("discovery said no")
            return ToolPlan(deferred_tool_names=("a_tool",), catalog_version="v1")

    discovery = FailingOnce()
    discovery.gate("a")
    cache = DeferredToolsCache(discovery)
    waiters = [asyncio.create_task(get(cache, "a")) for _ in range(3)]
    await asyncio.wait_for(discovery.started["a"].wait(), WAIT)
    discovery.release["a"].set()
    results = await asyncio.wait_for(asyncio.gather(*waiters, return_exceptions=True), WAIT)
    assert all(isinstance(r, LookupError) for r in results)
    assert await get(cache, "a") == frozenset({"a_tool"})


class PerUserDiscovery:
    """Each principal's deferred tools (a per_user server lists its own to each); records who asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def plan_tools(self, request: PlanRequest, *, deadline: float | None) -> ToolPlan:
        self.asked.append(request.principal)
        return ToolPlan(
            deferred_tool_names=(f"notebook_{request.principal or 'stack'}",), catalog_version="v1"
        )


async def test_each_principal_gets_their_own_deferred_tools_when_the_config_has_per_user_servers() -> None:
    discovery, now = PerUserDiscovery(), [0.0]
    cache = DeferredToolsCache(discovery, per_user=True, clock=lambda: now[0])
    for principal in ("alice", "bob", "alice", "", ""):
        found = await cache.get(
            ToolsetRef(), catalog_version="v1", principal=principal, provider="openai", deadline=None
        )
        assert found.names == frozenset({f"notebook_{principal or 'stack'}"})
    assert discovery.asked == ["alice", "bob", ""]  # one fetch each, kept per principal
    # A principal's own are asked again after 10 s (a sign-in changes them); the stack's are not.
    now[0] = 10.0
    for principal in ("alice", ""):
        await cache.get(
            ToolsetRef(), catalog_version="v1", principal=principal, provider="openai", deadline=None
        )
    assert discovery.asked == ["alice", "bob", "", "alice"]
    # Without per_user servers nobody's view differs: one fetch, shared by every principal.
    shared = PerUserDiscovery()
    cache = DeferredToolsCache(shared)
    for principal in ("alice", "bob"):
        await cache.get(
            ToolsetRef(), catalog_version="v1", principal=principal, provider="openai", deadline=None
        )
    assert shared.asked == [""]
