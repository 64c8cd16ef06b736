"""Shared I/O for baseline runners: they run in isolated environments (own pinned deps), read the
tools/queries the parent wrote and print rankings as JSON, so the parent scores every engine alike.

Input: ``--tools`` JSONL of ``{"key", "server", "name", "description", "input_schema"}`` (``key`` is
the LLM-facing name the pool gives the tool), ``--queries`` JSONL of ``{"query"}``, ``--depth``.
A query may carry ``"tools"`` (positions in the tools file: it is searched in an index of those
tools only, a catalog of its own) and ``"exclude"`` (keys dropped from its ranking).
Output (stdout): ``{"rankings": [[key, ...], ...], "build_s": float, "search_s": [float, ...],
"search_cpu_s": [float, ...]}`` (wall-clock and this thread's CPU seconds per query).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any


def announced_port() -> int:
    """A free port on 127.0.0.1 for a server that binds it itself (FastMCP's own ``run``), and a
    thread that prints ``listening http://127.0.0.1:<port>/mcp`` once the port accepts connections
    (the line the parent waits for)."""
    import socket
    import threading
    import time

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]

    def announce() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                time.sleep(0.05)
        sys.stdout.write(f"listening http://127.0.0.1:{port}/mcp\n")
        sys.stdout.flush()

    threading.Thread(target=announce, daemon=True).start()
    return port


def read_jsonl(path: str) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def run(build: Callable[[list[dict[str, Any]]], Callable[[str, int], list[str]]]) -> None:
    import time

    parser = argparse.ArgumentParser()
    parser.add_argument("--tools", required=True)
    parser.add_argument("--queries", required=True)
    parser.add_argument("--depth", type=int, default=10)
    args = parser.parse_args()
    tools = read_jsonl(args.tools)
    queries = read_jsonl(args.queries)
    started = time.perf_counter()
    # The whole catalog's index only when some query searches the whole catalog.
    search = build(tools) if any("tools" not in q for q in queries) else None
    build_s = time.perf_counter() - started
    rankings: list[list[str]] = []
    times: list[float] = []
    cpu: list[float] = []
    for query in queries:
        searcher = build([tools[i] for i in query["tools"]]) if "tools" in query else search
        assert searcher is not None
        exclude = set(query.get("exclude", ()))
        c0, t0 = time.thread_time(), time.perf_counter()
        ranking = searcher(query["query"], args.depth + len(exclude))
        times.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
        rankings.append([key for key in ranking if key not in exclude][: args.depth])
    json.dump({"rankings": rankings, "build_s": build_s, "search_s": times, "search_cpu_s": cpu}, sys.stdout)
