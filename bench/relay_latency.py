"""What relaying a call's server messages to its host costs (issue 29 item 3).

Starts the relay fixture server (``tests/fixtures/relay/server.py``, 2025-11-25, streamable HTTP)
and ``toolscout up`` fronting it (``all`` mode). Measures:

* **Progress relay latency**: the server's ``ticks`` tool sends progress notifications stamped with
  the wall-clock time they were sent; an ``mcp`` SDK host receives them (a) directly from the
  server, (b) through the gateway with nothing declared but a ``progressToken`` (the pool's
  ``CallToolWithProgress`` stream), (c) through the gateway from a host that declared sampling (the
  ``CallToolRelay`` bidirectional stream). p50/p99 of receive time minus send time.
* **Call latency, unary vs relayed**: a call with nothing to send back (``ticks`` with no tick)
  from a host that declared nothing (one unary ``CallTool``) and from one that declared sampling
  (the ``CallToolRelay`` stream), interleaved, p50/p99: what the stream costs a call that relays
  nothing.
* **Memory per open relayed call**: ``--open`` concurrent ``slow_sample`` calls whose host holds
  its sampling answer, so each is an open relay stream (gateway and pool, one ``toolscout up``
  process): its RSS with them open minus before, per call.

Run: uv run --frozen python bench/relay_latency.py [--calls 20] [--ticks 50] [--open 80]
Writes bench/results/relay_latency.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import mcp_types as types  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.session import ClientRequestContext  # noqa: E402

from tests.support.mcp_servers import _running, free_port  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))

import gateway_bench as gb  # noqa: E402  # save_json

RESULTS = ROOT / "bench" / "results" / "relay_latency.json"
_UNARY = "host declares nothing (CallTool)"
_RELAYED = "host declares sampling (CallToolRelay)"
SERVER = ROOT / "tests" / "fixtures" / "relay" / "server.py"


def _config(path: Path, server_url: str) -> Path:
    config = {
        "namespace_tools": False,
        "servers": {
            "relay": {
                "url": server_url,
                "transport": "streamable-http",
                "serialize_writes": False,
                "max_concurrency": 1024,
            }
        },
        "toolscout": {
            "pool": {"listen": "127.0.0.1:0", "metrics_port": -1},
            "discovery": {"listen": "127.0.0.1:0", "metrics_port": -1},
            "orchestrator": {"listen": "127.0.0.1:0", "metrics_port": -1},
            "gateway": {"listen": "127.0.0.1:0", "metrics_port": -1, "mode": "all", "max_sessions": 1000},
        },
    }
    path.write_text(json.dumps(config))
    return path


def _up(config: Path, runtime: Path) -> tuple[subprocess.Popen[str], str]:
    """``toolscout up`` of this tree (gateway, pool, discovery in one process); it and its gateway URL."""
    env = {**os.environ, "TOOLSCOUT_RUNTIME_DIR": str(runtime)}
    up = subprocess.Popen(
        [sys.executable, "-m", "toolscout_cli", "up", "-c", str(config), "--json"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert up.stdout is not None
    for line in up.stdout:
        event = json.loads(line) if line.startswith("{") else {}
        if event.get("event") == "ready":
            return up, str(event["endpoints"]["gateway"])
    raise RuntimeError("toolscout up exited before it was ready")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def _sampled(
    context: ClientRequestContext, params: types.CreateMessageRequestParams
) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text="ok"), model="m"
    )


async def _progress_delays(url: str, calls: int, ticks: int, *, relay: bool) -> list[float]:
    delays: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        delays.append(time.time() - float(message or "nan"))

    options: dict[str, Any] = {"mode": "legacy"}
    if relay:
        options["sampling_callback"] = _sampled
    async with Client(url, **options) as host:
        for _ in range(calls):
            await host.call_tool("ticks", {"count": ticks, "interval": 0.005}, progress_callback=on_progress)
    return delays


async def _call_times(url: str, calls: int) -> dict[str, list[float]]:
    """Call times of a host that declared nothing and of one that declared sampling, interleaved
    (one call each in turn, alternating which goes first) so that the machine's load hits both."""
    times: dict[str, list[float]] = {_UNARY: [], _RELAYED: []}
    async with (
        Client(url, mode="legacy") as bare,
        Client(url, mode="legacy", sampling_callback=_sampled) as rich,
    ):
        hosts = {_UNARY: bare, _RELAYED: rich}
        for n in range(calls + 20):
            order = list(hosts.items()) if n % 2 else list(reversed(hosts.items()))
            for name, host in order:
                started = time.perf_counter()
                await host.call_tool("ticks", {"count": 0})
                if n >= 20:  # warm-up
                    times[name].append(time.perf_counter() - started)
    return times


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


async def _memory_per_open_call(url: str, pid: int, count: int) -> dict[str, float]:
    asked = 0
    all_asked = asyncio.Event()
    released = asyncio.Event()

    async def holding(
        context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        nonlocal asked
        asked += 1
        if asked == count:
            all_asked.set()
        await released.wait()
        return await _sampled(context, params)

    async with Client(url, mode="legacy", sampling_callback=holding) as host:
        # Warm up: the same number of calls opened and finished once, so that pools and caches
        # have grown before the measurement.
        for round_ in range(2):
            asked = 0
            all_asked.clear()
            released.clear()
            before = _rss_kib(pid)
            calls = [
                asyncio.ensure_future(host.call_tool("slow_sample", {"token": str(n)})) for n in range(count)
            ]
            await asyncio.wait_for(all_asked.wait(), 120)
            await asyncio.sleep(0.5)
            during = _rss_kib(pid)
            released.set()
            await asyncio.gather(*calls)
            if round_ == 1:
                return {
                    "open_calls": count,
                    "rss_before_kib": before,
                    "rss_open_kib": during,
                    "kib_per_open_call": (during - before) / count,
                }
    raise RuntimeError("unreachable")


async def _run(gateway: str, server_url: str, pid: int, args: argparse.Namespace) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for name, url, relay in (
        ("direct (no gateway)", server_url, False),
        ("gateway, progressToken only (CallToolWithProgress)", gateway, False),
        ("gateway, host declares sampling (CallToolRelay)", gateway, True),
    ):
        delays = await _progress_delays(url, args.calls, args.ticks, relay=relay)
        figures[name] = {
            "notifications": len(delays),
            "p50_ms": _pct(delays, 0.5),
            "p99_ms": _pct(delays, 0.99),
        }
        print(
            f"progress latency, {name:52} p50 {figures[name]['p50_ms']:6.2f} ms  p99 {figures[name]['p99_ms']:6.2f} ms"
        )
    calls: dict[str, Any] = {}
    for name, times in (await _call_times(gateway, args.calls * 10)).items():
        calls[name] = {"calls": len(times), "p50_ms": _pct(times, 0.5), "p99_ms": _pct(times, 0.99)}
        print(
            f"call latency, {name:40} p50 {calls[name]['p50_ms']:6.2f} ms  p99 {calls[name]['p99_ms']:6.2f} ms"
        )
    figures["calls"] = calls
    memory = await _memory_per_open_call(gateway, pid, args.open)
    print(
        f"memory per open relayed call: {memory['kib_per_open_call']:.1f} KiB "
        f"({args.open} open; toolscout up RSS {memory['rss_before_kib']} -> {memory['rss_open_kib']} KiB)"
    )
    calls = figures.pop("calls")
    return {"progress_latency": figures, "call_latency": calls, "memory": memory}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--ticks", type=int, default=50)
    parser.add_argument(
        "--open",
        type=int,
        default=80,
        help="open calls (the host's HTTP client keeps at most 100 connections)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="toolscout-relay-") as work_dir:
        work = Path(work_dir)
        port = free_port()
        argv = [sys.executable, str(SERVER), str(work / "record.txt"), "http", "--port", str(port)]
        with _running(argv, port=port, path="/mcp") as server:
            up, gateway = _up(_config(work / "config.json", server.url), work / "runtime")
            try:
                figures = asyncio.run(_run(gateway, server.url, up.pid, args))
            finally:
                up.terminate()
                up.wait(timeout=30)
    load = os.getloadavg()
    print(f"load average {load[0]:.1f}")
    gb.save_json(
        RESULTS,
        {
            "command": "uv run --frozen python bench/relay_latency.py "
            f"--calls {args.calls} --ticks {args.ticks} --open {args.open}",
            "recorded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "load_average": load,
            **figures,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
