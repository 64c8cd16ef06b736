"""Discovery benchmarks: PlanTools latency, SearchTools over gRPC, first-call tokens, manifest size.

    OPENBLAS_NUM_THREADS=1 uv run --frozen python bench/discovery_bench.py [--quick] [--no-casual] [--no-hybrid]

Prints a table and saves ``bench/results/discovery.json``. Figures:

* PlanTools on an unchanged catalog at 50,000 synthetic tools, in process (target <= 1 ms).
* SearchTools over gRPC on loopback at 5,000 synthetic tools, queries of 1-8 words (target p50 <= 2 ms).
* Tokens with ``defer_all`` over ``livemcpbench`` (527 real MCP tools): the first call's tool tokens
  (loaded definitions + search_tools + manifest) vs sending every definition (target <= 3%), beside
  casual-mcp 1.0.0's first call (its search-tools tool + the system message listing every deferred
  tool), produced by casual-mcp's own code in an isolated environment.
* Manifest tokens at 50,000 synthetic tools (budget 2,000), beside casual-mcp's system message size.
* Hybrid search_tools through the engine at 5,000 and 50,000 tools (fresh queries, each embedded by
  the bundled model in a worker thread; ``--no-hybrid`` skips it). Run with OPENBLAS_NUM_THREADS=1.
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

from toolscout.client import PlanRequest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from toolscout.client import SearchRequest  # noqa: E402

from discovery_svc.catalog import Catalog, ParsedTool  # noqa: E402
from discovery_svc.engine import DiscoveryEngine  # noqa: E402
from discovery_svc.tokens import TokenCounter, definition_json  # noqa: E402
from tests.support.discovery_catalogs import config, synthetic_tools  # noqa: E402
from toolscout_kit.logging import configure_logging  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
RESULTS = ROOT / "bench" / "results" / "discovery.json"
QUERIES = [
    "invoice",
    "send message",
    "create calendar event",
    "list open tickets for customer",
    "export the monthly payment report",
    "fetch repository issues and sync dashboard",
    "update shipment status and notify the customer",
    "search documents by user id and export them as a report",
]


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    n = len(ordered)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 4),
        "p99_ms": round(ordered[min(n - 1, int(n * 0.99))] * 1000, 4),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 4),
        "n": n,
    }


def pool_names(rows: list[dict[str, Any]]) -> list[str]:
    """LLM names as the pool gives them (its naming table), else ``{server}_{name}``."""
    try:
        from mcp_pool_svc.naming import NameTable
    except ImportError:
        return [f"{r['server']}_{r['name']}" for r in rows]
    table = NameTable((r["server"], r["name"]) for r in rows)
    return [table.name_for(r["server"], r["name"]) for r in rows]


def livemcp_tools() -> list[ParsedTool]:
    rows = [
        json.loads(line)
        for line in (DATA / "livemcpbench.tools.jsonl").read_text("utf-8").splitlines()
        if line
    ]
    return [
        ParsedTool.create(
            server=r["server"],
            name=r["name"],
            llm_name=key,
            description=r.get("description") or "",
            input_schema=r.get("input_schema") or {"type": "object", "properties": {}},
        )
        for r, key in zip(rows, pool_names(rows), strict=True)
    ]


async def bench_plan(n_tools: int, iterations: int) -> dict[str, Any]:
    svc = DiscoveryEngine(config({"tool_discovery": {"enabled": True, "defer_all": True}}))
    started = time.perf_counter()
    svc.set_catalog(Catalog("synthetic", synthetic_tools(n_tools)))
    catalog_s = time.perf_counter() - started
    started = time.perf_counter()
    await svc.warm()
    warm_s = time.perf_counter() - started
    discovered = [t.llm_name for t in svc.catalog.tools[:: n_tools // 5]][:5]  # type: ignore[union-attr]
    out: dict[str, Any] = {
        "tools": n_tools,
        "catalog_build_s": round(catalog_s, 3),
        "prepare_s": round(warm_s, 3),
    }
    for label, names in (("no_discovered", []), ("5_discovered", discovered)):
        samples = []
        for _ in range(iterations):
            t0 = time.perf_counter()
            await svc.plan_tools(PlanRequest(discovered_tools=names))
            samples.append(time.perf_counter() - t0)
        out[label] = percentiles(samples)
    out["builds"] = svc.builds
    return out


async def bench_search_grpc(n_tools: int, iterations: int) -> dict[str, Any]:
    import grpc
    from toolscout.discovery.v1 import discovery_pb2, discovery_pb2_grpc

    from discovery_svc.server import SERVICE_NAME
    from discovery_svc.servicer import DiscoveryServicer
    from toolscout_kit.server import ServiceBinding, start_server

    cfg = config({"tool_discovery": {"enabled": True, "defer_all": True}})
    svc = DiscoveryEngine(cfg)
    svc.set_catalog(Catalog("synthetic", synthetic_tools(n_tools)))
    await svc.warm()
    binding = ServiceBinding(
        SERVICE_NAME, discovery_pb2_grpc.add_DiscoveryServicer_to_server, DiscoveryServicer(svc)
    )
    running = await start_server(
        [binding], cfg.toolscout.discovery, cfg.toolscout.security, listen="127.0.0.1:0", metrics_port=-1
    )
    out: dict[str, Any] = {"tools": n_tools}
    try:
        async with grpc.aio.insecure_channel(running.address) as channel:
            stub = discovery_pb2_grpc.DiscoveryStub(channel)
            for q in QUERIES:  # warm-up: connection, caches
                await stub.SearchTools(discovery_pb2.SearchToolsRequest(query=q), timeout=10)
            grpc_samples, inproc_samples = [], []
            for i in range(iterations):
                q = QUERIES[i % len(QUERIES)]
                args = json.dumps({"query": q})
                t0 = time.perf_counter()
                await stub.SearchTools(discovery_pb2.SearchToolsRequest(arguments_json=args), timeout=10)
                grpc_samples.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                await svc.search_tools(SearchRequest(arguments_json=args))
                inproc_samples.append(time.perf_counter() - t0)
            out["grpc_loopback"] = percentiles(grpc_samples)
            out["in_process_service"] = percentiles(inproc_samples)
    finally:
        await running.stop(0)
    return out


async def bench_search_hybrid(n_tools: int, iterations: int) -> dict[str, Any]:
    """search_tools through the engine in hybrid mode: fresh queries, so each is embedded by the
    bundled model (in a worker thread, as the service does), then fused with BM25 off the loop.

    ParsedTool vectors come from a temporary cache filled with random unit vectors (their values change
    no work), so only the query side runs the model."""
    import numpy as np
    from prometheus_client import CollectorRegistry

    from discovery_svc.catalog_index import CatalogIndex
    from discovery_svc.embedding_cache import EmbeddingCache
    from discovery_svc.embeddings import LocalE5Embedder, embedding_text, normalize_rows
    from discovery_svc.hybrid_stage import HybridStage
    from discovery_svc.metrics import DiscoveryMetrics

    sys.path.insert(0, str(ROOT / "bench"))
    from search_latency import sample_queries

    catalog = Catalog("synthetic", synthetic_tools(n_tools))
    embedder = LocalE5Embedder()
    with tempfile.TemporaryDirectory() as cache_dir:
        texts = list(dict.fromkeys(embedding_text(d) for d in CatalogIndex(catalog).docs()))
        rng = np.random.default_rng(5)
        EmbeddingCache(embedder.model_id, Path(cache_dir)).put(
            "document", texts, normalize_rows(rng.standard_normal((len(texts), 384)))
        )
        metrics = DiscoveryMetrics(CollectorRegistry())
        svc = DiscoveryEngine(
            config({"tool_discovery": {"enabled": True, "defer_all": True}}),
            metrics=metrics,
            hybrid=HybridStage(embedder, metrics=metrics, cache_dir=Path(cache_dir)),
        )
        svc.set_catalog(catalog)
        started = time.perf_counter()
        await svc.warm()
        await asyncio.wait_for(svc.wait_hybrid_ready(), 600)
        ready_s = time.perf_counter() - started
        import random

        queries = sample_queries(iterations + 20, random.Random(n_tools))
        for q in queries[:20]:  # warm-up: model pages, allocator
            await svc.search_tools(SearchRequest(query=q))
        samples = []
        for q in queries[20:]:
            t0 = time.perf_counter()
            await svc.search_tools(SearchRequest(query=q))
            samples.append(time.perf_counter() - t0)
        await svc.close()
    return {"tools": n_tools, "cached_ready_s": round(ready_s, 2), "search": percentiles(samples)}


def casual_first_call(tools: list[ParsedTool]) -> dict[str, Any] | None:
    """casual-mcp 1.0.0's first-call payload, built by its own code in an isolated env."""
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as fh:
        for t in tools:
            row = {"key": t.llm_name, "server": t.server, "name": t.name, "description": t.description,
                   "input_schema": dict(t.input_schema)}  # fmt: skip
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        path = fh.name
    cmd = ["uv", "run", "--isolated", "--no-project", "--with", "casual-mcp==1.0.0", "python",
           str(ROOT / "bench" / "_baselines" / "casual_first_call.py"), "--tools", path]  # fmt: skip
    try:
        done = subprocess.run(
            cmd, capture_output=True, text=True, timeout=600, check=False, cwd=tempfile.gettempdir()
        )
    finally:
        os.unlink(path)
    if done.returncode != 0:
        print(f"casual-mcp run failed: {done.stderr[-500:]}", file=sys.stderr)
        return None
    return dict(json.loads(done.stdout))


async def bench_tokens(with_casual: bool) -> dict[str, Any]:
    tools = livemcp_tools()
    svc = DiscoveryEngine(config({"tool_discovery": {"enabled": True, "defer_all": True}}))
    svc.set_catalog(Catalog("livemcpbench", tools))
    out: dict[str, Any] = {"tools": len(tools), "servers": len({t.server for t in tools})}
    counter = TokenCounter()
    casual = casual_first_call(tools) if with_casual else None
    for provider in ("openai", "anthropic"):
        plan = await svc.plan_tools(PlanRequest(provider=provider))
        enc = counter.encoding_for(provider)
        row: dict[str, Any] = {
            "encoding": plan.tokens.encoding,
            "estimate": plan.tokens.estimate,
            "all_definitions": plan.tokens.all_definitions_tokens,
            "first_call": plan.tokens.sent_tokens,
            "first_call_pct": round(100 * plan.tokens.sent_tokens / plan.tokens.all_definitions_tokens, 2),
            "manifest_tokens": counter.count_text(plan.manifest, enc.name),
        }
        if casual is not None:
            tool_tokens = counter.count_text(casual["search_tool_json"], enc.name)
            system_tokens = counter.count_text(casual["system_prompt"], enc.name)
            row["casual_mcp_1_0"] = {
                "source": "casual-mcp==1.0.0 code run isolated (SearchToolsTool.definition + system_prompt)",
                "search_tool": tool_tokens,
                "system_message": system_tokens,
                "first_call": tool_tokens + system_tokens,
                "first_call_pct": round(
                    100 * (tool_tokens + system_tokens) / plan.tokens.all_definitions_tokens, 2
                ),
            }
        out[provider] = row
    return out


def casual_system_message_tokens(tools: list[ParsedTool], counter: TokenCounter) -> int:
    """casual-mcp 1.0's system message, reproduced from its format (SearchToolsTool.system_prompt)."""
    by_server: dict[str, list[str]] = {}
    for t in tools:
        by_server.setdefault(t.server, []).append(t.llm_name)
    lines = [
        f"- {s} ({len(n)} {'tool' if len(n) == 1 else 'tools'}): {', '.join(n)}"
        for s, n in sorted(by_server.items())
    ]
    text = (
        "You have access to a search-tools function that lets you discover and load additional tools.\n\n"
        "Available tool servers you can search:\n" + "\n".join(lines) + "\n\n"
        "To use any of these tools, first call the search-tools function to load them, then call the loaded tools normally."
    )
    return counter.count_text(text, "o200k_base")


async def bench_manifest(n_tools: int) -> dict[str, Any]:
    tools = synthetic_tools(n_tools)
    svc = DiscoveryEngine(config({"tool_discovery": {"enabled": True, "defer_all": True}}))
    svc.set_catalog(Catalog("synthetic", tools))
    started = time.perf_counter()
    prepared = await svc.prepared("")
    build_s = time.perf_counter() - started
    counter = TokenCounter()
    text = prepared.manifest.text
    search_tool = prepared.search_tool
    assert search_tool is not None
    search_tool = prepared.search_tool
    assert search_tool is not None
    return {
        "tools": n_tools,
        "servers": prepared.manifest.deferred_servers,
        "budget": svc._settings.manifest_budget_tokens,
        "o200k_tokens": counter.count_text(text, "o200k_base"),
        "cl100k_tokens": counter.count_text(text, "cl100k_base"),
        "level": prepared.manifest.level,
        "chars": len(text),
        "prepare_s": round(build_s, 3),
        "casual_mcp_1_0_system_message_o200k_tokens": casual_system_message_tokens(tools, counter),
        "casual_mcp_1_0_source": "reproduced from casual-mcp 1.0.0's SearchToolsTool.system_prompt format",
        "search_tool_definition_o200k_tokens": counter.count_text(
            definition_json(
                "search_tools",
                search_tool.description,
                search_tool.input_schema_json,
                "openai",
            ),
            "o200k_base",
        ),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer iterations (smoke run)")
    parser.add_argument("--no-casual", action="store_true", help="skip the isolated casual-mcp run")
    parser.add_argument("--no-hybrid", action="store_true", help="skip hybrid search through the engine")
    args = parser.parse_args()
    # As a deployed service logs: JSON at the default INFO level (successful RPCs are DEBUG).
    configure_logging("INFO")
    iters = 200 if args.quick else 2000
    results: dict[str, Any] = {"python": sys.version.split()[0], "cpu_count": os.cpu_count()}
    results["plan_tools_50k"] = await bench_plan(50_000, iters)
    results["search_tools_grpc_5k"] = await bench_search_grpc(5_000, iters)
    results["tokens_livemcpbench"] = await bench_tokens(not args.no_casual)
    results["manifest_50k"] = await bench_manifest(50_000)
    if not args.no_hybrid:
        hybrid_iters = 100 if args.quick else 500
        results["search_hybrid_engine"] = [
            await bench_search_hybrid(n, hybrid_iters) for n in (5_000, 50_000)
        ]

    plan = results["plan_tools_50k"]
    grpc_row = results["search_tools_grpc_5k"]
    tok = results["tokens_livemcpbench"]["openai"]
    man = results["manifest_50k"]
    print(f"PlanTools, 50k tools, unchanged catalog: p50 {plan['no_discovered']['p50_ms']} ms, "
          f"p99 {plan['no_discovered']['p99_ms']} ms (5 discovered: p50 {plan['5_discovered']['p50_ms']} ms) "
          f"[target <= 1 ms]; prepare once {plan['prepare_s']} s")  # fmt: skip
    print(f"SearchTools over gRPC loopback, 5k tools: p50 {grpc_row['grpc_loopback']['p50_ms']} ms, "
          f"p99 {grpc_row['grpc_loopback']['p99_ms']} ms [target p50 <= 2 ms]; in process p50 "
          f"{grpc_row['in_process_service']['p50_ms']} ms")  # fmt: skip
    line = (f"livemcpbench first call (o200k): {tok['first_call']} of {tok['all_definitions']} tokens = "
            f"{tok['first_call_pct']}% [target <= 3%]")  # fmt: skip
    if "casual_mcp_1_0" in tok:
        c = tok["casual_mcp_1_0"]
        line += f"; casual-mcp 1.0: {c['first_call']} tokens = {c['first_call_pct']}%"
    print(line)
    print(f"Manifest at 50k tools: {man['o200k_tokens']} o200k / {man['cl100k_tokens']} cl100k tokens "
          f"(budget {man['budget']}); casual-mcp 1.0 system message: "
          f"{man['casual_mcp_1_0_system_message_o200k_tokens']} tokens")  # fmt: skip
    for row in results.get("search_hybrid_engine", []):
        print(f"search_tools through the engine, hybrid (fresh queries embedded by the bundled model), "
              f"{row['tools']:,} tools: p50 {row['search']['p50_ms']} ms, p99 {row['search']['p99_ms']} ms; "
              f"ready from the embedding cache in {row['cached_ready_s']} s")  # fmt: skip
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"saved {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    asyncio.run(main())
