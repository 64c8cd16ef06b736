"""Work in flight that a stop ends: only the cancellation end_all made is absorbed, and said."""

from __future__ import annotations

import asyncio

import pytest

from toolscout_kit.inflight import InFlight


async def _piece(work: InFlight, started: asyncio.Event, *, counted: bool = True) -> str:
    with work.track(counted) as piece:
        started.set()
        await asyncio.sleep(3600)
        return "finished"
    return "ended" if piece.ended else "absorbed without being ended"


async def test_end_all_ends_the_tracked_work_and_each_block_says_so() -> None:
    work = InFlight()
    started = [asyncio.Event(), asyncio.Event()]
    tasks = [asyncio.create_task(_piece(work, event)) for event in started]
    await asyncio.gather(*(event.wait() for event in started))
    assert not work.idle.is_set()
    assert work.end_all() == 2
    assert await asyncio.gather(*tasks) == ["ended", "ended"]
    assert work.idle.is_set()
    assert all(task.cancelling() == 0 for task in tasks)


async def test_any_other_cancellation_goes_on() -> None:
    work = InFlight()
    started = asyncio.Event()
    task = asyncio.create_task(_piece(work, started))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert work.idle.is_set()
    assert work.end_all() == 0


async def test_untracked_work_is_neither_waited_for_nor_ended() -> None:
    work = InFlight()
    started = asyncio.Event()
    task = asyncio.create_task(_piece(work, started, counted=False))
    await started.wait()
    assert work.idle.is_set()
    assert await work.end_after(0.01) == 0
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_end_after_waits_for_work_that_finishes_in_time() -> None:
    work = InFlight()

    async def quick() -> None:
        with work.track():
            await asyncio.sleep(0.01)

    task = asyncio.create_task(quick())
    await asyncio.sleep(0)
    assert await work.end_after(30) == 0
    await task
