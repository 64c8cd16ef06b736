"""In-process search latency of discovery_svc.index from 500 to 50,000 tools, beside casual-mcp 1.0.

    uv run --frozen python bench/search_latency.py [--sizes 500 ... 50000] [--queries 2000] [--no-baseline]

Synthetic catalogs recombine the real catalogues in ../shared/data (every tool of every set,
re-served under numbered server copies, each copy's description extended with a sentence from
another tool so copies are not identical documents). Queries are 1-8 consecutive words cut from
the real query sets (uniform length), the same list for both engines. casual-mcp's
``ToolSearchIndex`` runs in its isolated environment (bench/_baselines/casual.py) on the same
catalog and queries; it rebuilds its index per chat in production, its build time is shown too.
Wall-clock percentiles are the target figures; this thread's CPU time is reported beside them
because on a shared 2-core machine the wall-clock tail mostly measures other processes.
Results are printed and saved to bench/results/search_latency.json.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]  # dev-only dependency without stubs

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from discovery_svc.index import SearchDoc, SearchIndex  # noqa: E402

DATA_DIR = ROOT.parent / "shared" / "data"
RESULTS = ROOT / "bench" / "results" / "search_latency.json"
LIMIT = 5  # max_search_results default
CASUAL = ["casual-mcp==1.0.0", "rank-bm25==0.2.2"]


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def synthetic_catalog(size: int, rng: random.Random) -> list[dict[str, Any]]:
    real = [t for path in sorted(DATA_DIR.glob("*.tools.jsonl")) for t in _read_jsonl(path)]
    sentences = [s.strip() for t in real for s in (t["description"] or "").split(". ") if len(s.split()) >= 4]
    tools: list[dict[str, Any]] = []
    copy = 0
    while len(tools) < size:
        order = list(range(len(real)))
        rng.shuffle(order)
        for i in order[: size - len(tools)]:
            tool = real[i]
            description = tool["description"] or ""
            if copy:
                description = f"{description} {rng.choice(sentences)}."
            server = tool["server"] if copy == 0 else f"{tool['server']} {copy}"
            key = f"s{copy}_{len(tools)}_{tool['name']}"[:64]
            tools.append(
                {
                    "key": key,
                    "server": server,
                    "name": tool["name"],
                    "description": description,
                    "input_schema": tool["input_schema"] or {},
                }
            )
        copy += 1
    return tools


def sample_queries(count: int, rng: random.Random) -> list[str]:
    texts = [q["query"] for path in sorted(DATA_DIR.glob("*.queries.jsonl")) for q in _read_jsonl(path)]
    queries: list[str] = []
    while len(queries) < count:
        words = rng.choice(texts).split()
        n = rng.randint(1, 8)
        if len(words) < n:
            continue
        start = rng.randint(0, len(words) - n)
        queries.append(" ".join(words[start : start + n]))
    return queries


def _summary(seconds: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000.0 for s in seconds)
    return {
        "p50_ms": round(statistics.median(ms), 4),
        "p90_ms": round(ms[int(0.90 * (len(ms) - 1))], 4),
        "p99_ms": round(ms[int(0.99 * (len(ms) - 1))], 4),
        "max_ms": round(ms[-1], 4),
        "mean_ms": round(statistics.fmean(ms), 4),
        "n": len(ms),
    }


def measure_ours(tools: list[dict[str, Any]], queries: list[str]) -> dict[str, Any]:
    docs = [SearchDoc(t["key"], t["server"], t["name"], t["description"], t["input_schema"]) for t in tools]
    process = psutil.Process()
    gc.collect()
    rss_before = process.memory_info().rss
    started = time.perf_counter()
    index = SearchIndex(docs)
    build_s = time.perf_counter() - started
    gc.collect()
    index_mb = (process.memory_info().rss - rss_before) / 2**20
    for query in queries[:200]:  # warm caches (stemmer LRU, allocator) as a long-running service has
        index.search(query, LIMIT)
    times: list[float] = []
    cpu: list[float] = []
    clock, cpu_clock = time.perf_counter, time.thread_time
    for query in queries:
        c0, t0 = cpu_clock(), clock()
        index.search(query, LIMIT)
        times.append(clock() - t0)
        cpu.append(cpu_clock() - c0)
    servers = sorted({t["server"] for t in tools})
    scoped: list[float] = []
    for i, query in enumerate(queries):
        t0 = clock()
        index.search(query, LIMIT, server=servers[i % len(servers)])
        scoped.append(clock() - t0)
    return {
        "build_s": round(build_s, 3),
        "index_rss_mb": round(index_mb, 1),  # resident-set growth while building (approximate)
        "query": _summary(times),
        "query_cpu": _summary(cpu),  # this thread's CPU time: what the wall clock shows without contention
        "query_server_scoped": _summary(scoped),
    }


def measure_casual(tools: list[dict[str, Any]], queries: list[str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        tools_path, queries_path = Path(tmp, "tools.jsonl"), Path(tmp, "queries.jsonl")
        tools_path.write_text("".join(json.dumps(t) + "\n" for t in tools), encoding="utf-8")
        queries_path.write_text("".join(json.dumps({"query": q}) + "\n" for q in queries), encoding="utf-8")
        command = ["uv", "run", "--isolated", "--no-project", "--quiet"]
        for package in CASUAL:
            command += ["--with", package]
        command += ["python", str(ROOT / "bench" / "_baselines" / "casual.py")]
        command += ["--tools", str(tools_path), "--queries", str(queries_path), "--depth", str(LIMIT)]
        done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=tmp, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"casual-mcp runner failed ({done.returncode}):\n{done.stderr[-4000:]}")
    out = json.loads(done.stdout)
    return {"build_s": round(out["build_s"], 3), "query": _summary(out["search_s"])}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    # Roughly evenly spaced on a log scale, for the latency-against-size plot (bench/plots.py).
    parser.add_argument("--sizes", type=int, nargs="+", default=[500, 1000, 2000, 5000, 10000, 20000, 50000])
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument(
        "--baseline-queries", type=int, default=300, help="casual-mcp scans every tool per query"
    )
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    queries = sample_queries(args.queries, rng)
    report: dict[str, Any] = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "limit": LIMIT,
        "query_words": "1-8",
        # Other work on the machine inflates every wall-clock figure; recorded so runs compare.
        "load_average_1m_at_start": round(os.getloadavg()[0], 2),
        "sizes": {},
    }
    for size in args.sizes:
        tools = synthetic_catalog(size, random.Random(args.seed + size))
        row: dict[str, Any] = {"toolscout": measure_ours(tools, queries)}
        if not args.no_baseline:
            row["casual-mcp"] = measure_casual(tools, queries[: args.baseline_queries])
            ours, theirs = row["toolscout"]["query"], row["casual-mcp"]["query"]
            row["casual_over_toolscout"] = {
                "p50": round(theirs["p50_ms"] / ours["p50_ms"], 1),
                "p99": round(theirs["p99_ms"] / ours["p99_ms"], 1),
            }
        report["sizes"][str(size)] = row
        ours = row["toolscout"]
        line = (
            f"{size:>6} tools  toolscout p50 {ours['query']['p50_ms']:.3f} ms  p99 {ours['query']['p99_ms']:.3f} ms"
            f"  [cpu p50 {ours['query_cpu']['p50_ms']:.3f} p99 {ours['query_cpu']['p99_ms']:.3f}]"
            f"  (server-scoped p99 {ours['query_server_scoped']['p99_ms']:.3f} ms, build {ours['build_s']:.2f} s,"
            f" ~{ours['index_rss_mb']:.0f} MB)"
        )
        if "casual-mcp" in row:
            c = row["casual-mcp"]
            line += (
                f"\n{'':>6}        casual-mcp p50 {c['query']['p50_ms']:.3f} ms  p99 {c['query']['p99_ms']:.3f} ms"
                f"  (build {c['build_s']:.2f} s)  ratio p50 x{row['casual_over_toolscout']['p50']}"
                f" p99 x{row['casual_over_toolscout']['p99']}"
            )
        print(line, flush=True)
    report["load_average_1m_at_end"] = round(os.getloadavg()[0], 2)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"saved {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
