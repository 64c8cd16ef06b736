"""What a ``tools/call`` through the gateway adds to the direct call, this code against another commit, in one run.

One MCP server (``examples/servers/text.py`` over streamable HTTP) is fronted by two deployments run
as their separate processes (``toolscout serve pool|discovery|gateway``, as
``bench/gateway_bench.py`` starts them): this tree's, and ``--baseline``'s (a commit, checked out
with ``git archive`` into a temporary folder and run with this venv). Every round calls, for a
read-only tool (``reverse``) and an unannotated one (``wait`` 0 s), over raw 2026-07-28 HTTP posts
and with the ``mcp`` SDK's client: the server directly, then through each gateway's ``call_tool``
(the order of the two gateways alternates), so drift in the machine's load hits every row alike.
Reported per row: p50/p99 of the direct call and of each gateway, the added p50 (gateway p50 -
direct p50), the median of each round's own difference, and the 1-minute load average sampled over
the run; then the CPU milliseconds per call each deployment's pool and gateway spent over the whole
run (``psutil`` user + system time; the load inflates it much less than wall time).

``--peers`` adds a peer as one more interleaved row: FastMCP 4 as a proxy in front of the same text
server (bench/_baselines/fastmcp_proxy.py in its pinned isolated environment: ``create_proxy`` of a
connected client, one upstream session reused, FastMCP's own HTTP server), called by the tools'
own names; ``--peers reuse fresh`` adds ``create_proxy(url)`` (a fresh upstream client per
request) too. Its CPU per call is the proxy process's.

``--result-chars N`` adds rows for the read-only tool reversing a JSON listing of N characters: a
result of that size, as real tools return (the pool counts a result's tokens against the host's
budget; see bench/README, round 8).

Run: uv run --frozen python bench/gateway_call_overhead.py [--baseline 7b63f4b|none] [--calls 300] [--peers]
     [--result-chars 4000]
Writes bench/results/gateway_call_overhead.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx2
import psutil  # type: ignore[import-untyped]  # dev-only dependency without stubs

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gateway_bench as gb  # the bench's stack and call helpers

ROOT = gb.ROOT
RESULTS = ROOT / "bench" / "results" / "gateway_call_overhead.json"
Timed = Callable[[str], Awaitable[float]]
Kinds = dict[str, tuple[str, dict[str, Any], str]]  # kind: (tool, arguments, the answer's start)


def sized_read_only(chars: int) -> tuple[str, dict[str, Any], str]:
    """The read-only tool (``reverse``) called on a JSON listing (what tools commonly return),
    pretty-printed and cut to ``chars`` characters: a result as large. A :data:`Kinds` value."""
    items = [
        {
            "id": i,
            "name": f"item {i}",
            "tags": ["alpha", "beta"],
            "note": "a line of text, with punctuation; 12345.",
        }
        for i in range(chars // 60 + 1)
    ]
    text = json.dumps(items, indent=2)[:chars]
    return "reverse", {"text": text}, text[::-1][:40]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def _raw(client: httpx2.AsyncClient, url: str, through: bool, kinds: Kinds = gb.CALL_TOOLS) -> Timed:
    async def call(kind: str) -> float:
        tool, arguments, expected = kinds[kind]
        params: dict[str, Any] = {"name": tool, "arguments": arguments}
        if through:
            params = {"name": "call_tool", "arguments": {"name": f"text__{tool}", "arguments": arguments}}
        started = time.perf_counter()
        answer = await gb.modern_call(client, url, "tools/call", params)
        elapsed = (time.perf_counter() - started) * 1000
        if not gb._answer_text(answer["result"]).startswith(expected):
            raise RuntimeError(f"unexpected answer from {url}: {answer}")
        return elapsed

    return call


def _sdk(session: Any, through: bool, kinds: Kinds = gb.CALL_TOOLS) -> Timed:
    async def call(kind: str) -> float:
        tool, arguments, expected = kinds[kind]
        started = time.perf_counter()
        if through:
            answer = await session.call_tool("call_tool", {"name": f"text__{tool}", "arguments": arguments})
        else:
            answer = await session.call_tool(tool, arguments)
        elapsed = (time.perf_counter() - started) * 1000
        if not getattr(answer.content[0], "text", "").startswith(expected):
            raise RuntimeError(f"unexpected answer: {answer}")
        return elapsed

    return call


async def _measure(
    text_url: str,
    gateways: dict[str, str],
    calls: int,
    warmup: int,
    peers: dict[str, str] | None = None,
    kinds: Kinds = gb.CALL_TOOLS,
) -> tuple[dict[str, dict[str, list[float]]], list[float]]:
    """``{client_kind: {target: [ms, ...]}}`` (targets: direct, each gateway, each peer proxy), and
    the loads seen. A peer is called like the server itself (the proxy keeps the tools' names)."""
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    targets = {"direct": text_url, **gateways, **(peers or {})}
    samples: dict[str, dict[str, list[float]]] = {
        f"{client}_{kind}": {t: [] for t in targets} for client in ("raw", "sdk") for kind in kinds
    }
    loads: list[float] = []
    async with contextlib.AsyncExitStack() as stack:
        client = await stack.enter_async_context(httpx2.AsyncClient(timeout=60))
        callers: dict[str, dict[str, Timed]] = {"raw": {}, "sdk": {}}
        for name, url in targets.items():
            callers["raw"][name] = _raw(client, url, name in gateways, kinds)
            streams = await stack.enter_async_context(streamable_http_client(url))
            session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
            await session.initialize()
            callers["sdk"][name] = _sdk(session, name in gateways, kinds)
        gateway_names = [*gateways, *(peers or {})]
        for i in range(warmup + calls):
            order = ["direct", *(gateway_names if i % 2 else reversed(gateway_names))]
            for kind in kinds:
                for client_name, by_target in callers.items():
                    for target in order:
                        elapsed = await by_target[target](kind)
                        if i >= warmup:
                            samples[f"{client_name}_{kind}"][target].append(elapsed)
            if i % 25 == 0:
                loads.append(os.getloadavg()[0])
    return samples, loads


@contextlib.contextmanager
def _fastmcp_proxy(upstream: str, session: str) -> Any:
    """bench/_baselines/fastmcp_proxy.py in its pinned environment: ``(url, the proxy's pid)``."""
    command = ["uv", "run", "--isolated", "--no-project", "--quiet"]
    for package in gb.FASTMCP:
        command += ["--with", package]
    script = ROOT / "bench" / "_baselines" / "fastmcp_proxy.py"
    command += ["python", str(script), "--upstream", upstream, "--session", session]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().decode().strip()
        if not line.startswith("listening "):
            raise RuntimeError(f"the FastMCP proxy did not start: {line!r}")
        children = psutil.Process(process.pid).children(recursive=True)  # uv runs python
        yield line.removeprefix("listening "), (children[-1] if children else psutil.Process(process.pid)).pid
    finally:
        gb._stop(process)


def _cpu(pids: dict[str, int]) -> dict[str, float]:
    return {name: sum(psutil.Process(pid).cpu_times()[:2]) for name, pid in pids.items()}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--baseline", default="7b63f4b", help="the commit to compare with ('none': this tree alone)"
    )
    parser.add_argument("--calls", type=int, default=300, help="rounds (each round calls every row once)")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument(
        "--result-chars",
        type=int,
        default=0,
        help="also call the read-only tool on a JSON listing of this many characters (a result as large)",
    )
    parser.add_argument(
        "--peers",
        nargs="*",
        choices=("reuse", "fresh"),
        help="add FastMCP 4 proxy rows (no value: reuse, one upstream session; fresh: a client per request)",
    )
    args = parser.parse_args()
    peer_modes = list(dict.fromkeys(args.peers or ["reuse"])) if args.peers is not None else []
    with (
        tempfile.TemporaryDirectory(prefix="toolscout-overhead-") as work_dir,
        contextlib.ExitStack() as stack,
    ):
        work = Path(work_dir)
        deployments = [("this tree", ROOT)]
        if args.baseline != "none":
            deployments.append((args.baseline, gb.checkout(args.baseline, work / "baseline")))
        text_url = stack.enter_context(gb._example_http_server())
        gateways: dict[str, str] = {}
        pids: dict[str, int] = {}
        for name, root in deployments:
            (work / name).mkdir()
            url, _ = stack.enter_context(gb.process_stack(text_url, work / name, root))
            gateways[name] = url
            pids.update({f"{name} {p}": gb.STACK_PIDS[p] for p in ("pool", "gateway")})
        pids["text server"] = gb.STACK_PIDS["text server"]
        peers: dict[str, str] = {}
        for mode in peer_modes:
            name = f"FastMCP proxy ({mode})"
            peers[name], pids[f"{name} process"] = stack.enter_context(_fastmcp_proxy(text_url, mode))
        before = _cpu(pids)
        kinds = dict(gb.CALL_TOOLS)
        if args.result_chars > 0:
            kinds[f"read_only_{args.result_chars}ch"] = sized_read_only(args.result_chars)
        samples, loads = asyncio.run(_measure(text_url, gateways, args.calls, args.warmup, peers, kinds))
        spent = {name: v - before[name] for name, v in _cpu(pids).items()}
    # Each deployment served the same calls: every kind x 2 clients per round, plus the warm-up.
    per_call = {
        name: round(v * 1000 / ((args.calls + args.warmup) * 2 * len(kinds)), 3) for name, v in spent.items()
    }
    load = round(statistics.fmean(loads), 2)
    rows: dict[str, Any] = {}
    for key, by_target in samples.items():
        direct = by_target["direct"]
        row: dict[str, Any] = {"direct": {"p50_ms": _pct(direct, 0.5), "p99_ms": _pct(direct, 0.99)}}
        for name in [*gateways, *peers]:
            times = by_target[name]
            row[name] = {
                "p50_ms": _pct(times, 0.5),
                "p99_ms": _pct(times, 0.99),
                "added_p50_ms": round(_pct(times, 0.5) - _pct(direct, 0.5), 3),
                "added_per_round_p50_ms": round(
                    statistics.median(t - d for t, d in zip(times, direct, strict=True)), 3
                ),
            }
        rows[key] = row
    print(
        f"tools/call through the gateway vs direct, {args.calls} rounds, load average {load} (min {min(loads):.1f}, max {max(loads):.1f}):"
    )
    for key, row in rows.items():
        print(f"  {key:<22} direct p50 {row['direct']['p50_ms']:6.2f} p99 {row['direct']['p99_ms']:6.2f} ms")
        for name in [*gateways, *peers]:
            r = row[name]
            print(
                f"  {'':<22} {name:<22} p50 {r['p50_ms']:6.2f} p99 {r['p99_ms']:6.2f} ms   "
                f"added p50 {r['added_p50_ms']:+6.2f} ms (per round {r['added_per_round_p50_ms']:+6.2f})   load {load}"
            )
    print("CPU ms per call over the run (every row's calls together):")
    for name, value in per_call.items():
        print(f"  {name:<24} {value:6.3f}")
    gb.save_json(
        RESULTS,
        {
            "command": "uv run --frozen python bench/gateway_call_overhead.py "
            f"--baseline {args.baseline} --calls {args.calls}"
            + (f" --result-chars {args.result_chars}" if args.result_chars else "")
            + (f" --peers {' '.join(peer_modes)}" if peer_modes else ""),
            "recorded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "load_average": {"mean": load, "min": min(loads), "max": max(loads)},
            "calls": args.calls,
            "rows": rows,
            "cpu_ms_per_call": per_call,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
