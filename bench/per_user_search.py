"""Discovery's search as one principal (per-user tool lists, discovery_svc.user_index), in process.

    uv run --frozen python bench/per_user_search.py [--tools 5000] [--principals 200] [--own 25]
        [--queries 2000]

A synthetic catalog of ``--tools`` tools (25 per server), one of whose servers is ``per_user``
(its 25 stack tools are left out of a principal's search); each of ``--principals`` principals
has ``--own`` tools of their own on it. The pool's per-principal ListTools is an in-process
coroutine here (its cost, a gRPC round trip and the pool's 10 s cache, is not counted): what is
measured is discovery's own work. Figures: BM25 search latency without a principal (the shared
index alone: the path every request without a principal takes) and with one whose index is kept
(the merged scope), the first search of a principal (their index built), and the memory of the
kept per-principal indexes (tracemalloc). Printed and saved to bench/results/per_user_search.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from toolscout.client import SearchRequest, Tool  # noqa: E402

from discovery_svc.catalog import Catalog, ParsedTool  # noqa: E402
from discovery_svc.engine import DiscoveryEngine  # noqa: E402
from discovery_svc.user_index import UserIndexes  # noqa: E402
from tests.support.discovery_catalogs import synthetic_tools  # noqa: E402
from toolscout_kit.config import parse_config  # noqa: E402

_QUERIES = ["create invoice", "list customer tickets", "send message", "export report", "sync calendar event"]


def _config(servers: list[str], per_user: str) -> Any:
    doc = {
        "servers": {
            s: (
                {
                    "url": "http://127.0.0.1:1/mcp",
                    "auth": {"type": "oauth", "per_user": True},
                    "defer_loading": True,
                }
                if s == per_user
                else {"command": "x", "defer_loading": True}
            )
            for s in servers
        },
        "tool_discovery": {"enabled": True},
    }
    return parse_config(doc, env={})


def _own_tools(server: str, principal: int, count: int) -> tuple[Tool, ...]:
    return tuple(
        ParsedTool.create(
            server=server,
            name=f"note_{principal}_{i}",
            llm_name=f"{server}__note_{principal}_{i}",
            description=f"Private notebook page {i} of user {principal}: create, list and export notes.",
            input_schema={"type": "object", "properties": {"page": {"type": "string"}}},
        )
        for i in range(count)
    )


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 4),
        "p99_ms": round(ordered[int(len(ordered) * 0.99) - 1] * 1000, 4),
    }


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    tools = synthetic_tools(args.tools)
    servers = sorted({t.server for t in tools})
    per_user = servers[0]
    config = _config(servers, per_user)
    own = {f"user-{p}": _own_tools(per_user, p, args.own) for p in range(args.principals)}

    async def fetch(server: str, principal: str) -> tuple[Tool, ...] | None:
        return own.get(principal.removeprefix("again-")) if server == per_user else ()

    users = UserIndexes(config, fetch, size=max(2 * args.principals, 1))
    engine = DiscoveryEngine(config, users=users)
    engine.set_catalog(Catalog("v1", tools))
    await engine.search_tools(SearchRequest(query="warm"))
    rng = random.Random(7)
    queries = [rng.choice(_QUERIES) for _ in range(args.queries)]

    async def timed(principal: str) -> list[float]:
        out = []
        for query in queries:
            started = time.perf_counter()
            await engine.search_tools(SearchRequest(query=query, principal=principal))
            out.append(time.perf_counter() - started)
        return out

    shared = await timed("")
    first: list[float] = []
    for principal in own:
        started = time.perf_counter()
        await engine.search_tools(SearchRequest(query="notebook", principal=principal))
        first.append(time.perf_counter() - started)
    merged = await timed("user-0")
    # Memory: the same principals' indexes again under other names, traced (tracemalloc slows
    # Python down: the timings above are taken without it).
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for principal in own:
        await engine.search_tools(SearchRequest(query="notebook", principal=f"again-{principal}"))
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    kept_bytes = sum(s.size_diff for s in after.compare_to(before, "filename"))
    return {
        "catalog_tools": args.tools,
        "principals": args.principals,
        "own_tools_per_principal": args.own,
        "queries": args.queries,
        "search_without_principal": _percentiles(shared),
        "search_as_principal_kept_index": _percentiles(merged),
        "first_search_of_a_principal": _percentiles(first),
        "kept_indexes_mb": round(kept_bytes / 1e6, 2),
        "kept_kb_per_principal": round(kept_bytes / 1e3 / max(args.principals, 1), 1),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tools", type=int, default=5000)
    parser.add_argument("--principals", type=int, default=200)
    parser.add_argument("--own", type=int, default=25)
    parser.add_argument("--queries", type=int, default=2000)
    figures = asyncio.run(_run(parser.parse_args()))
    print(json.dumps(figures, indent=2))
    out = ROOT / "bench" / "results" / "per_user_search.json"
    out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
