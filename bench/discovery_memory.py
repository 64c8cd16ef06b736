"""Discovery's memory with many toolsets: RSS at 50,000 tools with 1 vs 20 configured toolsets.

    OPENBLAS_NUM_THREADS=1 uv run --frozen python bench/discovery_memory.py \
        [--tools 50000] [--toolsets 1 20] [--search bm25 hybrid] [--compare-code DIR]

Each measurement runs in a fresh process: the discovery engine (as ``build_server`` wires it, with
``defer_all``) gets a catalog of ``--tools`` tools, then every toolset is used once the way a
request uses it — PlanTools in the openai encoding and one search_tools query — after the all-tools
state the server builds at start. RSS is read after a garbage collection. Toolsets are random
halves of the servers (a fixed seed per toolset), so each holds about half the catalog.

The catalog recombines the real tools of ../shared/data under numbered server copies, as
bench/search_latency.py does. In hybrid mode the service builds its dense side from the on-disk
embedding cache (a cached restart) and embeds queries with the bundled local model; the cache is
filled beforehand with random unit vectors of the model's dimension for every tool text (vector
values change neither memory nor work, and embedding 50,000 tools for real takes 40-140 minutes).

``--compare-code DIR`` also measures the discovery package of another checkout (e.g. ``git archive``
of an older commit) in BM25 mode, for a before/after figure. Results are printed and saved to
bench/results/discovery_memory.json.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from toolscout.client import PlanRequest

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "discovery_memory.json"
QUERY = "send a message to the customer about the invoice"
LOCAL_DIM = 384  # multilingual-e5-small


def _catalog_rows(size: int) -> list[dict[str, Any]]:
    sys.path.insert(0, str(ROOT / "bench"))
    from search_latency import synthetic_catalog

    rows = synthetic_catalog(size, random.Random(size))
    for row in rows:  # config server names: 1-64 characters without spaces
        row["server"] = "_".join(row["server"].split())[:64]
    return rows


def _config_doc(servers: list[str], toolsets: int) -> dict[str, Any]:
    sets = {}
    for i in range(toolsets):
        rng = random.Random(1000 + i)
        sets[f"ts{i:02d}"] = {"servers": {s: True for s in servers if rng.random() < 0.5}}
    return {
        "servers": {s: {"command": "unused", "defer_loading": True} for s in servers},
        "tool_sets": sets,
        "tool_discovery": {"enabled": True, "defer_all": True},
    }


def _rss_mb() -> float:
    import psutil  # type: ignore[import-untyped]  # dev-only dependency without stubs

    gc.collect()
    return float(psutil.Process().memory_info().rss / 2**20)


async def _child(args: argparse.Namespace) -> dict[str, Any]:
    """One measurement in this (fresh) process; the discovery code comes from sys.path."""
    from toolscout.client import SearchRequest

    from discovery_svc.catalog import Catalog, ParsedTool
    from discovery_svc.engine import DiscoveryEngine
    from tests.support.discovery_catalogs import config as make_config

    out: dict[str, Any] = {"rss_start_mb": round(_rss_mb(), 1)}
    rows = _catalog_rows(args.tools)
    tools = [
        ParsedTool.create(
            server=r["server"],
            name=r["name"],
            llm_name=r["key"],
            description=r["description"],
            input_schema=r["input_schema"],
        )
        for r in rows
    ]
    del rows
    servers = sorted({t.server for t in tools})
    cfg = make_config(_config_doc(servers, args.toolsets))
    catalog = Catalog("bench", tools)
    del tools
    out["rss_catalog_mb"] = round(_rss_mb(), 1)
    kwargs: dict[str, Any] = {"cache_size": max(64, args.toolsets + 8)}
    if args.search == "hybrid":
        from prometheus_client import CollectorRegistry

        from discovery_svc.embeddings import LocalE5Embedder
        from discovery_svc.hybrid_stage import HybridStage
        from discovery_svc.metrics import DiscoveryMetrics

        metrics = DiscoveryMetrics(CollectorRegistry())
        kwargs["metrics"] = metrics
        kwargs["hybrid"] = HybridStage(LocalE5Embedder(), metrics=metrics, cache_dir=Path(args.cache_dir))
    engine = DiscoveryEngine(cfg, **kwargs)
    engine.set_catalog(catalog)
    started = time.perf_counter()
    await engine.warm()  # what the server does when a catalog arrives
    if args.search == "hybrid":
        await asyncio.wait_for(engine.wait_hybrid_ready(), 600)
    out["ready_s"] = round(time.perf_counter() - started, 2)
    out["rss_one_index_mb"] = round(_rss_mb(), 1)
    started = time.perf_counter()
    for i in range(args.toolsets):
        name = f"ts{i:02d}"
        await engine.plan_tools(PlanRequest(name, provider="openai"))
        result = await engine.search_tools(SearchRequest(toolset=name, query=QUERY))
        assert result.matches, name
    out["toolsets_s"] = round(time.perf_counter() - started, 2)
    out["rss_mb"] = round(_rss_mb(), 1)
    out["prepared_states"] = engine.builds
    out["catalog_tools"] = len(catalog)
    out["servers"] = len(servers)
    close = getattr(engine, "close", None)
    if close is not None:
        await close()
    return out


def _fill_cache(tools: int, cache_dir: Path) -> int:
    """Random unit vectors for every tool text of the catalog, under the local model's id."""
    import numpy as np

    sys.path.insert(0, str(ROOT))
    from discovery_svc.catalog import Catalog, ParsedTool
    from discovery_svc.catalog_index import CatalogIndex
    from discovery_svc.embedding_cache import EmbeddingCache
    from discovery_svc.embeddings import LocalE5Embedder, embedding_text, normalize_rows

    rows = _catalog_rows(tools)
    catalog = Catalog(
        "bench",
        (
            ParsedTool.create(
                server=r["server"],
                name=r["name"],
                llm_name=r["key"],
                description=r["description"],
                input_schema=r["input_schema"],
            )
            for r in rows
        ),
    )
    texts = list(dict.fromkeys(embedding_text(d) for d in CatalogIndex(catalog).docs()))
    cache = EmbeddingCache(LocalE5Embedder().model_id, cache_dir)
    _, missing = cache.lookup("document", texts)
    todo = [texts[i] for i in missing]
    rng = np.random.default_rng(7)
    for start in range(0, len(todo), 5000):
        batch = todo[start : start + 5000]
        cache.put("document", batch, normalize_rows(rng.standard_normal((len(batch), LOCAL_DIM))))
    return len(texts)


def _run_child(search: str, toolsets: int, tools: int, cache_dir: Path, code: Path | None) -> dict[str, Any]:
    command = [
        sys.executable, str(Path(__file__).resolve()), "--child", "--search", search,
        "--toolsets", str(toolsets), "--tools", str(tools), "--cache-dir", str(cache_dir),
    ]  # fmt: skip
    # The discovery code under test first on the path; the repo's tests/ and bench/ after it.
    path = [str(code)] if code is not None else []
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([*path, str(ROOT)]),
        "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1"),
    }
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"child {search}/{toolsets} failed:\n{done.stderr[-4000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tools", type=int, default=50_000)
    parser.add_argument("--toolsets", type=int, nargs="+", default=[1, 20])
    parser.add_argument("--search", nargs="+", default=["bm25", "hybrid"], choices=["bm25", "hybrid"])
    parser.add_argument("--compare-code", type=Path, help="another checkout's discovery, BM25 only")
    parser.add_argument("--cache-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        from toolscout_kit.logging import configure_logging

        configure_logging("WARNING")
        args.search = args.search[0] if isinstance(args.search, list) else args.search
        args.toolsets = args.toolsets[0]
        print(json.dumps(asyncio.run(_child(args))))
        return

    report: dict[str, Any] = {"tools": args.tools, "query": QUERY, "runs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        cache_dir = Path(tmp)
        if "hybrid" in args.search:
            started = time.perf_counter()
            texts = _fill_cache(args.tools, cache_dir)
            print(
                f"embedding cache filled: {texts} texts in {time.perf_counter() - started:.1f}s",
                file=sys.stderr,
            )
        runs: list[tuple[str, str, Path | None]] = [(s, s, None) for s in args.search]
        if args.compare_code is not None:
            runs.append(("bm25 (compared code)", "bm25", args.compare_code.resolve()))
        for label, search, code in runs:
            for count in args.toolsets:
                started = time.perf_counter()
                row = _run_child(search, count, args.tools, cache_dir, code)
                row["wall_s"] = round(time.perf_counter() - started, 1)
                report["runs"].setdefault(label, {})[str(count)] = row
                print(
                    f"  {label:22} {count:3d} toolsets: RSS {row['rss_mb']:8.1f} MB ({row['wall_s']}s)",
                    file=sys.stderr,
                )
    print(f"\nDiscovery RSS, {args.tools:,} tools (defer_all), toolsets of ~half the catalog:")
    print(
        f"{'search':22} " + " ".join(f"{c:>4} toolsets" for c in args.toolsets) + "   ratio   one index only"
    )
    for label, rows in report["runs"].items():
        cells = " ".join(f"{rows[str(c)]['rss_mb']:10.1f} MB" for c in args.toolsets)
        lo, hi = rows[str(min(args.toolsets))]["rss_mb"], rows[str(max(args.toolsets))]["rss_mb"]
        rows["ratio"] = round(hi / lo, 3)
        print(
            f"{label:22} {cells}   ×{hi / lo:.3f}   {rows[str(min(args.toolsets))]['rss_one_index_mb']:.1f} MB"
        )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"saved {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
