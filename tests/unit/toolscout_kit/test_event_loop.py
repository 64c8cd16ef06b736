"""The event loop every toolscout process runs on (:mod:`toolscout_kit.event_loop`)."""

from __future__ import annotations

import asyncio
import inspect
import re
import sys
from pathlib import Path

import pytest

from toolscout_kit import event_loop
from toolscout_kit.errors import ConfigError
from toolscout_kit.event_loop import EVENT_LOOP_ENV, loop_name, run

ROOT = Path(__file__).resolve().parents[3]
# Every package whose code runs in a toolscout process.
PRODUCT = (
    "toolscout_kit",
    "toolscout_cli",
    "mcp_pool_svc",
    "mcp_gateway_svc",
    "discovery_svc",
    "orchestrator_svc",
)


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


def test_every_loop_of_a_toolscout_process_is_started_by_run() -> None:
    """``asyncio.run`` or a loop made by hand anywhere else would run on asyncio's loop unnoticed."""
    starts = re.compile(r"\basyncio\.(?:run|Runner|new_event_loop)\(|\buvloop\.(?:run|install)\(")
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for package in PRODUCT
        for path in sorted((ROOT / package).rglob("*.py"))
        if path != Path(event_loop.__file__)
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if starts.search(line.split("#")[0])
    ]
    assert found == []
