"""The event loop every toolscout process runs on: uvloop (libuv) where it is installed, else asyncio's.

Each service's process, ``toolscout serve``, ``toolscout up`` and the pool's shard processes start
their loop with :func:`run`, nothing else. uvloop ships for Linux and macOS (the dependency's marker
leaves it out on Windows, where asyncio's own loop runs). ``TOOLSCOUT_EVENT_LOOP=asyncio`` chooses
asyncio's loop anyway, ``uvloop`` insists on uvloop; the loop a service runs on is in its
``server started`` / ``gateway started`` log line (``event_loop``).

Why: in ``bench/gateway_call_overhead.py`` interleaved against the same tree on asyncio's loop, uvloop
took 3–5 % off the pool's CPU per ``tools/call`` and 6–8 % off the gateway's, and 0.2–0.3 ms off the
call's added p50 (bench/README, round 9): their per-call work is spread thin, and the loop's own
share (callbacks, tasks, socket readiness) is one of the larger pieces left.
"""

from __future__ import annotations

import asyncio
import importlib
import os
from collections.abc import Callable, Coroutine
from typing import Any, Literal, TypeVar, get_args

from toolscout_kit.errors import ConfigError

__all__ = ["EVENT_LOOP_ENV", "LOOPS", "EventLoop", "loop_name", "run"]

T = TypeVar("T")

EVENT_LOOP_ENV = "TOOLSCOUT_EVENT_LOOP"
EventLoop = Literal["uvloop", "asyncio"]
LOOPS: tuple[EventLoop, ...] = get_args(EventLoop)


def _factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop factory, or None for asyncio's own loop (per :data:`EVENT_LOOP_ENV`).

    Raises:
        ConfigError: the variable names no loop, or names uvloop where it is not installed.
    """
    wanted = os.environ.get(EVENT_LOOP_ENV, "").strip().lower()
    if wanted not in ("", *LOOPS):
        raise ConfigError(f"{EVENT_LOOP_ENV} must be one of {', '.join(LOOPS)} (or unset), got {wanted!r}")
    if wanted == "asyncio":
        return None
    try:
        uvloop = importlib.import_module("uvloop")
    except ImportError:
        if wanted == "uvloop":
            raise ConfigError(f"{EVENT_LOOP_ENV}=uvloop, but uvloop is not installed here") from None
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on the chosen loop (see the module's doc).

    Raises:
        ConfigError: :data:`EVENT_LOOP_ENV` is not a loop this process can run (``main`` is closed
            without running).
    """
    try:
        factory = _factory()
    except ConfigError:
        main.close()
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)


def loop_name() -> EventLoop:
    """The running loop's kind for logs: ``uvloop`` or ``asyncio``."""
    module = type(asyncio.get_running_loop()).__module__
    return "uvloop" if module.startswith("uvloop") else "asyncio"
