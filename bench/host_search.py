"""How well MCP hosts' own tool search finds the right tool: in the raw upstream list vs in the list
the gateway serves (``all`` mode), beside toolscout's own ``search_tools``.

    uv run --frozen python bench/host_search.py [--sets bfcl ...] [--max-queries M] [--seed S] [--json]

Hosts now defer MCP tools themselves and search them by what ``tools/list`` gave them: Codex's
``tool_search`` and Anthropic's ``tool_search_tool_bm25`` rank with BM25 over each tool's name and
description; Anthropic's ``tool_search_tool_regex`` lets the model write a regular expression over
the same text. Two emulations, neither using toolscout's own tokenizer:

* **BM25**: textbook Okapi BM25 (k1 = 1.2, b = 0.75, IDF ``ln(1 + (N - n + 0.5) / (n + 0.5))``,
  the never-negative form Lucene uses) over ``name + " " + description``. Plain tokenizer: lower
  case, runs of letters and digits (anything else, ``_`` and ``-`` included, separates words), no
  stemming, no stopwords.
* **regex**: the query becomes one case-insensitive pattern, its words OR-ed
  (``word1|word2|...``; words are the plain tokenizer's, minus words under 3 characters and a short
  list of English function words, which a model writing a pattern leaves out). A tool matches when
  the pattern occurs anywhere in ``name + " " + description`` (substring: ``weather`` matches
  ``get_weather``); matches rank by the number of distinct query words found, ties in list order.

Each is run over two lists of the same tools:

* **raw**: each tool as its MCP server lists it (its own name and description).
* **served**: what the gateway's ``all`` mode serves (the LLM-facing name, and the description from
  :func:`mcp_gateway_svc.listing.all_mode_descriptions`, built from that catalog as served).

and beside **toolscout**: discovery's own BM25 ``search_tools`` (``discovery_svc.index``) over the
same catalog. R@1 / R@5 as bench/retrieval.py scores them (required tool groups found in the top k),
at full size and at 100 tools (each query in a catalog of its gold tools + random others, the same
seeded draw as bench/retrieval.py), on a seeded sample of ``--max-queries`` queries per set
(default 1000; sets with fewer use all). ``livemcpbench`` has no queries: its tool count and the
bytes of its raw and served descriptions (sum, largest, how many over 2,048) are reported instead,
for every set too. Saved to bench/results/host_search.json.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from retrieval import (  # noqa: E402
    DATA_DIR,
    DEPTH,
    Case,
    load_tools,
    make_cases,
    read_jsonl,
    run_ours,
    sample_queries,
    score,
)
from toolscout.client import Tool  # noqa: E402

from mcp_gateway_svc.listing import DESCRIPTION_CAP_BYTES, all_mode_descriptions  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "host_search.json"
SETS = ("bfcl", "toolbench", "sealtools", "metatool", "restbench", "livemcpbench")
SIZES: tuple[int | None, ...] = (None, 100)
MAX_QUERIES = 1000
K1, B = 1.2, 0.75
_WORD = re.compile(r"[^\W_]+")
# Words a model writing a search pattern leaves out (the regex emulation only).
_FUNCTION_WORDS = frozenset(
    [
        "the",
        "and",
        "for",
        "with",
        "from",
        "that",
        "this",
        "what",
        "which",
        "who",
        "whom",
        "how",
        "are",
        "was",
        "were",
        "can",
        "could",
        "would",
        "should",
        "you",
        "your",
        "our",
        "their",
        "its",
        "his",
        "her",
        "them",
        "they",
        "she",
        "him",
        "has",
        "have",
        "had",
        "into",
        "onto",
        "about",
        "please",
        "give",
        "tell",
        "need",
        "want",
        "get",
        "all",
        "any",
        "some",
        "been",
        "being",
        "will",
        "shall",
        "may",
        "might",
        "also",
        "just",
        "than",
        "then",
        "there",
    ]
)


def plain_tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


class OkapiBM25:
    """Textbook Okapi BM25 over pre-tokenized documents."""

    def __init__(self, docs: Sequence[Sequence[str]]) -> None:
        self._tfs = [Counter(d) for d in docs]
        self._lengths = [len(d) for d in docs]
        n = len(docs)
        self._avg = sum(self._lengths) / max(n, 1)
        df: Counter[str] = Counter()
        self._postings: dict[str, list[int]] = {}
        for i, tf in enumerate(self._tfs):
            for term in tf:
                df[term] += 1
                self._postings.setdefault(term, []).append(i)
        self._idf = {t: math.log(1 + (n - c + 0.5) / (c + 0.5)) for t, c in df.items()}

    def rank(self, query: str, depth: int) -> list[int]:
        scores: dict[int, float] = {}
        for term in set(plain_tokens(query)):
            idf = self._idf.get(term)
            if idf is None:
                continue
            for i in self._postings[term]:
                tf = self._tfs[i][term]
                norm = tf * (K1 + 1) / (tf + K1 * (1 - B + B * self._lengths[i] / self._avg))
                scores[i] = scores.get(i, 0.0) + idf * norm
        return sorted(scores, key=lambda i: (-scores[i], i))[:depth]


def regex_words(query: str) -> list[str]:
    """The words a query's pattern OR-s together."""
    return [w for w in dict.fromkeys(plain_tokens(query)) if len(w) >= 3 and w not in _FUNCTION_WORDS]


def regex_pattern(query: str) -> re.Pattern[str] | None:
    """The case-insensitive pattern a query becomes (None: no usable word)."""
    words = regex_words(query)
    return re.compile("|".join(re.escape(w) for w in words), re.IGNORECASE) if words else None


def regex_rank(lowered: Sequence[str], query: str, depth: int) -> list[int]:
    """Tools whose (lower-cased) text :func:`regex_pattern` matches, by how many of the query's
    words occur in it. A substring test per word is the same match as the OR-ed pattern and
    counts the distinct alternatives found, much faster on long descriptions."""
    words = regex_words(query)
    counts = []
    for i, text in enumerate(lowered):
        found = sum(1 for w in words if w in text)
        if found:
            counts.append((-found, i))
    return [i for _, i in sorted(counts)[:depth]]


# --- the two lists ----------------------------------------------------------------------------


def as_tool(t: dict[str, Any]) -> Tool:
    return Tool(
        server=t["server"],
        name=t["name"],
        llm_name=t["key"],
        title=t.get("title") or "",
        description=t["description"] or "",
        input_schema_json=json.dumps(t["input_schema"] or {}),
    )


def raw_texts(tools: Sequence[dict[str, Any]]) -> list[str]:
    return [f"{t['name']} {t['description'] or ''}" for t in tools]


def served_texts(tools: Sequence[Tool]) -> list[str]:
    return [f"{t.llm_name} {d}" for t, d in zip(tools, all_mode_descriptions(tools), strict=True)]


Engine = Callable[[Sequence[str], Sequence[str], Sequence[Case]], list[list[int]]]


def _rankings(
    texts_of: Callable[[Sequence[int]], Sequence[str]],
    n_tools: int,
    cases: Sequence[Case],
    keys: Sequence[str],
    kind: str,
) -> list[list[str]]:
    """Rankings (tool keys) of emulation ``kind`` for each case, over the texts of its catalog."""
    shared: tuple[Sequence[int], Sequence[str], OkapiBM25 | None] | None = None
    out: list[list[str]] = []

    def prepare(ids: Sequence[int]) -> tuple[Sequence[int], Sequence[str], OkapiBM25 | None]:
        texts = texts_of(ids)
        if kind == "bm25":
            return ids, texts, OkapiBM25([plain_tokens(t) for t in texts])
        return ids, [t.lower() for t in texts], None

    for case in cases:
        if case.catalog is None:
            shared = shared or prepare(list(range(n_tools)))
            ids, texts, index = shared
        else:
            ids, texts, index = prepare(list(case.catalog))
        query = case.query["query"]
        ranked = index.rank(query, DEPTH) if index is not None else regex_rank(texts, query, DEPTH)
        out.append([keys[ids[i]] for i in ranked])
    return out


def byte_stats(descriptions: Sequence[str]) -> dict[str, int]:
    sizes = [len(d.encode()) for d in descriptions]
    return {
        "bytes_total": sum(sizes),
        "bytes_max": max(sizes, default=0),
        "over_cap": sum(1 for s in sizes if s > DESCRIPTION_CAP_BYTES),
    }


def evaluate_set(
    name: str, *, max_queries: int, seed: int, sizes: Sequence[int | None] = SIZES
) -> dict[str, Any]:
    tools = load_tools(DATA_DIR / f"{name}.tools.jsonl")
    mcp_tools = [as_tool(t) for t in tools]
    served_all = all_mode_descriptions(mcp_tools)
    report: dict[str, Any] = {
        "tools": len(tools),
        "raw": byte_stats([t["description"] or "" for t in tools]),
        "served": byte_stats(served_all),
    }
    queries_path = DATA_DIR / f"{name}.queries.jsonl"
    if not queries_path.exists():
        return report
    queries = read_jsonl(queries_path)
    key_of = {(t["server"], t["name"]): t["key"] for t in tools}
    keys = [t["key"] for t in tools]
    raw = raw_texts(tools)
    served_full = [f"{t.llm_name} {d}" for t, d in zip(mcp_tools, served_all, strict=True)]
    positions = sample_queries(queries, max_queries, seed)
    for size in sizes:
        cases = make_cases(tools, queries, positions, size=size, seed=seed, negative=False)
        cases = [c for c in cases if c.query["gold"]]
        scored = [c.query for c in cases]

        def raw_of(ids: Sequence[int]) -> Sequence[str]:
            return [raw[i] for i in ids]

        def served_of(ids: Sequence[int], *, full: int = len(tools)) -> Sequence[str]:
            # The gateway serves a catalog's list built from that catalog (server purposes and
            # toolset terms come from the tools it holds).
            if len(ids) == full:
                return served_full
            return served_texts([mcp_tools[i] for i in ids])

        row: dict[str, Any] = {"n": len(cases)}
        for kind in ("bm25", "regex"):
            for label, texts_of in (("raw", raw_of), ("served", served_of)):
                started = time.perf_counter()
                rankings = _rankings(texts_of, len(tools), cases, keys, kind)
                result = score(rankings, scored, key_of)
                row[f"{kind}_{label}"] = {"R@1": result["R@1"], "R@5": result["R@5"]}
                print(
                    f"  {name:12} {size or 'full'!s:>5} {kind:5} {label:6} R@5 {result['R@5']:.3f} "
                    f"({time.perf_counter() - started:.1f}s)",
                    file=sys.stderr,
                )
        ours = score(run_ours(tools, cases), scored, key_of)
        row["toolscout"] = {"R@1": ours["R@1"], "R@5": ours["R@5"]}
        report["full" if size is None else str(size)] = row
    return report


def _size_keys(results: dict[str, Any]) -> list[str]:
    keys = {k for r in results.values() for k in r if k == "full" or k.isdigit()}
    return sorted(keys, key=lambda k: (k == "full", int(k) if k.isdigit() else 0))


def summary(results: dict[str, Any]) -> dict[str, Any]:
    """Mean R@5 gain of the served list over the raw one, per emulation and size, across the sets."""
    out: dict[str, Any] = {}
    for size in _size_keys(results):
        for kind in ("bm25", "regex"):
            gains = {
                name: round(r[size][f"{kind}_served"]["R@5"] - r[size][f"{kind}_raw"]["R@5"], 4)
                for name, r in results.items()
                if size in r
            }
            if gains:
                out[f"{kind}_{size}"] = {
                    "mean_gain_R@5": round(sum(gains.values()) / len(gains), 4),
                    "worst_gain_R@5": min(gains.values()),
                    "gains": gains,
                }
    return out


def print_table(results: dict[str, Any]) -> None:
    cols = ("bm25_raw", "bm25_served", "regex_raw", "regex_served", "toolscout")
    head = f"{'set':12} {'size':>5} " + " ".join(f"{c:>19}" for c in cols)
    print(head + "\n" + "-" * len(head))
    for name, r in results.items():
        for size in _size_keys(results):
            if size not in r:
                continue
            cells = " ".join(f"{r[size][c]['R@1']:8.3f} / {r[size][c]['R@5']:.3f}" for c in cols)
            print(f"{name:12} {size:>5} {cells}")
    print("(cells: R@1 / R@5)\n")
    print(
        f"{'set':12} {'tools':>6} {'raw bytes':>10} {'max':>6} {'>2KB':>5} {'served bytes':>13} {'max':>6} {'>2KB':>5}"
    )
    for name, r in results.items():
        raw, served = r["raw"], r["served"]
        print(
            f"{name:12} {r['tools']:6d} {raw['bytes_total']:10d} {raw['bytes_max']:6d} {raw['over_cap']:5d} "
            f"{served['bytes_total']:13d} {served['bytes_max']:6d} {served['over_cap']:5d}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sets", nargs="+", choices=SETS, default=list(SETS))
    parser.add_argument("--max-queries", type=int, default=MAX_QUERIES)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--sizes", nargs="+", default=["full", "100"], help="catalog sizes: numbers of tools, or full"
    )
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    parser.add_argument("--no-save", action="store_true", help="do not write the results file")
    parser.add_argument(
        "--out", type=Path, default=RESULTS, help="results file (default bench/results/host_search.json)"
    )
    args = parser.parse_args()
    sizes = [None if s == "full" else int(s) for s in args.sizes]
    results = {
        name: evaluate_set(name, max_queries=args.max_queries, seed=args.seed, sizes=sizes)
        for name in args.sets
    }
    report = {
        "emulations": {"bm25": {"k1": K1, "b": B}, "regex": "query words OR-ed, ranked by words found"},
        "max_queries": args.max_queries,
        "seed": args.seed,
        "sizes": args.sizes,
        "results": results,
        "summary": summary(results),
    }
    if not args.no_save:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(report))
        return
    print_table(results)
    for key, value in report["summary"].items():
        print(f"{key:12} mean R@5 gain {value['mean_gain_R@5']:+.4f}  worst {value['worst_gain_R@5']:+.4f}")


if __name__ == "__main__":
    main()
