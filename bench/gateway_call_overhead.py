"""What a ``tools/call`` through the gateway costs, this code against another commit, in one run.

Starts ``toolscout up`` twice, once from this tree and once from ``--baseline`` (a commit, checked
out with ``git archive`` into a temporary folder and run with this venv), both fronting the same
stdio server (``examples/servers/text.py``, its ``reverse`` tool). Then sends ``--calls`` calls to
each gateway's meta endpoint as 2026-07-28 stateless POSTs (one persistent HTTP client per gateway),
alternating which goes first, and reports p50/p99 wall time per call for both and the difference.
A call with a ``progressToken`` (the relayed path: ``CallToolWithProgress``) is measured on this
tree's ``all`` endpoint beside a plain call there.

Run: uv run --frozen python bench/gateway_call_overhead.py [--baseline d423cb1] [--calls 400]
Writes bench/results/gateway_call_overhead.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "gateway_call_overhead.json"
SERVER = ROOT / "examples" / "servers" / "text.py"
MODERN = "2026-07-28"


def _config(path: Path) -> Path:
    config = {
        "servers": {"text": {"command": sys.executable, "args": [str(SERVER)]}},
        "tool_sets": {"text_all": {"servers": {"text": True}}},
        "toolscout": {
            "pool": {"listen": "127.0.0.1:0", "metrics_port": -1},
            "discovery": {"listen": "127.0.0.1:0", "metrics_port": -1},
            "orchestrator": {"listen": "127.0.0.1:0", "metrics_port": -1},
            "gateway": {"listen": "127.0.0.1:0", "metrics_port": -1, "modes": {"text_all": "all"}},
        },
    }
    path.write_text(json.dumps(config))
    return path


def _start(tree: Path, config: Path, runtime: Path) -> tuple[subprocess.Popen[str], str]:
    """``toolscout up`` of the code in ``tree``; returns it and its gateway URL."""
    env = {**os.environ, "TOOLSCOUT_RUNTIME_DIR": str(runtime)}
    env["PYTHONPATH"] = os.pathsep.join([str(tree), str(tree / "clients" / "src")])
    up = subprocess.Popen(
        [sys.executable, "-m", "toolscout_cli", "up", "-c", str(config), "--json"],
        cwd=tree,
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
    raise RuntimeError(f"toolscout up from {tree} exited before it was ready")


def _body(n: int, progress: bool) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
    }
    if progress:
        meta["progressToken"] = n
    params = {"name": "text__reverse", "arguments": {"text": f"call {n}"}, "_meta": meta}
    return {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params}


async def _call(client: httpx2.AsyncClient, url: str, n: int, progress: bool = False) -> float:
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
        "mcp-name": "text__reverse",
    }
    started = time.perf_counter()
    answer = await client.post(url, content=json.dumps(_body(n, progress)).encode(), headers=headers)
    elapsed = time.perf_counter() - started
    if answer.status_code != 200 or "llac" not in answer.text:
        raise RuntimeError(f"call failed: {answer.status_code} {answer.text[:300]}")
    return elapsed


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def _measure(urls: dict[str, str], calls: int, warmup: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in urls}
    async with httpx2.AsyncClient(timeout=30) as client:
        for n in range(warmup + calls):
            order = list(urls.items()) if n % 2 else list(reversed(urls.items()))
            for name, url in order:
                elapsed = await _call(client, url, n, progress=name.endswith("+progress"))
                if n >= warmup:
                    times[name].append(elapsed)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--baseline", default="d423cb1", help="the commit to compare with")
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--warmup", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="toolscout-overhead-") as work_dir:
        work = Path(work_dir)
        base = work / "baseline"
        base.mkdir()
        archive = subprocess.run(["git", "archive", args.baseline], cwd=ROOT, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive.stdout, check=True)
        config = _config(work / "config.json")
        ups = []
        try:
            here, here_url = _start(ROOT, config, work / "rt-here")
            ups.append(here)
            there, there_url = _start(base, config, work / "rt-base")
            ups.append(there)
            urls = {
                "this tree (meta)": here_url,
                f"{args.baseline} (meta)": there_url,
                "this tree (all)": f"{here_url}/text_all",
                "this tree (all)+progress": f"{here_url}/text_all",
            }
            times = asyncio.run(_measure(urls, args.calls, args.warmup))
        finally:
            for up in ups:
                up.terminate()
                up.wait(timeout=30)
    load = os.getloadavg()
    figures = {
        name: {"p50_ms": _pct(v, 0.5), "p99_ms": _pct(v, 0.99), "mean_ms": statistics.fmean(v) * 1000}
        for name, v in times.items()
    }
    for name, f in figures.items():
        print(
            f"{name:32} p50 {f['p50_ms']:7.2f} ms   p99 {f['p99_ms']:7.2f} ms   mean {f['mean_ms']:7.2f} ms"
        )
    here_p50 = figures["this tree (meta)"]["p50_ms"]
    base_p50 = figures[f"{args.baseline} (meta)"]["p50_ms"]
    print(
        f"meta call p50, this tree - {args.baseline}: {here_p50 - base_p50:+.2f} ms (load average {load[0]:.1f})"
    )
    RESULTS.write_text(
        json.dumps(
            {
                "command": "uv run --frozen python bench/gateway_call_overhead.py "
                f"--baseline {args.baseline} --calls {args.calls}",
                "recorded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "load_average": load,
                "calls": args.calls,
                "figures": figures,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"saved in {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
