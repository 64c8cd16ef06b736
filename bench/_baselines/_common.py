"""Shared I/O for baseline runners: they run in isolated environments (own pinned deps), read the
tools/queries the parent wrote and print rankings as JSON, so the parent scores every engine alike.

Input: ``--tools`` JSONL of ``{"key", "server", "name", "description", "input_schema"}`` (``key`` is
the LLM-facing name the pool gives the tool), ``--queries`` JSONL of ``{"query"}``, ``--depth``.
Output (stdout): ``{"rankings": [[key, ...], ...], "build_s": float, "search_s": [float, ...]}``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any


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
    queries = [q["query"] for q in read_jsonl(args.queries)]
    started = time.perf_counter()
    search = build(tools)
    build_s = time.perf_counter() - started
    rankings: list[list[str]] = []
    times: list[float] = []
    for query in queries:
        t0 = time.perf_counter()
        ranking = search(query, args.depth)
        times.append(time.perf_counter() - t0)
        rankings.append(ranking)
    json.dump({"rankings": rankings, "build_s": build_s, "search_s": times}, sys.stdout)
