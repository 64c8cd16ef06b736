"""Real MCP servers for tests: our examples, the misbehaving fixture, mcp-server-time, server-everything.

Everything here starts real processes. Waits are bounded; HTTP servers get a free port on
127.0.0.1 and are polled until they answer. Import from here rather than hard-coding paths.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio
import psutil  # type: ignore[import-untyped]  # no types-psutil in the dev group

from tests.support.node import install_lock

__all__ = [
    "EVERYTHING_PACKAGE",
    "EVERYTHING_VERSION",
    "EXAMPLE_SERVERS",
    "FILESYSTEM_PACKAGE",
    "FILESYSTEM_VERSION",
    "MEMORY_PACKAGE",
    "MEMORY_VERSION",
    "MISBEHAVING_SERVER",
    "RELAY_SERVER",
    "REPO_ROOT",
    "TS_SDK_PACKAGE",
    "TS_SDK_VERSION",
    "HttpServer",
    "everything_bin",
    "example_server_config",
    "filesystem_bin",
    "free_port",
    "live_descendants",
    "logging_fixture_pool",
    "memory_bin",
    "memory_server_config",
    "misbehaving_config",
    "running_everything",
    "running_example_http",
    "running_relay_http",
    "time_server_config",
    "ts_sdk_dir",
    "wait_for_lines",
    "wait_until_gone",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES_DIR = REPO_ROOT / "examples" / "servers"
EXAMPLE_SERVERS: dict[str, Path] = {
    name: EXAMPLES_DIR / f"{name}.py" for name in ("notes", "weather", "text", "media")
}
MISBEHAVING_SERVER = REPO_ROOT / "tests" / "fixtures" / "misbehaving" / "server.py"
RELAY_SERVER = REPO_ROOT / "tests" / "fixtures" / "relay" / "server.py"

EVERYTHING_PACKAGE = "@modelcontextprotocol/server-everything"
EVERYTHING_VERSION = "2026.8.31"
TS_SDK_PACKAGE = "@modelcontextprotocol/sdk"
TS_SDK_VERSION = "1.32.2"
FILESYSTEM_PACKAGE = "@modelcontextprotocol/server-filesystem"
FILESYSTEM_VERSION = "2026.8.31"
MEMORY_PACKAGE = "@modelcontextprotocol/server-memory"
MEMORY_VERSION = "2026.8.31"
NPM_PREFIX = REPO_ROOT / ".cache" / "npm"


def example_server_config(name: str, **extra: Any) -> dict[str, Any]:
    """A stdio server config entry (as in the config file) for one of ``examples/servers``."""
    return {"command": sys.executable, "args": [str(EXAMPLE_SERVERS[name])], **extra}


def misbehaving_config(*flags: str, **extra: Any) -> dict[str, Any]:
    """A stdio server config entry for the misbehaving fixture with the given flags."""
    return {"command": sys.executable, "args": [str(MISBEHAVING_SERVER), *flags], **extra}


def logging_fixture_pool(tmp_path: Path, **pool: Any) -> dict[str, Any]:
    """A pool's config (to parse) of the misbehaving fixture logging its calls and cancellations
    into ``tmp_path`` (``called.log``, ``cancelled.log``) and a ``dead`` server that exits at start;
    quick to restart, slow to retry a failed server; ``pool`` adds or replaces pool settings."""
    return {
        "servers": {
            "fixture": misbehaving_config(
                "--cancel-log", str(tmp_path / "cancelled.log"), "--call-log", str(tmp_path / "called.log")
            ),
            "dead": misbehaving_config("--exit-at-start"),
        },
        "toolscout": {
            "pool": {"initial_backoff": 0.05, "crash_loop_restarts": 1, "failed_retry_interval": 300, **pool}
        },
    }


def time_server_config(**extra: Any) -> dict[str, Any]:
    """``mcp-server-time`` (PyPI, installed in the venv) over stdio."""
    return {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"], **extra}


def _npm_bin(package: str, version: str, exe_name: str, timeout: float) -> Path:
    """An npm package's executable, installed at the pinned version under NPM_PREFIX on first use.

    Raises:
        RuntimeError: npm is missing or the install failed.
    """
    exe = NPM_PREFIX / "node_modules" / ".bin" / exe_name
    _npm_install(package, version, timeout)
    if not exe.exists():
        raise RuntimeError(f"npm install {package}@{version} did not install {exe_name}")
    return exe


def _npm_install(package: str, version: str, timeout: float) -> Path:
    """Installs ``package@version`` under NPM_PREFIX (a no-op when there); returns its folder.

    Raises:
        RuntimeError: npm is missing or the install failed.
    """
    folder = NPM_PREFIX / "node_modules" / Path(*package.split("/"))
    manifest = folder / "package.json"
    npm = shutil.which("npm")
    with install_lock():
        if manifest.exists() and f'"version": "{version}"' in manifest.read_text():
            return folder
        if npm is None:
            raise RuntimeError(f"npm is not installed; it is needed for {package}")
        NPM_PREFIX.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [
                npm,
                "install",
                "--prefix",
                str(NPM_PREFIX),
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                f"{package}@{version}",
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    if done.returncode != 0 or not manifest.exists():
        raise RuntimeError(f"npm install {package}@{version} failed: {done.stderr[-2000:]}")
    return folder


def ts_sdk_dir(timeout: float = 300.0) -> Path:
    """The npm folder holding the MCP TypeScript SDK at the pinned version (a client to test with).

    Raises:
        RuntimeError: npm is missing or the install failed.
    """
    _npm_install(TS_SDK_PACKAGE, TS_SDK_VERSION, timeout)
    return NPM_PREFIX


def everything_bin(timeout: float = 300.0) -> Path:
    """The ``mcp-server-everything`` executable, installed at the pinned version on first use.

    Installs with ``npm install --prefix <repo>/.cache/npm`` (a no-op when already there).

    Raises:
        RuntimeError: npm is missing or the install failed.
    """
    return _npm_bin(EVERYTHING_PACKAGE, EVERYTHING_VERSION, "mcp-server-everything", timeout)


def filesystem_bin(timeout: float = 300.0) -> Path:
    """The npm filesystem server's executable (its allowed folders are its arguments), pinned.

    Raises:
        RuntimeError: npm is missing or the install failed.
    """
    return _npm_bin(FILESYSTEM_PACKAGE, FILESYSTEM_VERSION, "mcp-server-filesystem", timeout)


def memory_bin(timeout: float = 300.0) -> Path:
    """The npm memory server's executable (a knowledge graph in a JSON-lines file), pinned.

    Its writes rewrite the whole file, so concurrent ones can lose each other's entities: the
    third-party server that shows why writes are serialized by default.

    Raises:
        RuntimeError: npm is missing or the install failed.
    """
    return _npm_bin(MEMORY_PACKAGE, MEMORY_VERSION, "mcp-server-memory", timeout)


def memory_server_config(memory_file: Path, **extra: Any) -> dict[str, Any]:
    """A stdio config entry for the npm memory server keeping its graph in ``memory_file``."""
    return {"command": str(memory_bin()), "env": {"MEMORY_FILE_PATH": str(memory_file)}, **extra}


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A port free on 127.0.0.1 a moment ago, below the kernel's ephemeral range.

    Tests name ports before their servers start (in a config, on a command line). A port the
    kernel hands out for port 0 lies in the ephemeral range, where any outgoing connection (the
    tests make many) can take it meanwhile and hold it: fresh runs failed with "address already in
    use" that way (a pool shard, the OAuth login's redirect). Below that range only another
    listener can take it, and it would have to pick the same port in the same moment."""
    low = _ephemeral_low()
    for _ in range(200):
        port = secrets.randbelow(max(low - 20_000, 1)) + 20_000
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class HttpServer:
    url: str
    port: int
    process: subprocess.Popen[bytes]


def _wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with status {process.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            # Polling a port is the only readiness signal these servers give; the wait is bounded.
            time.sleep(0.05)
    raise TimeoutError(f"nothing listened on 127.0.0.1:{port} within {timeout}s")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=5)


@contextmanager
def _running(
    argv: list[str], *, port: int, path: str, env: Mapping[str, str] | None = None, timeout: float = 30.0
) -> Iterator[HttpServer]:
    process = subprocess.Popen(
        argv,
        env={**os.environ, "PORT": str(port), **(env or {})},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _wait_for_port(port, process, timeout)
        yield HttpServer(url=f"http://127.0.0.1:{port}{path}", port=port, process=process)
    finally:
        _stop(process)


@contextmanager
def running_relay_http(record: Path, *flags: str, transport: str = "http") -> Iterator[HttpServer]:
    """``tests/fixtures/relay/server.py`` over HTTP on 127.0.0.1 (``transport``: ``http``, streamable
    HTTP at revision 2025-11-25; ``sse``, the SSE transport at ``/sse``; ``dual-http``), recording
    to ``record``; ``flags`` as it takes them."""
    port = free_port()
    argv = [sys.executable, str(RELAY_SERVER), str(record), transport, "--port", str(port), *flags]
    with _running(argv, port=port, path="/sse" if transport == "sse" else "/mcp") as server:
        yield server


@contextmanager
def running_everything(mode: Literal["sse", "streamableHttp"], timeout: float = 30.0) -> Iterator[HttpServer]:
    """server-everything over SSE (``/sse``) or streamable HTTP (``/mcp``) on a free port.

    Its HTTP modes bind every interface; only the port is ours to choose (``PORT``).
    """
    exe = everything_bin()
    port = free_port()
    path = "/sse" if mode == "sse" else "/mcp"
    with _running([str(exe), mode], port=port, path=path, timeout=timeout) as server:
        yield server


@contextmanager
def running_example_http(
    name: str, transport: Literal["sse", "streamable-http"], timeout: float = 30.0, port: int | None = None
) -> Iterator[HttpServer]:
    """One of our example servers over SSE (``/sse``) or streamable HTTP (``/mcp``) on 127.0.0.1."""
    port = port or free_port()
    path = "/sse" if transport == "sse" else "/mcp"
    argv = [sys.executable, str(EXAMPLE_SERVERS[name]), transport, "--port", str(port)]
    with _running(argv, port=port, path=path, timeout=timeout) as server:
        yield server


def live_descendants() -> set[int]:
    """Pids of this process's live (non-zombie) descendants."""
    alive = set()
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                alive.add(child.pid)
        except psutil.NoSuchProcess:
            continue
    return alive


async def wait_until_gone(pids: set[int] | list[int], within: float = 10.0) -> set[int]:
    """Waits (bounded) until none of ``pids`` is alive; returns those still alive at the end.

    Async on purpose: the pool kills processes from the event loop, which must keep running.
    """
    import asyncio

    def alive() -> set[int]:
        out = set()
        for pid in pids:
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    out.add(pid)
            except psutil.NoSuchProcess:
                continue
        return out

    deadline = time.monotonic() + within
    remaining = alive()
    while remaining and time.monotonic() < deadline:
        # Process exit gives no event we can wait on from here; poll, bounded by the deadline.
        await asyncio.sleep(0.05)
        remaining = alive()
    return remaining


async def wait_for_lines(path: Path, count: int, within: float = 10.0) -> list[str]:
    """The file's lines once it has ``count`` of them, or what it has after ``within`` seconds.

    The misbehaving fixture appends to such files from its own process, which gives us no event
    to wait on, so this polls, bounded by ``within``.
    """
    import asyncio

    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        apath = anyio.Path(path)
        lines = (await apath.read_text()).splitlines() if await apath.exists() else []
        if len(lines) >= count or loop.time() > deadline:
            return lines
        await asyncio.sleep(0.02)
