"""The event loop every toolscout process runs on (:mod:`toolscout_kit.event_loop`)."""

from __future__ import annotations

import asyncio
import inspect
import sys

import pytest

from toolscout_kit.errors import ConfigError
from toolscout_kit.event_loop import EVENT_LOOP_ENV, loop_name, run


async def _running() -> tuple[str, str]:
    return loop_name(), type(asyncio.get_running_loop()).__module__


@pytest.mark.parametrize(
    ("chosen", "expected"),
    [(None, "uvloop"), ("uvloop", "uvloop"), (" UVLoop ", "uvloop"), ("asyncio", "asyncio"), ("", "uvloop")],
)
def test_the_loop_is_uvloop_unless_asyncio_is_chosen(
    monkeypatch: pytest.MonkeyPatch, chosen: str | None, expected: str
) -> None:
    if chosen is None:
        monkeypatch.delenv(EVENT_LOOP_ENV, raising=False)
    else:
        monkeypatch.setenv(EVENT_LOOP_ENV, chosen)
    name, module = run(_running())
    assert name == expected
    assert module.startswith("uvloop" if expected == "uvloop" else "asyncio")


def test_a_value_that_is_no_loop_is_refused_and_nothing_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(EVENT_LOOP_ENV, "trio")
    main = _running()
    with pytest.raises(
        ConfigError, match=r"TOOLSCOUT_EVENT_LOOP must be one of uvloop, asyncio \(or unset\), got 'trio'"
    ):
        run(main)
    assert inspect.getcoroutinestate(main) == inspect.CORO_CLOSED  # closed, never run, no warning


def test_without_uvloop_asyncio_runs_unless_uvloop_is_insisted_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop -> ImportError, as on Windows
    monkeypatch.delenv(EVENT_LOOP_ENV, raising=False)
    assert run(_running())[0] == "asyncio"
    monkeypatch.setenv(EVENT_LOOP_ENV, "uvloop")
    with pytest.raises(ConfigError, match="TOOLSCOUT_EVENT_LOOP=uvloop, but uvloop is not installed here"):
        run(_running())
