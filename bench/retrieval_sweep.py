"""Catalog-size sweep of bench/retrieval.py (``retrieval.py --sweep``): every set at 25, 100, 300
tools and full size, with each query's tools and without them (negatives), every engine; plus the
example catalog's documented queries. Saved to results/retrieval_sweep.json.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from retrieval import (
    BASELINES,
    DATA_DIR,
    DEPTH,
    EXAMPLE,
    MAX_RESULTS,
    NEGATIVE_METRICS,
    SIZES,
    SWEEP_RESULTS,
    Case,
    datasets,
    load_tools,
    make_cases,
    rankings_for,
    read_jsonl,
    sample_queries,
    score_cases,
)

from discovery_svc.embeddings import Embedder

__all__ = ["example_report", "print_sweep", "run_sweep"]


def _sizes_of(n_tools: int) -> list[int | None]:
    """The sweep's catalog sizes for a file of ``n_tools`` (None: the whole file)."""
    return [s for s in SIZES if s < n_tools] + [None]


def example_report(embedder: Embedder | None, engines: Sequence[str]) -> dict[str, Any]:
    """The example catalog: scores, and each documented query's first tool per engine."""
    tools = load_tools(EXAMPLE.with_suffix(".tools.jsonl"))
    queries = read_jsonl(EXAMPLE.with_suffix(".queries.jsonl"))
    key_of = {(t["server"], t["name"]): t["key"] for t in tools}
    cases = [Case(q) for q in queries]
    scores: dict[str, Any] = {}
    firsts: dict[str, dict[str, Any]] = {
        q["query"]: {"expected": [key_of[(g["server"], g["name"])] for g in q["gold"]]} for q in queries
    }
    for engine in engines:
        rankings = rankings_for(engine, tools, cases, embedder)
        scores[engine] = score_cases(rankings, cases, key_of, negative=False)
        for query, ranking in zip(queries, rankings, strict=True):
            firsts[query["query"]][engine] = ranking[:MAX_RESULTS]
    return {"results": scores, "queries": firsts}


def run_sweep(
    embedder: Embedder | None,
    *,
    seed: int,
    max_queries: int,
    sets: Sequence[str] | None,
    reuse_baselines: bool,
) -> dict[str, Any]:
    """Every set x catalog size x (positive, negative) x engine; the example catalog too.

    Full-size positive runs take every query; the others a seeded sample of ``max_queries``.
    ``reuse_baselines`` takes the baselines' rows from the previous sweep file when it has them
    (for the same seed and sample size).
    """
    previous: dict[str, Any] = {}
    if reuse_baselines and SWEEP_RESULTS.exists():
        last = json.loads(SWEEP_RESULTS.read_text(encoding="utf-8"))
        # Rows of another seed or sample size were measured on other catalogs: not comparable.
        if (last.get("seed"), last.get("queries_per_sample")) == (seed, max_queries):
            previous = last.get("results", {})
    engines: list[str] = ["toolscout-bm25"] + (["toolscout-hybrid"] if embedder else []) + list(BASELINES)
    table: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
    seconds: dict[str, float] = {}
    for name in sets or datasets():
        tools = load_tools(DATA_DIR / f"{name}.tools.jsonl")
        queries = read_jsonl(DATA_DIR / f"{name}.queries.jsonl")
        key_of = {(t["server"], t["name"]): t["key"] for t in tools}
        table[name] = {}
        for size in _sizes_of(len(tools)):
            label = str(size) if size is not None else "full"
            for negative in (False, True):
                variant = f"{label}{'-negative' if negative else ''}"
                limit = None if size is None and not negative else max_queries
                positions = sample_queries(queries, limit, seed)
                cases = make_cases(tools, queries, positions, size=size, seed=seed, negative=negative)
                row: dict[str, Any] = {"tools": len(tools) if size is None else size}
                for engine in engines:
                    kept = previous.get(name, {}).get(variant, {}).get(engine)
                    if kept is not None and engine in BASELINES:
                        row[engine] = kept
                        continue
                    started = time.perf_counter()
                    rankings = rankings_for(engine, tools, cases, embedder)
                    row[engine] = score_cases(rankings, cases, key_of, negative=negative)
                    took = time.perf_counter() - started
                    seconds[engine] = seconds.get(engine, 0.0) + took
                    print(f"  {name:10} {variant:14} {engine:16} {took:6.1f}s", file=sys.stderr, flush=True)
                table[name][variant] = row
    report: dict[str, Any] = {
        "metrics_depth": DEPTH,
        "max_results": MAX_RESULTS,
        "seed": seed,
        "queries_per_sample": max_queries,
        "baselines": {k: v[0] for k, v in BASELINES.items()},
        "results": table,
        "example": example_report(embedder, engines),
        "seconds_per_engine": {k: round(v, 1) for k, v in seconds.items()},
        "load_average_1m_at_end": round(os.getloadavg()[0], 2),
    }
    if embedder is not None:
        from discovery_svc.fusion import fusion_for

        report["hybrid"] = {"embedder": embedder.model_id, "fusion": repr(fusion_for(embedder.model_id))}
    return report


def print_sweep(report: dict[str, Any]) -> None:
    columns = ("R@1", "R@5", "MRR", *NEGATIVE_METRICS)
    header = f"{'set':10} {'catalog':14} {'engine':16} " + " ".join(f"{c[:9]:>9}" for c in columns)
    print(header)
    print("-" * len(header))
    for name, variants in report["results"].items():
        for variant, row in variants.items():
            for engine, result in row.items():
                if not isinstance(result, dict):
                    continue
                cells = " ".join(f"{result[c]:9.3f}" if c in result else " " * 9 for c in columns)
                print(f"{name:10} {variant:14} {engine:16} {cells}")
    print("\nexample catalog (first tools per documented query):")
    for query, row in report["example"]["queries"].items():
        expected = ", ".join(row["expected"]) or "(nothing)"
        got = "  ".join(f"{e}: {(row[e] or ['(nothing)'])[0]}" for e in row if e != "expected")
        print(f"  {query!r:45} expected {expected:28} {got}")
