"""In-process search latency of discovery_svc.index from 500 to 50,000 tools, beside casual-mcp 1.0.

    uv run --frozen python bench/search_latency.py [--sizes 500 ... 50000] [--queries 2000] [--no-baseline]
        [--search bm25 hybrid] [--hybrid-queries 1000] [--embedder local] [--query-words 1-8|full]
        [--before REF]

BM25 is measured unfiltered, server-scoped, and with a toolset filter (a CandidateMask of a random
half of the catalog). Hybrid search (discovery_svc.hybrid, query embedding included, each query
embedded afresh) is measured in the same run, unfiltered and with the same half-catalog mask.
Synthetic tools beyond the real ones are copies with an extra sentence; for hybrid latency each
copy reuses the vector of the real tool it copies (vectors' values do not change the work done),
so only the real tools (about 9,000) are embedded, once, into the bench cache. The same run times
a cached restart: loading a cache directory holding every tool's vector, looking each tool up by
text hash and building the dense matrix (the work a restarted discovery does before hybrid
search is ready), plus embedding throughput of the local model on real tool texts.

Synthetic catalogs recombine the real catalogues in ../shared/data (every tool of every set,
re-served under numbered server copies, each copy's description extended with a sentence from
another tool so copies are not identical documents). Queries are 1-8 consecutive words cut from
the real query sets (uniform length), or with ``--query-words full`` whole queries as written (each
of the five sets equally likely, then a query of it: toolbench and sealtools paragraphs of 50+
words among them), the same list for every engine. ``--before REF`` also measures BM25 of the
project at git ref REF (its ``discovery_svc`` extracted with ``git archive``, run in a subprocess)
on the same catalog and queries, size by size right before the current tree, so a change is
compared before and after in one run; the 1-minute load average is printed beside every figure. casual-mcp's
``ToolSearchIndex`` runs in its isolated environment (bench/_baselines/casual.py) on the same
catalog and queries; it rebuilds its index per chat in production, its build time is shown too.
Wall-clock percentiles are the target figures; CPU time is reported beside every variant (this
thread's for BM25, the process's for hybrid: the model may compute in a thread of its own) because
on a shared 2-core machine the wall-clock tail mostly measures other processes.
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]  # dev-only dependency without stubs

ROOT = Path(__file__).resolve().parent.parent
# --before runs this script on another checkout's discovery_svc (see _measure_before).
ENGINE_ROOT = Path(os.environ.get("TOOLSCOUT_BENCH_ENGINE_ROOT") or ROOT)
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ENGINE_ROOT))

from discovery_svc.embedding_cache import EmbeddingCache, embed_with_cache  # noqa: E402
from discovery_svc.embeddings import Embedder, embedding_text  # noqa: E402
from discovery_svc.hybrid import DenseIndex, HybridIndex  # noqa: E402
from discovery_svc.index import SearchDoc, SearchIndex  # noqa: E402

DATA_DIR = Path(os.environ.get("TOOLSCOUT_BENCH_DATA") or ROOT.parent / "shared" / "data")
RESULTS = ROOT / "bench" / "results" / "search_latency.json"
LIMIT = 5  # max_search_results default
CACHE_DIR = ROOT / "bench" / "results" / "embcache"
CASUAL = ["casual-mcp==1.0.0", "rank-bm25==0.2.2"]
# The peers, each in an isolated environment of its pinned packages: (packages, runner script).
BASELINES = {
    "casual-mcp": (CASUAL, "casual.py"),
    # FastMCP 4's BM25SearchTransform index (what its search_tools runs in process).
    "fastmcp": (["fastmcp==4.1.2"], "fastmcp_bm25.py"),
}


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
                    "source": i,  # index of the real tool this one copies
                    "key": key,
                    "server": server,
                    "name": tool["name"],
                    "description": description,
                    "input_schema": tool["input_schema"] or {},
                }
            )
        copy += 1
    return tools


def sample_queries(count: int, rng: random.Random, words: str = "1-8") -> list[str]:
    if words == "full":
        sets = [[q["query"] for q in _read_jsonl(path)] for path in sorted(DATA_DIR.glob("*.queries.jsonl"))]
        return [rng.choice(rng.choice(sets)) for _ in range(count)]
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


def _wall_cpu(row: dict[str, Any], key: str) -> str:
    wall, cpu = row[key], row[f"{key}_cpu"]
    load = f"   load {row['load_1m']:.2f}" if "load_1m" in row else ""
    return (
        f"p50 {wall['p50_ms']:.3f} ms  p99 {wall['p99_ms']:.3f} ms"
        f"   [CPU p50 {cpu['p50_ms']:.3f}  p99 {cpu['p99_ms']:.3f}]{load}"
    )


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
    docs = _docs(tools)
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
    servers = sorted({t["server"] for t in tools})
    started = time.perf_counter()
    mask = half_mask(index, tools)
    mask_build_s = time.perf_counter() - started
    # Wall clock and this thread's CPU time for each query of each variant: on a shared machine
    # the wall-clock tail mostly measures other processes, the CPU time what the search costs.
    times, cpu = _timed(queries, lambda i, q: index.search(q, LIMIT))
    scoped, scoped_cpu = _timed(
        queries, lambda i, q: index.search(q, LIMIT, server=servers[i % len(servers)])
    )
    masked, masked_cpu = _timed(queries, lambda i, q: index.search(q, LIMIT, candidates=mask))
    return {
        # Other work on the machine inflates the wall-clock figures: the load while they ran.
        "load_1m": round(os.getloadavg()[0], 2),
        "build_s": round(build_s, 3),
        "index_rss_mb": round(index_mb, 1),  # resident-set growth while building (approximate)
        "query": _summary(times),
        "query_cpu": _summary(cpu),
        "query_server_scoped": _summary(scoped),
        "query_server_scoped_cpu": _summary(scoped_cpu),
        "query_half_catalog_mask": _summary(masked),
        "query_half_catalog_mask_cpu": _summary(masked_cpu),
        "mask_build_ms": round(mask_build_s * 1000, 2),
        "mask_bytes": len(index),
        "index": index,
    }


def _timed(
    queries: list[str],
    search: Callable[[int, str], object],
    cpu_clock: Callable[[], float] = time.thread_time,
) -> tuple[list[float], list[float]]:
    """Wall-clock and CPU seconds of ``search(i, query)`` for each query."""
    wall: list[float] = []
    cpu: list[float] = []
    clock = time.perf_counter
    for i, query in enumerate(queries):
        c0, t0 = cpu_clock(), clock()
        search(i, query)
        wall.append(clock() - t0)
        cpu.append(cpu_clock() - c0)
    return wall, cpu


def half_mask(index: SearchIndex, tools: list[dict[str, Any]]) -> Any:
    """A toolset of a random half of the catalog (fixed seed), as a CandidateMask."""
    rng = random.Random(len(tools))
    return index.mask(t["key"] for t in tools if rng.random() < 0.5)


def _docs(tools: list[dict[str, Any]]) -> list[SearchDoc]:
    return [SearchDoc(t["key"], t["server"], t["name"], t["description"], t["input_schema"]) for t in tools]


def source_vectors(tools: list[dict[str, Any]], embedder: Embedder) -> Any:
    """Vectors for the synthetic catalog: each tool gets the vector of the real tool it copies."""
    import numpy as np

    real = [t for path in sorted(DATA_DIR.glob("*.tools.jsonl")) for t in _read_jsonl(path)]
    needed = sorted({t["source"] for t in tools})
    texts = [
        embedding_text(
            SearchDoc("k", r["server"], r["name"], r["description"] or "", r["input_schema"] or {})
        )
        for r in (real[i] for i in needed)
    ]
    cache = EmbeddingCache(embedder.model_id, CACHE_DIR)
    started = time.perf_counter()

    def progress(done: int, total: int) -> None:
        rate = done / max(time.perf_counter() - started, 1e-9)
        print(f"    embedded {done}/{total} real tools ({rate:.1f}/s)", file=sys.stderr, flush=True)

    vectors = embed_with_cache(embedder, cache, texts, progress=progress)
    row_of = {src: row for row, src in enumerate(needed)}
    return np.ascontiguousarray(vectors[[row_of[t["source"]] for t in tools]])


def measure_hybrid(
    tools: list[dict[str, Any]], queries: list[str], index: SearchIndex, embedder: Embedder
) -> dict[str, Any]:
    import shutil

    by_key = {t["key"]: t for t in tools}
    vectors = source_vectors([by_key[k] for k in index.keys], embedder)
    hybrid = HybridIndex(index, DenseIndex(vectors), embedder)
    mask = half_mask(index, tools)
    for query in ["warm up the model", "list files"]:
        hybrid.search(query, LIMIT)
    # The model computes in this thread or its own OpenMP thread: CPU time of the whole process.
    cpu_clock = time.process_time
    embed_times, embed_cpu = _timed(queries, lambda i, q: embedder.embed_query(q), cpu_clock)
    # Each query once per measurement: HybridIndex caches recent query vectors, so the masked run
    # gets fresh texts (a suffix word) to keep the model call in every timing.
    times, cpu = _timed(queries, lambda i, q: hybrid.search(q, LIMIT), cpu_clock)
    masked, masked_cpu = _timed(
        queries, lambda i, q: hybrid.search(f"{q} {i}", LIMIT, candidates=mask), cpu_clock
    )
    # Cached restart: a cache directory holding every tool's vector, then load + look up + matrix.
    texts = [embedding_text(d) for d in _docs([by_key[k] for k in index.keys])]
    restart_dir = Path(tempfile.mkdtemp(prefix="toolscout-restart-"))
    try:
        EmbeddingCache(embedder.model_id, restart_dir).put("document", texts, vectors)
        gc.collect()
        started = time.perf_counter()
        cache = EmbeddingCache(embedder.model_id, restart_dir)
        loaded = time.perf_counter() - started
        again = embed_with_cache(
            embedder, cache, [embedding_text(d) for d in _docs([by_key[k] for k in index.keys])]
        )
        DenseIndex(again)
        restart_s = time.perf_counter() - started
    finally:
        shutil.rmtree(restart_dir, ignore_errors=True)
    return {
        "embedder": embedder.model_id,
        "query": _summary(times),
        "query_cpu": _summary(cpu),
        "query_half_catalog_mask": _summary(masked),
        "query_half_catalog_mask_cpu": _summary(masked_cpu),
        "query_embedding_only": _summary(embed_times),
        "query_embedding_only_cpu": _summary(embed_cpu),
        "dense_matrix_mb": round(vectors.nbytes / 2**20, 1),
        "cached_restart_s": round(restart_s, 3),
        "cached_restart_cache_load_s": round(loaded, 3),
    }


def embedding_throughput(embedder: Embedder, count: int = 256) -> dict[str, Any]:
    """Tools per second embedding real tool texts (a fixed sample, uncached)."""
    real = [t for path in sorted(DATA_DIR.glob("*.tools.jsonl")) for t in _read_jsonl(path)]
    sample = random.Random(3).sample(real, count)
    texts = [
        embedding_text(
            SearchDoc("k", r["server"], r["name"], r["description"] or "", r["input_schema"] or {})
        )
        for r in sample
    ]
    embedder.embed_documents(texts[:8])  # load the model
    started = time.perf_counter()
    embedder.embed_documents(texts)
    seconds = time.perf_counter() - started
    return {
        "tools": count,
        "seconds": round(seconds, 2),
        "tools_per_s": round(count / seconds, 1),
        "mean_chars": round(statistics.fmean(len(t) for t in texts)),
    }


def measure_casual(
    tools: list[dict[str, Any]], queries: list[str], peer: str = "casual-mcp"
) -> dict[str, Any]:
    """A peer's search (``BASELINES``) on the same catalog and queries, in its own environment."""
    packages, runner = BASELINES[peer]
    with tempfile.TemporaryDirectory() as tmp:
        tools_path, queries_path = Path(tmp, "tools.jsonl"), Path(tmp, "queries.jsonl")
        tools_path.write_text("".join(json.dumps(t) + "\n" for t in tools), encoding="utf-8")
        queries_path.write_text("".join(json.dumps({"query": q}) + "\n" for q in queries), encoding="utf-8")
        command = ["uv", "run", "--isolated", "--no-project", "--quiet"]
        for package in packages:
            command += ["--with", package]
        command += ["python", str(ROOT / "bench" / "_baselines" / runner)]
        command += ["--tools", str(tools_path), "--queries", str(queries_path), "--depth", str(LIMIT)]
        done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=tmp, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"{peer} runner failed ({done.returncode}):\n{done.stderr[-4000:]}")
    out = json.loads(done.stdout)
    return {
        "build_s": round(out["build_s"], 3),
        "query": _summary(out["search_s"]),
        "query_cpu": _summary(out["search_cpu_s"]),
    }


def _measure_before(ref: str, tools: list[dict[str, Any]], queries: list[str]) -> dict[str, Any]:
    """BM25 of the project at git ref ``ref`` on the same catalog and queries (a subprocess
    importing that ref's ``discovery_svc``, extracted with ``git archive``)."""
    with tempfile.TemporaryDirectory(prefix="toolscout-before-") as tmp:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", ref, "discovery_svc"], capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        Path(tmp, "work.json").write_text(json.dumps({"tools": tools, "queries": queries}), encoding="utf-8")
        env = dict(os.environ, TOOLSCOUT_BENCH_ENGINE_ROOT=tmp)
        done = subprocess.run(
            [sys.executable, __file__, "--worker", str(Path(tmp, "work.json"))],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
    if done.returncode != 0:
        raise SystemExit(f"--before {ref} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    result["ref"] = ref
    return result


def _worker(path: Path) -> None:
    """--before's subprocess: BM25 figures of this engine on the given catalog and queries."""
    work = json.loads(path.read_text(encoding="utf-8"))
    result = measure_ours(work["tools"], work["queries"])
    result.pop("index")
    print(json.dumps(result))


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        _worker(Path(sys.argv[2]))
        return
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
    parser.add_argument("--search", nargs="+", choices=["bm25", "hybrid"], default=["bm25", "hybrid"])
    parser.add_argument("--hybrid-queries", type=int, default=1000)
    parser.add_argument("--embedder", choices=["local", "minilm"], default="local")
    parser.add_argument("--throughput-tools", type=int, default=256)
    parser.add_argument(
        "--query-words",
        choices=["1-8", "full"],
        default="1-8",
        help="fragments of 1-8 words cut from the real queries, or the whole queries",
    )
    parser.add_argument("--before", metavar="REF", help="also measure BM25 at this git ref, same run")
    parser.add_argument(
        "--out", type=Path, default=RESULTS, help=f"results file (default {RESULTS.relative_to(ROOT)})"
    )
    args = parser.parse_args()
    rng = random.Random(args.seed)
    queries = sample_queries(args.queries, rng, args.query_words)
    embedder: Embedder | None = None
    if "hybrid" in args.search:
        sys.path.insert(0, str(ROOT / "bench"))
        from retrieval import make_embedder

        embedder = make_embedder(args.embedder)
    report: dict[str, Any] = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "limit": LIMIT,
        "query_words": args.query_words,
        # Other work on the machine inflates every wall-clock figure; recorded so runs compare.
        "load_average_1m_at_start": round(os.getloadavg()[0], 2),
        "sizes": {},
    }
    if embedder is not None and args.throughput_tools:
        report["embedding_throughput"] = embedding_throughput(embedder, args.throughput_tools)
        print(f"embedding throughput: {report['embedding_throughput']}", flush=True)
    for size in args.sizes:
        tools = synthetic_catalog(size, random.Random(args.seed + size))
        row: dict[str, Any] = {}
        if args.before:
            row["toolscout-before"] = _measure_before(args.before, tools, queries)
        row["toolscout"] = measure_ours(tools, queries)
        index = row["toolscout"].pop("index")
        if embedder is not None:
            row["toolscout-hybrid"] = measure_hybrid(tools, queries[: args.hybrid_queries], index, embedder)
        if not args.no_baseline:
            for peer in BASELINES:
                row[peer] = measure_casual(tools, queries[: args.baseline_queries], peer)
                row[peer]["load_1m"] = round(os.getloadavg()[0], 2)
                ours, theirs = row["toolscout"]["query"], row[peer]["query"]
                row[f"{peer}_over_toolscout"] = {
                    "p50": round(theirs["p50_ms"] / ours["p50_ms"], 1),
                    "p99": round(theirs["p99_ms"] / ours["p99_ms"], 1),
                }
        report["sizes"][str(size)] = row
        ours = row["toolscout"]
        line = (
            f"{size:>6} tools  BM25 (build {ours['build_s']:.2f} s, ~{ours['index_rss_mb']:.0f} MB)"
            + "".join(
                f"\n{'':>6}        {label:22} {_wall_cpu(ours, key)}"
                for label, key in (
                    ("unfiltered", "query"),
                    ("server-scoped", "query_server_scoped"),
                    ("half-catalog mask", "query_half_catalog_mask"),
                )
            )
        )
        if "toolscout-before" in row:
            before = row["toolscout-before"]
            line += f"\n{'':>6}        before ({before['ref']}, build {before['build_s']:.2f} s, ~{before['index_rss_mb']:.0f} MB)"
            line += "".join(
                f"\n{'':>6}        {label:22} {_wall_cpu(before, key)}"
                for label, key in (
                    ("unfiltered", "query"),
                    ("server-scoped", "query_server_scoped"),
                    ("half-catalog mask", "query_half_catalog_mask"),
                )
            )
        if "toolscout-hybrid" in row:
            h = row["toolscout-hybrid"]
            line += "".join(
                f"\n{'':>6}        {label:22} {_wall_cpu(h, key)}"
                for label, key in (
                    ("hybrid", "query"),
                    ("hybrid, mask", "query_half_catalog_mask"),
                    ("query embedding alone", "query_embedding_only"),
                )
            )
            line += f"\n{'':>6}        cached restart {h['cached_restart_s']:.2f} s"
        for peer in BASELINES:
            if peer in row:
                c, ratio = row[peer], row[f"{peer}_over_toolscout"]
                line += (
                    f"\n{'':>6}        {peer:22} {_wall_cpu(c, 'query')}"
                    f"\n{'':>6}        (build {c['build_s']:.2f} s)  ratio p50 x{ratio['p50']}"
                    f" p99 x{ratio['p99']}"
                )
        print(line, flush=True)
    report["load_average_1m_at_end"] = round(os.getloadavg()[0], 2)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
