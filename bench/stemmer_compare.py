"""The tokenizer's stemmer: hand-written suffix rules vs Snowball (PyStemmer), BM25 on every set.

    uv run --frozen python bench/stemmer_compare.py

Each variant replaces ``discovery_svc.text.stem`` for the run (ASCII words of 4+ letters, as the
tokenizer has always stemmed; other scripts pass unchanged): the hand-written suffix rules the
tokenizer used before (bench/_stemmers/handwritten.py), today's ``text.stem`` (Snowball English with
a few protected words), plain Snowball English, Snowball Porter (the original Porter algorithm),
and no stemming. Reported per set:
R@5 and MRR of BM25 search, and tokenizer throughput over every tool text of every set with the
caches emptied (cold: every word stemmed once) and warm (the service's steady state).
Saved to bench/results/stemmer_compare.json.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import Stemmer  # type: ignore[import-untyped]  # noqa: E402
from _stemmers.handwritten import stem as handwritten_stem  # noqa: E402
from retrieval import DATA_DIR, datasets, evaluate, load_tools  # noqa: E402

from discovery_svc import text  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "stemmer_compare.json"


def _snowball(algorithm: str) -> Callable[[str], str]:
    stemmer = Stemmer.Stemmer(algorithm)

    def stem(word: str) -> str:
        if len(word) <= 3 or not word.isascii() or not word.isalpha():
            return word
        return str(stemmer.stemWord(word))

    return stem


def variants() -> dict[str, Callable[[str], str]]:
    return {
        "hand-written rules": handwritten_stem.__wrapped__,
        "text.stem (snowball)": text.stem.__wrapped__,
        "snowball english": _snowball("english"),
        "snowball porter": _snowball("porter"),
        "none": lambda word: word,
    }


def install(stem: Callable[[str], str]) -> None:
    text.stem = lru_cache(maxsize=65536)(stem)  # type: ignore[assignment]
    text._word_tokens.cache_clear()


def tokenize_speed(texts: list[str]) -> dict[str, float]:
    text._word_tokens.cache_clear()
    text.stem.cache_clear()  # type: ignore[attr-defined]
    started = time.perf_counter()
    n = sum(len(text.tokenize(t)) for t in texts)
    cold = time.perf_counter() - started
    started = time.perf_counter()
    for t in texts:
        text.tokenize(t)
    warm = time.perf_counter() - started
    return {"tokens": n, "cold_tokens_per_s": round(n / cold), "warm_tokens_per_s": round(n / warm)}


def main() -> None:
    tool_texts: list[str] = []
    for path in sorted(DATA_DIR.glob("*.tools.jsonl")):
        for tool in load_tools(path):
            tool_texts += [tool["name"], tool["description"] or "", json.dumps(tool["input_schema"] or {})]
    report: dict[str, Any] = {}
    for label, stem in variants().items():
        install(stem)
        row: dict[str, Any] = {"speed": tokenize_speed(tool_texts), "sets": {}}
        for name in datasets():
            result = evaluate(DATA_DIR / f"{name}.tools.jsonl", DATA_DIR / f"{name}.queries.jsonl", None)
            row["sets"][name] = {"R@5": result["R@5"], "MRR": result["MRR"]}
        sets = row["sets"]
        row["mean_R@5"] = round(sum(v["R@5"] for v in sets.values()) / len(sets), 4)
        row["mean_MRR"] = round(sum(v["MRR"] for v in sets.values()) / len(sets), 4)
        report[label] = row
        cells = "  ".join(f"{n[:9]} {v['R@5']:.3f}/{v['MRR']:.3f}" for n, v in sets.items())
        speed = row["speed"]
        print(
            f"{label:20} {cells}  mean {row['mean_R@5']:.4f}/{row['mean_MRR']:.4f}"
            f"  tokenize cold {speed['cold_tokens_per_s']:,}/s warm {speed['warm_tokens_per_s']:,}/s",
            flush=True,
        )
    RESULTS.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"saved {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
