"""Runs every benchmark in turn (``make bench``); each prints its table and saves bench/results/*.json,
then bench/plots.py draws the PNG plots from them (bench/results/*.png).

    uv run --frozen python bench/run_all.py [--quick]

Baselines (casual-mcp 1.0.0, FastMCP 4) run in isolated uv environments created on first use, so
the first run needs the package registry; later runs use uv's cache.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent

# (script, arguments, arguments added by --quick)
RUNS: list[tuple[str, list[str], list[str]]] = [
    ("retrieval.py", ["--all"], []),
    # Catalog sizes and negatives; the peers' rows of the last sweep are reused (pinned versions).
    ("retrieval.py", ["--sweep", "--reuse-baselines"], ["--max-queries", "100"]),
    ("search_latency.py", [], ["--sizes", "500", "5000", "--queries", "500"]),
    ("discovery_bench.py", [], ["--quick"]),
    ("discovery_memory.py", [], ["--tools", "5000"]),
    ("pool_latency.py", [], ["--calls", "200", "--warmup", "20"]),
    ("orchestrator_bench.py", [], ["--quick"]),
    ("deferral_bench.py", [], []),
    ("deferral_bench.py", ["--conversation", "long", "--tool-result-chars", "4000"], []),
    ("faults.py", [], ["--quick"]),
    ("gateway_bench.py", [], ["--quick"]),
    ("console_pages.py", [], ["--runs", "2"]),
]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="smaller runs (a smoke test, not figures to quote)"
    )
    args = parser.parse_args()
    failed: list[str] = []
    for script, extra, quick in RUNS:
        command = [sys.executable, str(BENCH / script), *extra, *(quick if args.quick else [])]
        print(f"\n=== {script} {' '.join(command[2:])}", flush=True)
        started = time.monotonic()
        done = subprocess.run(command, check=False)
        print(f"=== {script}: exit {done.returncode} after {time.monotonic() - started:.0f}s", flush=True)
        if done.returncode != 0:
            failed.append(script)
    print("\n=== plots.py", flush=True)
    plotted = subprocess.run([sys.executable, str(BENCH / "plots.py")], check=False)
    if plotted.returncode != 0:
        failed.append("plots.py")
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
        return 1
    print(f"\nall benchmarks done; figures and plots in {BENCH / 'results'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
