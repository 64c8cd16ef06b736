"""The pool-wide probe budget: intervals that scale with the number of servers, spread with jitter,
bounded concurrency, and backing off while probes are slow."""

from __future__ import annotations

import asyncio
import random

import pytest

from mcp_pool_svc.probes import Probes
from toolscout_kit.config import PoolSettings


def probes(servers: int, **settings: float) -> Probes:
    budget = Probes(PoolSettings(**settings), random.Random(1))  # noqa: S311 - jitter, not cryptography
    for _ in range(servers):
        budget.add_server()
    return budget


def test_a_small_pool_pings_every_ping_interval() -> None:
    assert probes(10).interval == 5.0
    assert probes(100).interval == 5.0


def test_a_large_pool_stretches_the_interval_to_stay_within_the_probe_budget() -> None:
    assert probes(1000).interval == pytest.approx(50.0)  # 1,000 servers at 20 probes a second
    assert probes(1000, health_checks_per_second=100).interval == pytest.approx(10.0)
    shrinking = probes(1000)
    for _ in range(900):
        shrinking.remove_server()
    assert shrinking.interval == 5.0


def test_probes_are_spread_over_the_interval_with_jitter() -> None:
    budget = probes(1000)
    firsts = [budget.first_delay() for _ in range(2000)]
    nexts = [budget.next_delay() for _ in range(2000)]
    assert min(firsts) > 0
    assert max(firsts) <= budget.interval
    assert max(firsts) - min(firsts) > 0.8 * budget.interval * 0.8  # spread, not bunched
    assert min(nexts) >= 0.8 * budget.interval
    assert max(nexts) <= 1.2 * budget.interval
    assert len(set(nexts)) > 1000


def test_slow_or_missing_answers_stretch_the_interval_and_prompt_ones_bring_it_back() -> None:
    budget = probes(10)  # ping_timeout 4: an answer after 2 s is slow
    assert not budget.under_load
    budget.answered(None)
    budget.answered(3.0)
    assert budget.under_load
    assert budget.interval == pytest.approx(20.0)
    for _ in range(10):
        budget.answered(None)
    assert budget.interval == pytest.approx(40.0)  # at most 8x
    for _ in range(200):
        budget.answered(0.01)
    assert not budget.under_load
    assert budget.interval == 5.0


async def test_at_most_health_check_concurrency_probes_and_connect_concurrency_connections_run_at_once() -> (
    None
):
    budget = probes(100, health_check_concurrency=3, connect_concurrency=2)
    running = {"probe": 0, "connect": 0}
    most = {"probe": 0, "connect": 0}
    release, full = asyncio.Event(), asyncio.Event()

    async def hold(kind: str) -> None:
        async with budget.probing() if kind == "probe" else budget.connecting():
            running[kind] += 1
            most[kind] = max(most[kind], running[kind])
            if running == {"probe": 3, "connect": 2}:
                full.set()
            await release.wait()
            running[kind] -= 1

    tasks = [asyncio.create_task(hold(kind)) for kind in ["probe"] * 10 + ["connect"] * 10]
    async with asyncio.timeout(10):
        await full.wait()
        release.set()
        await asyncio.gather(*tasks)
    assert most == {"probe": 3, "connect": 2}
