"""Two questions about hybrid search, measured on every dev set: a similarity floor, and the
"Find information about quantum computing" ranking on livemcpbench.

    OPENBLAS_NUM_THREADS=1 uv run --frozen python bench/hybrid_probes.py [--metatool-every 7]

1. **Similarity floor.** Without one, hybrid search always returns the nearest tools, so
   search_tools never answers "No tools found". Measured: how the bundled model's cosines of
   relevant tools (gold tools of the dev queries) compare with the best cosine of off-topic queries
   (chit-chat, gibberish), and what each way of letting a search come back empty costs in R@5 / MRR:
   absolute floors (a tool without a lexical match must reach the cosine), a noise floor
   calibrated per catalog (the best cosine any of a few nonsense probes reaches), and a lexical
   gate (empty exactly when BM25 finds nothing).
2. **Agreement bonus.** The chosen weighted fusion keeps a weak one-word BM25 hit on top when
   BM25's top hits each match a different single word ("Find information about quantum computing"
   -> `find_parking_facilities`). Measured: multiplying the fused score of tools found by both
   sides by 1 + a (CombMNZ-style), against the targets, and where the livemcpbench examples rank.

Vectors come from bench/results/embcache (bench/retrieval.py). Printed and saved to
bench/results/hybrid_probes.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from fusion_sweep import meets, prepare  # noqa: E402
from retrieval import (  # noqa: E402
    DATA_DIR,
    DEPTH,
    datasets,
    dense_vectors,
    gold_keys,
    load_tools,
    make_embedder,
    score,
    tool_docs,
)

from discovery_svc.fusion import DEFAULT_FUSION, _weighted, fuse  # noqa: E402
from discovery_svc.index import SearchHit, SearchIndex  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "hybrid_probes.json"
OFF_TOPIC = [
    "zxqv blorf wug", "qwertyuiop asdfghjkl", "hello how are you", "thanks, that's all",
    "what is the meaning of life", "tell me something nice", "ok", "hmm let me think",
    "blue sky thinking", "xyzzy plugh", "can you hear me", "good morning",
]  # fmt: skip
NOISE_PROBES = ["zxqv blorf wug", "qwertyuiop asdfghjkl", "xyzzy plugh", "vlim spork dax"]
FLOORS = (0.80, 0.82, 0.84)
ALPHAS = (0.1, 0.2, 0.3, 0.5)
EXAMPLES = ["Find information about quantum computing", "what are the details of this file"]


def _catalog(name: str, embedder: Any, queries: Sequence[str]) -> tuple[SearchIndex, Any, Any]:
    tools = load_tools(DATA_DIR / f"{name}.tools.jsonl")
    docs = tool_docs(tools)
    index = SearchIndex(docs)
    by_key = {d.key: d for d in docs}
    doc_vecs, query_vecs = dense_vectors([by_key[k] for k in index.keys], list(queries), embedder)
    return index, doc_vecs, query_vecs


def _dense_list(index: SearchIndex, doc_vecs: Any, vector: Any, n: int = 50) -> list[tuple[str, float]]:
    sims = doc_vecs @ vector
    top = np.argsort(-sims, kind="stable")[:n]
    return [(index.keys[i], float(sims[i])) for i in top]


def _with_floor(bm25: list[SearchHit], dense: list[tuple[str, float]], floor: float | None) -> list[str]:
    return [h.key for h in fuse(bm25, dense, DEPTH, replace(DEFAULT_FUSION, min_similarity=floor))]


def _agreement(bm25: list[SearchHit], dense: list[tuple[str, float]], alpha: float) -> list[str]:
    exact = [h.key for h in bm25 if h.exact]
    lexical = [h for h in bm25 if not h.exact][: DEFAULT_FUSION.depth]
    semantic = [(k, s) for k, s in dense[: DEFAULT_FUSION.depth] if k not in exact]
    scores = _weighted(lexical, semantic, DEFAULT_FUSION.bm25_weight, DEFAULT_FUSION.dense_weight)
    for key in {h.key for h in lexical} & {k for k, _ in semantic}:
        scores[key] *= 1.0 + alpha
    ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
    return exact + [k for k, _ in ranked][: DEPTH - len(exact)]


def floors(sets: dict[str, dict[str, Any]], embedder: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, p in sets.items():
        index, doc_vecs, probe_vecs = _catalog(name, embedder, OFF_TOPIC + NOISE_PROBES)
        sims = probe_vecs @ doc_vecs.T
        off_best = sims[: len(OFF_TOPIC)].max(axis=1)
        noise = float(sims[len(OFF_TOPIC) :].max())
        gold_cos = []
        for query, dense in zip(p["queries"], p["dense"], strict=True):
            gold, _ = gold_keys(query, p["key_of"])
            found = [s for k, s in dense if k in gold]
            if found:
                gold_cos.append(max(found))
        variants: dict[str, list[list[str]]] = {
            "no floor": [],
            "lexical gate": [],
            f"noise floor {noise:.3f}": [],
        }
        for floor in FLOORS:
            variants[f"floor {floor}"] = []
        for bm25, dense in zip(p["bm25"], p["dense"], strict=True):
            variants["no floor"].append(_with_floor(bm25, dense, None))
            variants["lexical gate"].append(_with_floor(bm25, dense, None) if bm25 else [])
            variants[f"noise floor {noise:.3f}"].append(
                _with_floor(bm25, dense, None) if bm25 else [k for k, s in dense if s >= noise][:DEPTH]
            )
            for floor in FLOORS:
                variants[f"floor {floor}"].append(_with_floor(bm25, dense, floor))
        off_bm25_empty = sum(1 for q in OFF_TOPIC if not index.search(q, 5))
        rows = {}
        for label, rankings in variants.items():
            result = score(rankings, p["queries"], p["key_of"])
            rows[label] = {
                "R@5": result["R@5"],
                "MRR": result["MRR"],
                "empty_dev_queries": sum(1 for r in rankings if not r),
            }
        out[name] = {
            "gold_cosine_p1_p5_p50": [round(float(np.percentile(gold_cos, q)), 3) for q in (1, 5, 50)],
            "off_topic_best_cosine_min_median_max": [
                round(float(v), 3) for v in (off_best.min(), np.median(off_best), off_best.max())
            ],
            "off_topic_empty_with_bm25": f"{off_bm25_empty}/{len(OFF_TOPIC)}",
            "dev_queries_bm25_empty": sum(1 for b in p["bm25"] if not b),
            "variants": rows,
        }
    return out


def agreement(sets: dict[str, dict[str, Any]], embedder: Any) -> dict[str, Any]:
    base = {
        n: score([[h.key for h in b[:DEPTH]] for b in p["bm25"]], p["queries"], p["key_of"])
        for n, p in sets.items()
    }
    out: dict[str, Any] = {}
    for alpha in (0.0, *ALPHAS):
        res = {
            n: score(
                [_agreement(b, d, alpha) for b, d in zip(p["bm25"], p["dense"], strict=True)],
                p["queries"],
                p["key_of"],
            )
            for n, p in sets.items()
        }
        ok, summary = meets(res, base)
        out[f"a={alpha}"] = {"ok": ok, **summary, "R@5": {n: r["R@5"] for n, r in res.items()}}
    index, doc_vecs, query_vecs = _catalog("livemcpbench", embedder, EXAMPLES)
    examples: dict[str, Any] = {}
    for text, vector in zip(EXAMPLES, query_vecs, strict=True):
        bm25, dense = index.search(text, 50), _dense_list(index, doc_vecs, vector)
        examples[text] = {
            "bm25": [h.key for h in bm25[:5]],
            "dense": [k for k, _ in dense[:5]],
            **{f"hybrid a={a}": _agreement(bm25, dense, a)[:5] for a in (0.0, *ALPHAS)},
        }
    out["livemcpbench_examples"] = examples
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--metatool-every", type=int, default=7)
    args = parser.parse_args()
    embedder = make_embedder("local")
    sets = {name: prepare(name, embedder, args.metatool_every) for name in datasets()}
    report = {"metatool_every": args.metatool_every, "floors": floors(sets, embedder)}
    report["agreement"] = agreement(sets, embedder)
    for name, row in report["floors"].items():
        print(f"\n{name}: gold cosine p1/p5/p50 {row['gold_cosine_p1_p5_p50']}, off-topic best cosine "
              f"min/median/max {row['off_topic_best_cosine_min_median_max']}, off-topic empty with BM25 "
              f"{row['off_topic_empty_with_bm25']}, dev queries BM25 finds nothing for: {row['dev_queries_bm25_empty']}")  # fmt: skip
        for label, v in row["variants"].items():
            print(f"  {label:20} R@5 {v['R@5']:.4f}  MRR {v['MRR']:.4f}  empty {v['empty_dev_queries']}")
    print("\nagreement bonus (fused score x (1 + a) for tools both sides found):")
    for label, v in report["agreement"].items():
        if label.startswith("a="):
            print(f"  {label:6} mean R@5 gain {v['mean_r5_gain']:+.4f}  worst R@5 {v['worst_r5_gain']:+.4f}  "
                  f"worst MRR {v['worst_mrr_gain']:+.4f}  targets {'met' if v['ok'] else 'not met'}")  # fmt: skip
    for text, ranks in report["agreement"]["livemcpbench_examples"].items():
        print(f"\n{text!r} on livemcpbench:")
        for label, keys in ranks.items():
            print(f"  {label:12} {', '.join(k.split('__')[-1] for k in keys)}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"\nsaved {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
