"""Work in flight that a service's stop ends once its grace is over, with an answer that says so.

A service keeps an :class:`InFlight` per kind of work (the gateway's tool calls and HTTP requests,
the orchestrator's chats). The task doing one piece of work runs it inside ``with work.track() as
piece:``. When the stop's grace is over, :meth:`InFlight.end_all` cancels every task still inside;
for such a task the block absorbs that one cancellation (``piece.ended`` is then true), and the
code after the block answers for the work cut short: "outcome unknown" for a tool call or a chat,
a 503 for a request. Any other cancellation (the caller went away) goes on as before.
"""

from __future__ import annotations

import asyncio
import contextlib
from types import TracebackType
from typing import Any

__all__ = ["InFlight", "Piece"]


class Piece:
    """One piece of work being tracked; ``ended``: :meth:`InFlight.end_all` cut it short."""

    __slots__ = ("_task", "_work", "ended")

    def __init__(self, work: InFlight | None) -> None:
        self._work = work
        self._task: asyncio.Task[Any] | None = None
        self.ended = False

    def __enter__(self) -> Piece:
        work = self._work
        if work is not None:
            task = asyncio.current_task()
            if task is None:  # (never: a request, call or chat is answered in a task)
                raise RuntimeError("work in flight outside a task")
            self._task = task
            work._running.add(task)
            work.idle.clear()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        work, task = self._work, self._task
        if work is None or task is None:
            return False
        ended = task in work._ended
        work._running.discard(task)
        work._ended.discard(task)
        if not work._running:
            work.idle.set()
        if ended and exc_type is asyncio.CancelledError:
            task.uncancel()
            self.ended = True
            return True
        return False


class InFlight:
    """The tasks doing one kind of work; ``idle`` is set whenever there are none."""

    def __init__(self) -> None:
        self._running: set[asyncio.Task[Any]] = set()
        self._ended: set[asyncio.Task[Any]] = set()
        self.idle = asyncio.Event()
        self.idle.set()

    def track(self, counted: bool = True) -> Piece:
        """A context for the current task's piece of work (``counted=False``: one that is not
        tracked at all, such as an endless stream, which the stop ends another way)."""
        return Piece(self if counted else None)

    def end_all(self) -> int:
        """Cancels every task still doing this work; returns how many. Each one's block absorbs
        the cancellation and says so (``Piece.ended``)."""
        ending = [task for task in self._running if not task.done()]
        for task in ending:
            self._ended.add(task)
            task.cancel()
        return len(ending)

    async def end_after(self, within: float) -> int:
        """Waits up to ``within`` seconds for the work to be done, then :meth:`end_all`."""
        if not self.idle.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.idle.wait(), within)
        return self.end_all()
