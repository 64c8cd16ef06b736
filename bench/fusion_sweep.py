"""Fusion of BM25 and dense rankings: every candidate configuration on every data set, one table.

    uv run --frozen python bench/fusion_sweep.py [--embedder local|minilm] [--sets restbench ...]

BM25 (discovery_svc.index) and dense top-50 lists are computed once per set (vectors from the
on-disk cache of bench/retrieval.py, embedded on first use); each configuration of
discovery_svc.fusion is then applied to the same lists, so the sweep costs seconds. A configuration
"meets the targets" when, on every set, R@5 >= BM25 R@5 - 0.005 and MRR >= BM25 MRR; on metatool
R@5 >= BM25 + 0.05; and the mean R@5 over the sets >= BM25's mean + 0.03. Results are printed
and saved to bench/results/fusion_sweep.json. One configuration is then chosen for every set;
none is tuned to a single query. Two more variants were measured and dropped (they are in the
git history of this file and in bench/results/fusion_sweep.txt): weighted fusion scoring every
candidate on both sides (+0.000 to +0.001 mean R@5) BM25 scores normalised by the query's
best reachable score (worse on every set but metatool), and a coverage gate raising the dense
weight when BM25's best hit holds under 30-60 % of the query's weighted terms (best +0.027 mean,
MRR -0.006 on sealtools).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from retrieval import (  # noqa: E402
    DATA_DIR,
    DEPTH,
    datasets,
    dense_vectors,
    load_tools,
    make_embedder,
    read_jsonl,
    score,
    tool_docs,
)

from discovery_svc.fusion import FusionConfig, fuse  # noqa: E402
from discovery_svc.index import SearchHit, SearchIndex  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "fusion_sweep.json"
POOL = 50


def candidate_configs() -> dict[str, FusionConfig]:
    configs: dict[str, FusionConfig] = {}
    for k in (10, 30, 60):
        for wd in (0.5, 0.75, 1.0):
            configs[f"rrf k={k} wd={wd}"] = FusionConfig(method="rrf", k=k, dense_weight=wd)
    for wd in (0.5, 0.75, 1.0):
        for margin in (0.1, 0.2, 0.3):
            for cwd in (0.2, 0.4):
                configs[f"rrf k=10 wd={wd} gate={margin} cwd={cwd}"] = FusionConfig(
                    method="rrf", k=10, dense_weight=wd, gate_margin=margin, confident_dense_weight=cwd
                )
    for wd in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8):
        configs[f"weighted wd={wd}"] = FusionConfig(method="weighted", dense_weight=wd)
        for margin, cwd in itertools.product((0.1, 0.2, 0.3), (0.2, 0.3)):
            if cwd < wd:
                configs[f"weighted wd={wd} gate={margin} cwd={cwd}"] = FusionConfig(
                    method="weighted", dense_weight=wd, gate_margin=margin, confident_dense_weight=cwd
                )
    # Fewer candidates per side: less BM25 work per query at 50,000 tools.
    for label, config in list(configs.items()):
        if "gate" not in label:
            configs[f"{label} depth=20"] = replace(config, depth=20)
    return configs


def prepare(name: str, embedder: Any, metatool_every: int = 1) -> dict[str, Any]:
    tools = load_tools(DATA_DIR / f"{name}.tools.jsonl")
    queries = read_jsonl(DATA_DIR / f"{name}.queries.jsonl")
    if name == "metatool":
        queries = queries[::metatool_every]
    key_of = {(t["server"], t["name"]): t["key"] for t in tools}
    docs = tool_docs(tools)
    index = SearchIndex(docs)
    by_key = {d.key: d for d in docs}
    ordered = [by_key[k] for k in index.keys]
    doc_vecs, query_vecs = dense_vectors(ordered, [q["query"] for q in queries], embedder)
    sims = query_vecs @ doc_vecs.T
    n = min(POOL, sims.shape[1])
    top = np.argpartition(-sims, n - 1, axis=1)[:, :n]
    dense: list[list[tuple[str, float]]] = []
    for row, cand in zip(sims, top, strict=True):
        order = sorted(cand.tolist(), key=lambda i: (-float(row[i]), i))
        dense.append([(index.keys[i], float(row[i])) for i in order])
    bm25: list[list[SearchHit]] = [index.search(q["query"], POOL) for q in queries]
    return {"queries": queries, "key_of": key_of, "bm25": bm25, "dense": dense}


def evaluate(prepared: dict[str, Any], config: FusionConfig | None, mode: str) -> dict[str, float]:
    if mode == "bm25":
        rankings = [[h.key for h in hits[:DEPTH]] for hits in prepared["bm25"]]
    elif mode == "dense":
        rankings = [[k for k, _ in d[:DEPTH]] for d in prepared["dense"]]
    else:
        assert config is not None
        rankings = [
            [h.key for h in fuse(b, d, DEPTH, config)]
            for b, d in zip(prepared["bm25"], prepared["dense"], strict=True)
        ]
    return score(rankings, prepared["queries"], prepared["key_of"])


def meets(
    results: dict[str, dict[str, float]], base: dict[str, dict[str, float]]
) -> tuple[bool, dict[str, float]]:
    sets = list(results)
    mean_gain = sum(results[s]["R@5"] - base[s]["R@5"] for s in sets) / len(sets)
    ok = mean_gain >= 0.03
    for s in sets:
        ok &= results[s]["R@5"] >= base[s]["R@5"] - 0.005 and results[s]["MRR"] >= base[s]["MRR"]
    if "metatool" in results:
        ok &= results["metatool"]["R@5"] >= base["metatool"]["R@5"] + 0.05
    worst = min(results[s]["R@5"] - base[s]["R@5"] for s in sets)
    worst_mrr = min(results[s]["MRR"] - base[s]["MRR"] for s in sets)
    return ok, {
        "mean_r5_gain": round(mean_gain, 4),
        "worst_r5_gain": round(worst, 4),
        "worst_mrr_gain": round(worst_mrr, 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--embedder", default="local")
    parser.add_argument("--sets", nargs="+", default=None)
    parser.add_argument("--metatool-every", type=int, default=1, help="metatool: every N-th query only")
    args = parser.parse_args()
    embedder = make_embedder(args.embedder)
    sets = args.sets or datasets()
    prepared = {}
    for name in sets:
        started = time.perf_counter()
        prepared[name] = prepare(name, embedder, args.metatool_every)
        print(f"  prepared {name} in {time.perf_counter() - started:.1f}s", file=sys.stderr)
    base = {s: evaluate(prepared[s], None, "bm25") for s in sets}
    dense_only = {s: evaluate(prepared[s], None, "dense") for s in sets}
    rows: dict[str, Any] = {}
    header = f"{'config':38} " + " ".join(f"{s[:9]:>15}" for s in sets) + "   mean+  worst  worstMRR ok"
    print(header)

    def show(
        label: str, res: dict[str, dict[str, float]], verdict: tuple[bool, dict[str, float]] | None
    ) -> None:
        cells = " ".join(f"{res[s]['R@5']:.3f}/{res[s]['MRR']:.3f}".rjust(15) for s in sets)
        tail = ""
        if verdict is not None:
            ok, summary = verdict
            tail = f" {summary['mean_r5_gain']:+.3f} {summary['worst_r5_gain']:+.3f} {summary['worst_mrr_gain']:+.3f} {'YES' if ok else ''}"
        print(f"{label:38} {cells}{tail}", flush=True)

    show("bm25", base, None)
    show("dense only", dense_only, meets(dense_only, base))
    for label, config in candidate_configs().items():
        res = {s: evaluate(prepared[s], config, "hybrid") for s in sets}
        verdict = meets(res, base)
        rows[label] = {"config": asdict(config), "results": res, "ok": verdict[0], **verdict[1]}
        show(label, res, verdict)
    report = {
        "embedder": embedder.model_id,
        "metatool_every": args.metatool_every,
        "sets": sets,
        "bm25": base,
        "dense_only": dense_only,
        "configs": rows,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    out = RESULTS if args.embedder == "local" else RESULTS.with_name(f"fusion_sweep.{args.embedder}.json")
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"saved {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
