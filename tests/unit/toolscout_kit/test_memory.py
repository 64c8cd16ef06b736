"""Handing freed C heap back to the OS after a large catalog (:mod:`toolscout_kit.memory`)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap

import pytest

from toolscout_kit import memory

# Holes in glibc's heap that free() cannot give back by itself (a kept small block after each
# freed large one), then a trim: RSS in MiB before and after.
_FRAGMENTED = textwrap.dedent(
    """
    import json, os
    from toolscout_kit.memory import release_freed_memory

    def rss():
        with open(f"/proc/{os.getpid()}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    large, kept = [], []
    for i in range(40_000):
        large.append(bytes(8_000) + str(i).encode())
        kept.append(bytes(600) + str(i).encode())
    del large
    before = rss()
    released = release_freed_memory()
    print(json.dumps({"before": before, "after": rss(), "released": released, "kept": len(kept)}))
    """
)


def test_a_trim_gives_the_freed_heap_back() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _FRAGMENTED], capture_output=True, text=True, timeout=120, check=True
    )
    figures = json.loads(done.stdout)
    assert figures["released"] is True
    # 40,000 freed blocks of 8 KB: about 300 MiB of whole free pages between the kept ones.
    assert figures["before"] - figures["after"] > 200, figures


async def test_large_work_schedules_one_trim_a_second_small_work_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trims: list[bool] = []
    monkeypatch.setattr(memory, "release_freed_memory", lambda: trims.append(True) or True)
    monkeypatch.setattr(memory, "_DELAY", 0.05)
    monkeypatch.setattr(memory, "_SCHEDULE", memory._Schedule())
    memory.release_soon(memory.LARGE_CATALOG_TOOLS - 1)
    await asyncio.sleep(0.2)
    assert trims == []
    for _ in range(5):
        memory.release_soon(50_000)
    await asyncio.sleep(0.2)
    assert trims == [True]  # five pieces of work within the delay share one trim
    memory.release_soon(50_000)
    await asyncio.sleep(0.2)
    assert trims == [True, True]


async def test_without_glibc_nothing_is_trimmed_nor_scheduled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "_malloc_trim", lambda: None)
    monkeypatch.setattr(memory, "_SCHEDULE", memory._Schedule())
    assert memory.release_freed_memory() is False
    memory.release_soon(50_000)
    assert memory._SCHEDULE.due == 0.0


def test_outside_an_event_loop_nothing_is_scheduled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "_SCHEDULE", memory._Schedule())
    memory.release_soon(50_000)
    assert memory._SCHEDULE.due == 0.0
