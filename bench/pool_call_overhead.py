"""What the pool alone adds to a ``tools/call``: its ``CallTool`` RPC against the direct call, this code against another commit.

One MCP server (``examples/servers/text.py`` over streamable HTTP) is fronted by two pools run as
their separate processes (``bench/gateway_bench.py``'s ``process_stack``): this tree's and
``--baseline``'s (``git archive`` into a temporary folder, run with this venv). Every round calls
one tool (``--kind``: the unannotated ``wait`` 0 s, or the read-only ``reverse``) directly over raw
2026-07-28 HTTP, then through each pool's ``CallTool`` with the client library (the order of the two
pools alternates). Reported: p50 of each, the added p50, the CPU milliseconds per call each pool
process spent (``psutil``), and the 1-minute load average before and after.

With ``--spy FILE`` (a ``py-spy`` binary as ``--py-spy``, e.g. from ``uv venv /tmp/spy && uv pip
install --python /tmp/spy/bin/python py-spy``) this tree's pool (``--spy-baseline``: the baseline's) is sampled during the run (``py-spy
record -r 250 --format raw``, ``--spy-rate`` to change the rate) and its CPU per call is split by owner: each sample goes to the
innermost frame that names one; idle samples (the selector, waiting threads) are left out. The
sampling slows the sampled pool, so its CPU figure is then higher than the other's.

Run: uv run --frozen python bench/pool_call_overhead.py [--baseline COMMIT] [--kind unannotated] [--rounds 1000]
Writes bench/results/pool_call_overhead_<kind>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2
import psutil  # type: ignore[import-untyped]  # dev-only dependency without stubs

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gateway_bench as gb

ROOT = gb.ROOT
WARMUP = 30
# Owners of a sample's innermost frame, first match wins (paths as py-spy prints them).
OWNERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("HTTP client to the MCP server", ("httpx2/", "httpcore2/", "h11/", "mcp_pool_svc/http11")),
    ("the lean POST (lean.py)", ("mcp_pool_svc/lean",)),
    ("mcp SDK client (session, transport, dispatcher)", ("mcp/",)),
    ("mcp_types / pydantic / jsonschema", ("mcp_types/", "pydantic", "jsonschema", "referencing")),
    ("the pool's own code", ("mcp_pool_svc/",)),
    ("toolscout_kit (interceptors, logging, metrics)", ("toolscout_kit/",)),
    ("client library (wire conversion)", ("toolscout/client",)),
    ("anyio, sniffio", ("anyio/", "sniffio")),
)
REST = "gRPC core, the event loop, other"


async def _drive(targets: dict[str, str], text_url: str, kind: str, rounds: int) -> dict[str, list[float]]:
    from toolscout.client import CallRequest
    from toolscout.client.aio import AsyncPoolClient

    tool, arguments, expected = gb.CALL_TOOLS[kind]
    request = CallRequest(server="text", tool=tool, arguments_json=json.dumps(arguments))
    pools = {name: AsyncPoolClient.connect(target) for name, target in targets.items()}
    times: dict[str, list[float]] = {name: [] for name in ["direct", *targets]}
    async with httpx2.AsyncClient(timeout=60) as http:
        for i in range(WARMUP + rounds):
            started = time.perf_counter()
            await gb.modern_call(http, text_url, "tools/call", {"name": tool, "arguments": arguments})
            if i >= WARMUP:
                times["direct"].append((time.perf_counter() - started) * 1000)
            for name in list(pools) if i % 2 else list(reversed(list(pools))):
                started = time.perf_counter()
                result = await pools[name].call(request)
                elapsed = (time.perf_counter() - started) * 1000
                if not result.content[0].text.startswith(expected):
                    raise RuntimeError(f"unexpected answer from the pool {name}: {result}")
                if i >= WARMUP:
                    times[name].append(elapsed)
    for pool in pools.values():
        await pool.close()
    return times


def owners(raw_file: Path, cpu_ms: float) -> dict[str, float]:
    """CPU milliseconds per call by owner, from a ``py-spy --format raw`` file."""
    counts: collections.Counter[str] = collections.Counter()
    for line in raw_file.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        frames = stack.split(";")
        if "select" in frames[-1] or "_do_waitpid" in stack or frames[-1].startswith("Thread.run"):
            continue  # idle: the selector, or a thread waiting
        owner = REST
        for frame in reversed(frames):
            found = re.search(r"\(([^:]+):", frame)
            where = found.group(1) if found else frame
            hit = next((name for name, marks in OWNERS if any(m in where for m in marks)), None)
            if hit is not None:
                owner = hit
                break
        counts[owner] += int(n)
    total = sum(counts.values()) or 1
    return {name: round(counts[name] / total * cpu_ms, 3) for name in [*(n for n, _ in OWNERS), REST]}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--baseline", default="db9b8ff", help="the commit to compare with")
    parser.add_argument("--kind", default="unannotated", choices=sorted(gb.CALL_TOOLS))
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument("--spy", type=Path, help="sample this tree's pool with py-spy into this file")
    parser.add_argument("--py-spy", default="py-spy", help="the py-spy binary")
    parser.add_argument("--spy-rate", type=int, default=250, help="py-spy samples per second")
    parser.add_argument("--spy-baseline", action="store_true", help="sample the baseline's pool instead")
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="toolscout-pool-overhead-") as work_dir,
        contextlib.ExitStack() as stack,
    ):
        work = Path(work_dir)
        base = gb.checkout(args.baseline, work / "baseline-src")
        text_url = stack.enter_context(gb._example_http_server())
        targets: dict[str, str] = {}
        pids: dict[str, int] = {}
        for name, root in (("this tree", ROOT), (args.baseline, base)):
            folder = work / name.replace(" ", "-")
            folder.mkdir()
            stack.enter_context(gb.process_stack(text_url, folder, root))
            config = json.loads((folder / "gateway_bench.json").read_text())
            targets[name] = config["toolscout"]["pool"]["listen"]
            pids[name] = gb.STACK_PIDS["pool"]
        spied = args.baseline if args.spy_baseline else "this tree"
        spy = None
        if args.spy is not None:
            command = [
                args.py_spy,
                "record",
                "-r",
                str(args.spy_rate),
                "--format",
                "raw",
                "-o",
                str(args.spy),
            ]
            spy = subprocess.Popen(
                [*command, "--pid", str(pids[spied])], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
        load_before = os.getloadavg()[0]
        cpu_before = {name: sum(psutil.Process(pid).cpu_times()[:2]) for name, pid in pids.items()}
        times = asyncio.run(_drive(targets, text_url, args.kind, args.rounds))
        cpu = {
            name: round(
                (sum(psutil.Process(pid).cpu_times()[:2]) - cpu_before[name]) * 1000 / (WARMUP + args.rounds),
                3,
            )
            for name, pid in pids.items()
        }
        load_after = os.getloadavg()[0]
        if spy is not None:
            spy.send_signal(2)  # SIGINT: py-spy writes what it has
            spy.wait(timeout=60)
    direct = statistics.median(times["direct"])
    rows = {
        name: {
            "p50_ms": round(statistics.median(times[name]), 3),
            "added_p50_ms": round(statistics.median(times[name]) - direct, 3),
            "cpu_ms_per_call": cpu[name],
        }
        for name in targets
    }
    print(
        f"CallTool on the pool alone vs the direct call, {args.kind}, {args.rounds} rounds, "
        f"load average {load_before:.2f} before, {load_after:.2f} after; direct p50 {direct:.2f} ms"
    )
    for name, row in rows.items():
        print(
            f"  {name:<12} p50 {row['p50_ms']:6.2f} ms   added p50 {row['added_p50_ms']:+6.2f} ms   "
            f"pool CPU {row['cpu_ms_per_call']:.3f} ms per call"
        )
    out: dict[str, Any] = {
        "command": "uv run --frozen python bench/pool_call_overhead.py "
        f"--baseline {args.baseline} --kind {args.kind} --rounds {args.rounds}",
        "recorded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load_average": {"before": load_before, "after": load_after},
        "direct_p50_ms": round(direct, 3),
        "rows": rows,
    }
    if args.spy is not None and args.spy.exists():
        split = owners(args.spy, cpu[spied])
        out["cpu_by_owner_ms"] = {"pool": spied, "owners": split}
        print(f"{spied}'s pool, CPU ms per call by owner (sampled):")
        for name, value in split.items():
            print(f"  {value:6.3f}  {name}")
    path = ROOT / "bench" / "results" / f"pool_call_overhead_{args.kind}.json"
    gb.save_json(path, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
