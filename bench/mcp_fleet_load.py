"""Start-up, memory and request rate of the simulated MCP fleet (``bench/mcp_fleet.py``).

Starts the fleet (1,000 servers × 50 tools by default) in its own process and measures:
  * start: process spawn → ``listening`` and → every server up (``ready``), and its RSS then;
  * sweep: ``tools/list`` of every server (50,000 tools) over 2026-07-28 stateless POSTs, 32 at once;
  * stateless: ``--seconds`` of a mixed load, each worker repeating ``tools/list`` + ``tools/call`` on a
    random server, as bare 2026-07-28 JSON-RPC POSTs on a shared httpx2 client (the cheapest client);
  * sessions: the same mix through the SDK's ``ClientSession`` on handshake-era sessions (what the
    pool does today), one session per worker on distinct servers;
  * every: a handshake-era SDK session (initialize + tools/list) to all servers, held open at once,
    as a pool opens them at start: time, the fleet's RSS with all open, the client's RSS and CPU per
    session, with one HTTP client per session (the SDK default) and with one shared HTTP client,
    and over 2026-07-28 (discover, no server-side session) with a shared client;
  * placement: servers per shard over the fleet's names for 1, 2, 4 and 5 shards, and moves 4 → 5;
  * the fleet's RSS and CPU seconds after each phase: requests per fleet CPU-second is its capacity
    when the client is not competing for the same cores.

Run: uv run --frozen python bench/mcp_fleet_load.py [--servers 1000] [--tools 50] [--seconds 10] [--workers 32]
Prints the figures and writes bench/results/mcp_fleet.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import random
import select
import signal
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import psutil  # type: ignore[import-untyped]  # no types-psutil in the dev group
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.inbound import MCP_METHOD_HEADER, MCP_NAME_HEADER, MCP_PROTOCOL_VERSION_HEADER
from toolscout.client import Placement, moved_servers
from toolscout.client import ServerPlacement as ServerRule

ROOT = Path(__file__).resolve().parents[1]
FLEET = ROOT / "bench" / "mcp_fleet.py"
RESULTS = ROOT / "bench" / "results" / "mcp_fleet.json"
MODERN = "2026-07-28"
ENVELOPE = {
    types.PROTOCOL_VERSION_META_KEY: MODERN,
    types.CLIENT_INFO_META_KEY: {"name": "mcp-fleet-load", "version": "0"},
    types.CLIENT_CAPABILITIES_META_KEY: {},
}


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3) if ordered else float("nan")


def _read_line(process: subprocess.Popen[bytes], timeout: float) -> str:
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    line = b""
    while not line.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([process.stdout], [], [], remaining)[0]:
            raise TimeoutError(f"the fleet printed nothing within {timeout}s")
        chunk = os.read(process.stdout.fileno(), 1)
        if not chunk:
            raise RuntimeError(f"the fleet exited with status {process.wait(5)}")
        line += chunk
    return line.decode().strip()


class FleetView:
    """A running fleet as seen by a client: its URLs and its process's RSS and CPU time."""

    def __init__(self, base_url: str, servers: int, pid: int) -> None:
        self.base_url = base_url
        self.servers = servers
        self.ps = psutil.Process(pid)

    def url(self, index: int) -> str:
        return f"{self.base_url}/sim-{index:04d}/mcp"

    def sample(self) -> dict[str, float]:
        cpu = self.ps.cpu_times()
        return {"rss_mb": round(self.ps.memory_info().rss / 2**20, 1), "cpu_s": cpu.user + cpu.system}


class Fleet(FleetView):
    """The fleet process, started here, and the start-up figures it printed."""

    def __init__(self, servers: int, tools: int, stderr: Path) -> None:
        spawned = time.monotonic()
        self.stderr = stderr
        with stderr.open("wb") as errors:
            self.process = subprocess.Popen(
                [sys.executable, str(FLEET), "serve", "--servers", str(servers), "--tools", str(tools)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=errors,
                start_new_session=True,
            )
        self.base_url = _read_line(self.process, 120).removeprefix("listening ")
        self.listening_s = time.monotonic() - spawned
        self.ready = json.loads(_read_line(self.process, 120))["ready"]
        self.ready_s = time.monotonic() - spawned
        super().__init__(self.base_url, servers, self.process.pid)

    def tracebacks(self) -> int:
        """Tracebacks the fleet has logged so far (the SDK logs server-side failures there)."""
        return self.stderr.read_text(errors="replace").count("Traceback")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        if self.process.stdout is not None:
            self.process.stdout.close()


async def _post(client: httpx2.AsyncClient, url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    headers = {
        MCP_PROTOCOL_VERSION_HEADER: MODERN,
        MCP_METHOD_HEADER: method,
        "accept": "application/json, text/event-stream",
    }
    if method == "tools/call":
        headers[MCP_NAME_HEADER] = params["name"]
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": ENVELOPE}}
    response = await client.post(url, json=body, headers=headers)
    reply = response.json()
    if "error" in reply:
        raise RuntimeError(f"{method} on {url}: {reply['error']}")
    result: dict[str, Any] = reply["result"]
    return result


async def sweep(fleet: Fleet, concurrency: int) -> dict[str, Any]:
    """tools/list of every server; returns the figures and each server's tool names."""
    names: dict[int, list[str]] = {}
    queue = list(range(fleet.servers))
    started = time.monotonic()
    async with httpx2.AsyncClient(timeout=60) as client:

        async def worker() -> None:
            while queue:
                index = queue.pop()
                result = await _post(client, fleet.url(index), "tools/list", {})
                names[index] = [tool["name"] for tool in result["tools"]]

        async with anyio.create_task_group() as tg:
            for _ in range(concurrency):
                tg.start_soon(worker)
    elapsed = time.monotonic() - started
    return {
        "seconds": round(elapsed, 3),
        "servers": len(names),
        "tools": sum(len(v) for v in names.values()),
        "requests_per_s": round(len(names) / elapsed, 1),
        "names": names,
    }


async def stateless_load(
    fleet: Fleet, names: dict[int, list[str]], workers: int, seconds: float
) -> dict[str, Any]:
    latencies: dict[str, list[float]] = {"tools/list": [], "tools/call": []}
    errors = 0
    rng = random.Random(7)
    async with httpx2.AsyncClient(timeout=30, limits=httpx2.Limits(max_connections=workers)) as client:

        async def work() -> None:
            nonlocal errors
            # Workers stop between requests: cancelling one in flight would only measure disconnects.
            while time.monotonic() < deadline:
                index = rng.randrange(fleet.servers)
                for method, params in (
                    ("tools/list", {}),
                    (
                        "tools/call",
                        {"name": rng.choice(names[index]), "arguments": {"q": "weather in Paris"}},
                    ),
                ):
                    t0 = time.perf_counter()
                    try:
                        await _post(client, fleet.url(index), method, params)
                    except (RuntimeError, httpx2.HTTPError):
                        errors += 1
                        continue
                    latencies[method].append((time.perf_counter() - t0) * 1000)

        started = time.monotonic()
        deadline = started + seconds
        async with anyio.create_task_group() as tg:
            for _ in range(workers):
                tg.start_soon(work)
    return _load_figures(latencies, errors, time.monotonic() - started)


async def session_load(
    fleet: Fleet, names: dict[int, list[str]], workers: int, seconds: float
) -> dict[str, Any]:
    latencies: dict[str, list[float]] = {"tools/list": [], "tools/call": []}
    errors = 0
    rng = random.Random(11)
    ready = anyio.Event()
    opened = 0
    deadline = ended = 0.0

    async def work(index: int) -> None:
        nonlocal errors, opened, deadline, ended
        async with (
            streamable_http_client(fleet.url(index)) as (read, write),
            ClientSession(read, write) as session,
        ):
            with anyio.fail_after(60):
                await session.initialize()
                opened += 1
                if opened == workers:
                    deadline = time.monotonic() + seconds
                    ready.set()
                await ready.wait()
            while time.monotonic() < deadline:
                for method in ("tools/list", "tools/call"):
                    t0 = time.perf_counter()
                    try:
                        if method == "tools/list":
                            await session.list_tools()
                        else:
                            await session.call_tool(rng.choice(names[index]), {"q": "weather in Paris"})
                    except Exception:  # a benchmark counts failures instead of stopping at the first
                        errors += 1
                        continue
                    latencies[method].append((time.perf_counter() - t0) * 1000)
            ended = max(ended, time.monotonic())

    async with anyio.create_task_group() as tg:
        for index in rng.sample(range(fleet.servers), workers):
            tg.start_soon(work, index)
    return _load_figures(latencies, errors, ended - deadline + seconds)


async def open_every_session(
    fleet: FleetView, concurrency: int, *, shared_http: bool, modern: bool = False
) -> dict[str, Any]:
    """An SDK session (initialize + tools/list) to every server, all held open at once.

    ``modern``: ``server/discover`` instead of ``initialize``, i.e. 2026-07-28, where a session is
    only client-side state (no server session, no standing GET stream).

    What a pool does at start. Also reports this process's RSS growth and CPU time per open
    session, a proxy for what each session costs a pool shard. ``shared_http``: every session uses
    one ``httpx2.AsyncClient`` instead of the SDK default of one client per session (the pool's
    ``session.py`` makes one per server today).
    """
    me = psutil.Process()
    rss_before = me.memory_info().rss
    cpu_before = sum(me.cpu_times()[:2])
    # Each handshake-era session holds a connection for its GET stream, so a shared client needs
    # no connection cap (httpx2's default of 100 would starve every session past the 100th).
    shared = (
        httpx2.AsyncClient(
            timeout=httpx2.Timeout(30, read=300),
            limits=httpx2.Limits(max_connections=None, max_keepalive_connections=None),
        )
        if shared_http
        else None
    )
    gate = anyio.Semaphore(concurrency)
    all_open = anyio.Event()
    release = anyio.Event()
    opened = errors = 0
    started = time.monotonic()

    async def hold(index: int) -> None:
        nonlocal opened, errors
        try:
            async with (
                streamable_http_client(fleet.url(index), http_client=shared) as (read, write),
                ClientSession(read, write) as session,
            ):
                async with gate:
                    with anyio.fail_after(120):
                        await (session.discover() if modern else session.initialize())
                        await session.list_tools()
                opened += 1
                if opened + errors == fleet.servers:
                    all_open.set()
                await release.wait()
        except Exception:  # counted, not raised: one refused session must not end the measurement
            errors += 1
            if opened + errors == fleet.servers:
                all_open.set()

    async with anyio.create_task_group() as tg:
        for index in range(fleet.servers):
            tg.start_soon(hold, index)
        with anyio.fail_after(600):
            await all_open.wait()
        elapsed = time.monotonic() - started
        held = fleet.sample()
        client_growth = me.memory_info().rss - rss_before
        client_cpu = sum(me.cpu_times()[:2]) - cpu_before
        release.set()
    if shared is not None:
        await shared.aclose()
    return {
        "protocol": "2026-07-28" if modern else "2025-11-25",
        "shared_http_client": shared_http,
        "seconds": round(elapsed, 3),
        "sessions": opened,
        "errors": errors,
        "sessions_per_s": round(opened / elapsed, 1),
        "fleet_rss_mb_with_all_open": held["rss_mb"],
        "client_rss_kib_per_session": round(client_growth / max(opened, 1) / 1024, 1),
        "client_cpu_ms_per_session": round(client_cpu / max(opened, 1) * 1000, 2),
        "requests": 2 * opened,
    }


def _open_every_session_in_child(fleet: Fleet, shared_http: bool, modern: bool) -> dict[str, Any]:
    argv = [
        sys.executable,
        __file__,
        "--open-sessions",
        fleet.base_url,
        "--fleet-pid",
        str(fleet.process.pid),
    ]
    argv += ["--servers", str(fleet.servers), *(["--shared-http-client"] if shared_http else [])]
    argv += ["--modern"] if modern else []
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=True)
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def placement_figures(servers: int) -> dict[str, Any]:
    """Servers per shard for 1, 2, 4 and 5 shards over the fleet's names, and how many move 4 → 5."""
    rules = {f"sim-{i:04d}": ServerRule() for i in range(servers)}
    by_count = {n: Placement(n, rules) for n in (1, 2, 4, 5)}
    moved = moved_servers(by_count[4], by_count[5])
    return {
        "servers_per_shard": {n: [len(p.servers_for(k)) for k in range(n)] for n, p in by_count.items()},
        "moved_4_to_5": len(moved),
        "moved_fraction_4_to_5": round(len(moved) / servers, 3),
    }


def _load_figures(latencies: dict[str, list[float]], errors: int, seconds: float) -> dict[str, Any]:
    total = sum(len(v) for v in latencies.values())
    return {
        "seconds": round(seconds, 2),
        "requests": total,
        "errors": errors,
        "requests_per_s": round(total / seconds, 1),
        **{
            f"{method}_ms": {"p50": _pct(values, 0.5), "p99": _pct(values, 0.99), "n": len(values)}
            for method, values in latencies.items()
        },
    }


def _with_fleet_cost(
    figures: dict[str, Any], before: dict[str, float], after: dict[str, float]
) -> dict[str, Any]:
    cpu = after["cpu_s"] - before["cpu_s"]
    requests = figures.get("requests", figures.get("servers", 0))
    return {
        **figures,
        "fleet_cpu_s": round(cpu, 2),
        "requests_per_fleet_cpu_s": round(requests / cpu, 1) if cpu > 0 else None,
        "fleet_rss_mb": after["rss_mb"],
    }


async def main(servers: int, tools: int, seconds: float, workers: int) -> dict[str, Any]:
    fleet = Fleet(servers, tools, Path(tempfile.gettempdir()) / f"mcp_fleet_{os.getpid()}.stderr")
    try:
        start = {
            "listening_s": round(fleet.listening_s, 3),
            "ready_s": round(fleet.ready_s, 3),
            "ready_in_process": fleet.ready,
            "rss_mb": fleet.sample()["rss_mb"],
        }
        print(f"start: {json.dumps(start)}", flush=True)
        before = fleet.sample()
        swept = await sweep(fleet, 32)
        names = swept.pop("names")
        sweep_figures = _with_fleet_cost(swept, before, fleet.sample())
        print(f"sweep: {json.dumps(sweep_figures)}", flush=True)
        before = fleet.sample()
        stateless = _with_fleet_cost(
            await stateless_load(fleet, names, workers, seconds), before, fleet.sample()
        )
        print(f"stateless 2026-07-28: {json.dumps(stateless)}", flush=True)
        before = fleet.sample()
        sessions = _with_fleet_cost(
            await session_load(fleet, names, workers, seconds), before, fleet.sample()
        )
        print(f"SDK sessions 2025-11-25: {json.dumps(sessions)}", flush=True)
        every = []
        for shared_http, modern in ((False, False), (True, False), (True, True)):
            before = fleet.sample()
            opened = _open_every_session_in_child(fleet, shared_http, modern)
            every.append(_with_fleet_cost(opened, before, fleet.sample()))
            print(f"every server, one SDK session each: {json.dumps(every[-1])}", flush=True)
        tracebacks = fleet.tracebacks()
    finally:
        fleet.stop()
        fleet.stderr.unlink(missing_ok=True)
    placement = placement_figures(servers)
    print(f"placement: {json.dumps(placement)}", flush=True)
    return {
        "placement": placement,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            # Other work on the machine competes with both processes; the 1-minute load says how much.
            "loadavg_1m_at_end": round(os.getloadavg()[0], 2),
        },
        "servers": servers,
        "tools_per_server": tools,
        "workers": workers,
        "start": start,
        "sweep_tools_list_all": sweep_figures,
        "stateless_mixed": stateless,
        "sdk_sessions_mixed": sessions,
        "sdk_session_to_every_server": every,
        "fleet_tracebacks": tracebacks,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--servers", type=int, default=1000)
    parser.add_argument("--tools", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--workers", type=int, default=32)
    # The session-opening phase runs in a fresh child process (see open_every_session).
    parser.add_argument("--open-sessions", metavar="FLEET_URL", help=argparse.SUPPRESS)
    parser.add_argument("--fleet-pid", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--shared-http-client", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--modern", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    # Closing 32 sessions at once makes the SDK log each GET stream's teardown as an error; noise here.
    logging.getLogger("mcp.client.streamable_http").setLevel(logging.CRITICAL)
    if args.open_sessions:
        view = FleetView(args.open_sessions, args.servers, args.fleet_pid)
        opened = anyio.run(
            partial(open_every_session, view, 64, shared_http=args.shared_http_client, modern=args.modern)
        )
        print(json.dumps(opened))
        sys.exit(0)
    figures = anyio.run(main, args.servers, args.tools, args.seconds, args.workers)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(ROOT)}")
