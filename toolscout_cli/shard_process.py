"""Each pool shard of ``toolscout up --pool-shards N`` in its own process: the child, and ``up``'s
handle on it.

A shard in its own process fails alone, as a shard of a real deployment does (a pod, or one of the
``toolscout serve pool --shard K/N`` processes of the README's recipe): killing it takes down its
MCP servers and nothing else, discovery marks their tools unavailable, and calls to other shards
go on. ``up`` then restarts it on the same address (after 1 s, backing off to 30 s while it keeps
dying at once) and says so.

The child is ``python -m toolscout_cli.shard_process SPEC`` (``SPEC`` is JSON: the config path and
the keys ``up`` overrides, the shard, where to listen, how to log). It loads the config exactly as
``up`` did, starts the shard's pool and reports on stdout, one JSON object per line:
``{"event": "server", ...}`` on each server state change, then
``{"event": "listening", "address": ..., "metrics_port": ...}``. It logs to stderr, which ``up``
points at its log file. SIGTERM stops it gracefully; so does ``up`` dying (Linux
``PR_SET_PDEATHSIG``), so no shard outlives the stack.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import dataclasses
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import structlog

from toolscout_kit import event_loop
from toolscout_kit.entrypoint import skip_exit_collection
from toolscout_kit.errors import ConfigError
from toolscout_kit.logging import configure_logging

__all__ = ["ShardProcess", "ShardSpec", "log_into", "main"]

MODULE = "toolscout_cli.shard_process"
_PR_SET_PDEATHSIG = 1
_RESTART_DELAY = 1.0
_RESTART_DELAY_MAX = 30.0
_RAN_LONG = 30.0  # a shard that ran this long before dying is restarted after the first delay again
_STOP_MARGIN = 15.0  # beyond the shard's shutdown grace, before it is killed

Event = dict[str, Any]


def log_into(level: str, stream: TextIO) -> None:
    """The services' JSON logs (and stdlib logging) into ``stream`` instead of stdout."""
    configure_logging(level)
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=stream))
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler) and handler.stream is sys.stderr:
            handler.setStream(stream)


@dataclass(frozen=True)
class ShardSpec:
    """What one shard process needs to know (JSON on its command line)."""

    config: str
    shard: int
    count: int
    listen: str
    metrics_port: int
    log_level: str
    parent: int
    overrides: dict[str, Any] = field(default_factory=dict)

    def argv(self) -> list[str]:
        return [sys.executable, "-m", MODULE, json.dumps(dataclasses.asdict(self))]


# --- the child ----------------------------------------------------------------------------------


def _emit(event: Event) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def _die_with_parent(parent: int) -> None:
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:  # it died before the line above: nobody would stop this process
        sys.exit(1)


async def _serve(spec: ShardSpec) -> None:
    # Imported here: the parent imports this module for ShardProcess without starting a pool.
    from toolscout.client import ServerStatus  # noqa: PLC0415

    from mcp_pool_svc.server import build_server  # noqa: PLC0415
    from toolscout_kit.config import load_config  # noqa: PLC0415
    from toolscout_kit.host import serve_until_signal  # noqa: PLC0415
    from toolscout_kit.shards import ShardIdentity  # noqa: PLC0415

    def changed(status: ServerStatus) -> None:
        _emit(
            {
                "event": "server",
                "name": status.name,
                "state": str(status.state),
                "tools": status.tool_count,
                "transport": status.transport,
                "error": status.last_error,
                "deferred": status.defer_loading,
            }
        )

    config = load_config(spec.config, overrides=spec.overrides)
    # Until it serves, SIGTERM cancels the start-up (which stops every MCP server it started).
    loop, task = asyncio.get_running_loop(), asyncio.current_task()
    assert task is not None
    loop.add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        running = await build_server(
            config,
            listen=spec.listen,
            metrics_port=spec.metrics_port,
            shard=ShardIdentity(spec.shard, spec.count),
            on_server_change=changed,
        )
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
    _emit({"event": "listening", "address": running.address, "metrics_port": running.metrics_port})
    await serve_until_signal(running)


def main(argv: Sequence[str] | None = None) -> int:
    spec = ShardSpec(**json.loads((argv or sys.argv)[-1]))
    _die_with_parent(spec.parent)
    log_into(spec.log_level, sys.stderr)
    try:
        event_loop.run(_serve(spec))
    except (asyncio.CancelledError, KeyboardInterrupt):
        return 0  # stopped while starting
    except ConfigError as err:
        structlog.get_logger(MODULE).error("pool shard cannot start", shard=spec.shard, error=err.message)
        return 2
    finally:
        skip_exit_collection()
    return 0


# --- up's handle on one ----------------------------------------------------------------------------


class ShardProcess:
    """One shard process of ``up``: started, restarted on the same address when it dies, stopped.

    ``report`` receives the child's events (``server``) and this handle's own: ``shard_exited``
    (``shard``, ``code``, ``signal``) and ``shard_restarted`` (``shard``, ``address``).
    """

    def __init__(
        self, spec: ShardSpec, report: Callable[[Event], None], *, stderr: TextIO | None, grace: float
    ) -> None:
        self.name = f"pool-{spec.shard}"
        self._spec = spec
        self._report = report
        self._stderr = stderr
        self._grace = grace
        self.address = ""
        self.metrics_port: int | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._stopping = False
        self._listening: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._supervisor: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Starts the process and returns once it listens.

        Raises:
            ConfigError: it exited before listening (its reason is in the log).
        """
        self._supervisor = asyncio.create_task(self._supervise(), name=f"up-{self.name}")
        await asyncio.shield(self._listening)

    async def _run_once(self, spec: ShardSpec, listening: Callable[[Event], None]) -> int:
        process = self._process = await asyncio.create_subprocess_exec(
            *spec.argv(),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=self._stderr,
            # Its own session: a terminal's Ctrl-C reaches `up`, which stops the shards last.
            start_new_session=True,
        )
        assert process.stdout is not None
        async for raw in process.stdout:
            try:
                event = json.loads(raw)
            except ValueError:
                continue  # not ours (nothing else should write to its stdout)
            if event.get("event") == "listening":
                listening(event)
            else:
                self._report(event)
        return await process.wait()

    async def _supervise(self) -> None:
        spec, delay = self._spec, _RESTART_DELAY
        restarting = False

        def listening(event: Event) -> None:
            self.address, self.metrics_port = event["address"], event["metrics_port"]
            if restarting:
                self._report({"event": "shard_restarted", "shard": spec.shard, "address": self.address})
            elif not self._listening.done():
                self._listening.set_result(None)

        while True:
            started = time.monotonic()
            code = await self._run_once(spec, listening)
            if self._stopping:
                return
            if not self._listening.done():
                self._listening.set_exception(
                    ConfigError(
                        f"pool shard {spec.shard} exited ({_exit_text(code)}) before it listened; see the log"
                    )
                )
                return
            name = signal.Signals(-code).name if code < 0 else None
            self._report({"event": "shard_exited", "shard": spec.shard, "code": code, "signal": name})
            # Back where callers already look for it: the same address (and metrics port).
            spec = dataclasses.replace(
                spec,
                listen=self.address,
                metrics_port=self.metrics_port if self.metrics_port else spec.metrics_port,
            )
            restarting = True
            delay = _RESTART_DELAY if time.monotonic() - started > _RAN_LONG else delay
            await asyncio.sleep(delay)
            delay = min(delay * 2, _RESTART_DELAY_MAX)

    async def stop(self) -> None:
        """SIGTERM, then SIGKILL after the shard's grace (plus a margin); waits for it."""
        self._stopping = True
        if self._supervisor is not None:
            self._supervisor.cancel()  # no restart from here on (a process it was starting is killed)
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
        process = self._process
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
            try:
                await asyncio.wait_for(process.wait(), self._grace + _STOP_MARGIN)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        if not self._listening.done():
            self._listening.cancel()


def _exit_text(code: int) -> str:
    return f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"


if __name__ == "__main__":
    sys.exit(main())
