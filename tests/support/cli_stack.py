"""`toolscout up` as a subprocess, and the `toolscout` CLI run as a real process, for e2e tests."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tests.support.fake_provider import FakeProvider
from tests.support.mcp_servers import REPO_ROOT, example_server_config, free_port, time_server_config

__all__ = [
    "ThreadedProvider",
    "UpProcess",
    "fixed_ports",
    "run_cli",
    "stack_config",
    "wait_for_search_mode",
    "wait_gone",
]

CLI = [sys.executable, "-m", "toolscout_cli"]


def stack_config(
    path: Path,
    *,
    ports: tuple[int, int, int] = (0, 0, 0),
    metrics_port: int = -1,
    provider_url: str = "http://127.0.0.1:9/v1",
    extra_servers: Mapping[str, Any] | None = None,
    extra_tool_sets: Mapping[str, Any] | None = None,
    gateway_port: int = 0,
    extra_clients: Mapping[str, Any] | None = None,
    extra_models: Mapping[str, Any] | None = None,
    extra_keys: Mapping[str, Any] | None = None,
) -> Path:
    """A config with our example servers (weather deferred), mcp-server-time (deferred) and a model."""
    pool, discovery, orchestrator = ports
    config = {
        "clients": {
            "local": {"provider": "openai", "base_url": provider_url, "api_key": "test-key"},
            **(extra_clients or {}),
        },
        "models": {"fake": {"client": "local", "model": "fake-model"}, **(extra_models or {})},
        "servers": {
            "notes": example_server_config("notes"),
            "weather": example_server_config("weather", defer_loading=True),
            "time": time_server_config(defer_loading=True),
            **(extra_servers or {}),
        },
        "tool_sets": {
            "weather_only": {"description": "just the weather", "servers": {"weather": True}},
            **(extra_tool_sets or {}),
        },
        "tool_discovery": {"enabled": True},
        "toolscout": {
            "pool": {"listen": f"127.0.0.1:{pool}", "metrics_port": metrics_port},
            "discovery": {"listen": f"127.0.0.1:{discovery}", "metrics_port": metrics_port},
            "orchestrator": {"listen": f"127.0.0.1:{orchestrator}", "metrics_port": metrics_port},
            "gateway": {"listen": f"127.0.0.1:{gateway_port}", "metrics_port": metrics_port},
        },
    }
    config.update(extra_keys or {})
    path.write_text(json.dumps(config, indent=2))
    return path


def wait_for_search_mode(metrics_url: str, mode: str, timeout: float = 120.0) -> None:
    """Waits (bounded) until discovery's mode gauge at ``metrics_url`` says it ranks with ``mode``
    (hybrid: once the tools are embedded).

    Raises:
        TimeoutError: not within ``timeout`` seconds.
    """
    sample = f'toolscout_search_mode_active{{mode="{mode}"}} 1.0'
    deadline = time.monotonic() + timeout
    while True:
        with urllib.request.urlopen(metrics_url, timeout=10) as reply:  # noqa: S310 - a local URL
            if sample in reply.read().decode().splitlines():
                return
        if time.monotonic() >= deadline:
            raise TimeoutError(f"discovery did not rank with {mode} within {timeout}s")
        time.sleep(0.1)  # the gauge has no change event to wait on


def fixed_ports() -> tuple[int, int, int]:
    return free_port(), free_port(), free_port()


def run_cli(
    *args: str, env: Mapping[str, str] | None = None, timeout: float = 60.0, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Runs ``toolscout ARGS`` as its own process (bounded) and returns what it printed."""
    full_env = {**os.environ, **(env or {})}
    if "TOOLSCOUT_CONFIG" not in (env or {}):
        # A developer's own config must not leak into the test.
        full_env.pop("TOOLSCOUT_CONFIG", None)
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        cwd=REPO_ROOT,
        input=stdin,
        check=False,
    )


class UpProcess:
    """``toolscout up -c CONFIG --json`` in the background; its JSON events arrive on a queue.

    With ``json_output=False`` it prints for a person; ``wait_for_line`` reads that.
    """

    def __init__(
        self, config: Path, *extra: str, env: Mapping[str, str] | None = None, json_output: bool = True
    ) -> None:
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        # Every event in order, including those next_event() skipped.
        self.seen: list[dict[str, Any]] = []
        self.lines: list[str] = []
        self.process = subprocess.Popen(
            [*CLI, "up", "-c", str(config), *(["--json"] if json_output else []), *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
            cwd=REPO_ROOT,
        )
        self._err_chunks: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        # stderr is drained too, so that a chatty process never blocks on a full pipe.
        self._err_reader = threading.Thread(target=self._read_err, daemon=True)
        self._err_reader.start()

    @property
    def stderr(self) -> str:
        return "".join(self._err_chunks)

    def _read_err(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self._err_chunks.append(line)

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                event = {"event": "text", "line": line}
            self.seen.append(event)
            self.events.put(event)
        self.events.put({"event": "eof"})

    def next_event(self, kind: str, timeout: float = 60.0) -> dict[str, Any]:
        """The next event of ``kind``, waiting at most ``timeout`` seconds overall."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no {kind!r} event within {timeout}s; output so far: {self.lines}")
            try:
                event = self.events.get(timeout=remaining)
            except queue.Empty:
                continue
            if event.get("event") == kind:
                return event
            if event.get("event") == "eof":
                self.process.wait(timeout=10)
                self._close()
                raise RuntimeError(
                    f"toolscout up exited ({self.process.returncode}) before {kind!r}: {self.stderr}"
                )

    def wait_for_line(self, text: str | Callable[[str], bool], timeout: float = 60.0) -> list[str]:
        """Every line printed up to the first one containing ``text`` (or for which it is true),
        waiting at most ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        wanted = text if callable(text) else (lambda line: text in line)
        while True:
            for i, line in enumerate(self.lines):
                if wanted(line):
                    return [printed.rstrip("\n") for printed in self.lines[: i + 1]]
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no line with {text!r} within {timeout}s; output so far: {self.lines}")
            try:
                event = self.events.get(timeout=remaining)
            except queue.Empty:
                continue
            if event.get("event") == "eof":
                self.process.wait(timeout=10)
                self._close()
                raise RuntimeError(f"toolscout up exited ({self.process.returncode}): {self.stderr}")

    def server_states(self, names: set[str], timeout: float = 60.0) -> dict[str, dict[str, Any]]:
        """The first reported state of each server in ``names``, waiting (bounded) for the missing ones.

        Servers slower than the pool's start-up wait report after the "ready" event.
        """
        deadline = time.monotonic() + timeout

        def known() -> dict[str, dict[str, Any]]:
            found: dict[str, dict[str, Any]] = {}
            for event in self.seen:
                if event.get("event") == "server" and event["name"] in names:
                    found.setdefault(event["name"], event)
            return found

        while set(known()) != names:
            self.next_event("server", max(deadline - time.monotonic(), 0.01))
        return known()

    def wait_ready(self, timeout: float = 60.0) -> dict[str, str]:
        return dict(self.next_event("ready", timeout)["endpoints"])

    def stop(self, sig: int = signal.SIGINT, timeout: float = 30.0) -> int:
        """Signals the process, waits for it and for its output to be read; returns its exit code."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
            self._close()
            # What it logged while stopping says what held it up.
            raise TimeoutError(
                f"toolscout up did not stop within {timeout}s of signal {sig}; it was killed. "
                f"Its stderr ends with:\n{self.stderr[-6000:]}\nIts output ends with:\n"
                f"{''.join(self.lines[-20:])}"
            ) from None
        self._close()
        return self.process.returncode

    def _close(self) -> None:
        self._reader.join(10)
        self._err_reader.join(10)
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()


class ThreadedProvider:
    """The fake LLM provider on its own event loop thread, for a stack running in another process."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.fake = FakeProvider()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> FakeProvider:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.fake.__aenter__(), self.loop).result(15)
        return self.fake

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.fake.__aexit__(), self.loop).result(15)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


def wait_gone(pids: set[int], timeout: float = 10.0) -> set[int]:
    """Waits (bounded) until none of ``pids`` is alive; returns those still alive at the end."""
    import psutil

    procs = []
    for pid in pids:
        try:
            procs.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            continue
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    return {p.pid for p in alive if p.status() != psutil.STATUS_ZOMBIE}
