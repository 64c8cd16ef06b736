"""Local embedder candidates side by side: retrieval quality fused with BM25, speed, install size.

    uv run --frozen python bench/embedder_compare.py [--embedders local minilm] [--metatool-every 7]

For each embedder: R@5 and MRR of hybrid search (discovery_svc.fusion's default configuration)
and of BM25 on every set (metatool on every N-th query unless --metatool-every 1: embedding all
21,055 queries takes the better part of an hour per model on 2 shared cores), query-embedding
latency on 300 queries of 1-8 words (one at a time, as search does), and document throughput on
256 real tool texts. Vectors come from the bench cache (bench/results/embcache). ``minilm`` is
bench/_embedders/minilm_numpy.py (see its docstring for the weights). Saved to
bench/results/embedder_compare.json.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from retrieval import (  # noqa: E402
    DATA_DIR,
    DEPTH,
    _PrecomputedQueries,
    datasets,
    dense_vectors,
    load_tools,
    make_embedder,
    read_jsonl,
    score,
    tool_docs,
)
from search_latency import embedding_throughput, sample_queries  # noqa: E402

from discovery_svc.embeddings import Embedder  # noqa: E402
from discovery_svc.hybrid import DenseIndex, HybridIndex  # noqa: E402
from discovery_svc.index import SearchIndex  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "embedder_compare.json"


def quality(name: str, embedder: Embedder, every: int) -> dict[str, dict[str, float]]:
    tools = load_tools(DATA_DIR / f"{name}.tools.jsonl")
    queries = read_jsonl(DATA_DIR / f"{name}.queries.jsonl")
    if name == "metatool":
        queries = queries[::every]
    key_of = {(t["server"], t["name"]): t["key"] for t in tools}
    docs = tool_docs(tools)
    index = SearchIndex(docs)
    by_key = {d.key: d for d in docs}
    texts = [q["query"] for q in queries]
    doc_vectors, query_vectors = dense_vectors([by_key[k] for k in index.keys], texts, embedder)
    hybrid = HybridIndex(
        index,
        DenseIndex(doc_vectors),
        _PrecomputedQueries(embedder, dict(zip(texts, query_vectors, strict=True))),
    )
    bm25 = score([[h.key for h in index.search(t, DEPTH)] for t in texts], queries, key_of)
    fused = score([[h.key for h in hybrid.search(t, DEPTH)] for t in texts], queries, key_of)
    return {"bm25": bm25, "hybrid": fused}


def query_latency(embedder: Embedder, count: int = 300) -> dict[str, float]:
    queries = sample_queries(count, random.Random(11))
    embedder.embed_query("warm up")
    times = []
    for q in queries:
        t0 = time.perf_counter()
        embedder.embed_query(q)
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return {
        "p50_ms": round(statistics.median(times), 2),
        "p99_ms": round(times[int(0.99 * (len(times) - 1))], 2),
        "n": count,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--embedders", nargs="+", default=["local", "minilm"])
    parser.add_argument("--metatool-every", type=int, default=7)
    parser.add_argument("--no-speed", action="store_true")
    parser.add_argument("--sets", nargs="+", help="only these sets (default: all)")
    args = parser.parse_args()
    report: dict[str, Any] = {"metatool_every": args.metatool_every, "embedders": {}}
    for name in args.embedders:
        embedder = make_embedder(name)
        row: dict[str, Any] = {"model_id": embedder.model_id, "sets": {}}
        for dataset in args.sets or datasets():
            row["sets"][dataset] = quality(dataset, embedder, args.metatool_every)
            r = row["sets"][dataset]
            print(
                f"{name:7} {dataset:10} bm25 R@5 {r['bm25']['R@5']:.3f} MRR {r['bm25']['MRR']:.3f}"
                f"  hybrid R@5 {r['hybrid']['R@5']:.3f} MRR {r['hybrid']['MRR']:.3f}  (n={r['bm25']['n']})",
                flush=True,
            )
        if not args.no_speed:
            row["query_latency"] = query_latency(embedder)
            row["throughput"] = embedding_throughput(embedder)
            print(f"{name:7} query {row['query_latency']}  build {row['throughput']}", flush=True)
        report["embedders"][name] = row
    RESULTS.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"saved {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
