"""The deferral benchmark's conversations, as the README and bench/README.md show them: run the
command, check what it prints and that the README's rows are what it measures (every figure is
computed from the exact request bodies the fake provider received, so it is the same on every run).

casual-mcp's rows need its isolated environment from the package registry: this run leaves them out
(``--no-casual``) and writes its results to a temporary file instead of bench/results/.

The catalog (livemcpbench) is read from the shared data sets beside the project, which a clone of
the project alone does not have: there the benchmark must refuse with a message naming the
variable that points at them, and the README's rows are still checked against the saved results.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.bench_scripts import load_bench_script
from tests.support.discovery_catalogs import SHARED_DATA
from tests.support.mcp_servers import REPO_ROOT

pytestmark = pytest.mark.e2e


def _data_dir() -> Path:
    # The shared data sets sit beside the project (../shared/data) unless TOOLSCOUT_BENCH_DATA says.
    return Path(os.environ.get("TOOLSCOUT_BENCH_DATA") or SHARED_DATA)


def _bench() -> ModuleType:
    return load_bench_script("deferral_bench")


# conversation -> (arguments, first line, calls per stable chat, stable vs append under GPT-5.6 rules)
RUNS = {
    "long": (
        ["--tool-result-chars", "4000", "--conversation", "long"],
        "long conversation: 10 user turns, 6 searches; tool results padded to 4000 characters",
        "26",
        "48.4",
    ),
    "short": (
        [],
        "short conversation: 3 user turns, 3 searches; tool results padded to 0 characters",
        "9",
        "55.9",
    ),
}


@pytest.mark.parametrize("conversation", list(RUNS))
def test_the_benchmark_prints_the_readme_figures(tmp_path: Path, conversation: str) -> None:
    arguments, first, calls, ratio = RUNS[conversation]
    data = _data_dir()
    out = tmp_path / "long.json"
    command = [sys.executable, "bench/deferral_bench.py", "--no-casual", *arguments, "--out", str(out)]
    env = {**os.environ, "TOOLSCOUT_BENCH_DATA": str(data)}
    done = subprocess.run(
        command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    if not (data / "livemcpbench.tools.jsonl").is_file():
        assert done.returncode == 2, done.stderr[-2000:]
        assert done.stderr == (
            f"deferral_bench: the livemcpbench catalog is not at {data / 'livemcpbench.tools.jsonl'}: "
            "set TOOLSCOUT_BENCH_DATA to the folder of the shared data sets (../shared/data)\n"
        )
        assert not out.exists()
        return
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0] == f"livemcpbench: 527 tools, 70 servers; {first}"
    stable = [line.split() for line in lines if line.startswith("stable (toolscout)")]
    # mode (2 words), api, calls, tokens, stab.min, kept, tools=, ...: tools identical, nothing dropped.
    assert [(row[2], row[3], row[6], row[7]) for row in stable] == [
        ("chat_completions", calls, "1.000", "yes"),
        ("messages", calls, "1.000", "yes"),
    ]
    assert f"  stable_chat_vs_append_chat_gpt_5_6: {ratio} %" in lines
    assert lines[-1] == f"saved {out}"

    results = json.loads(out.read_text())
    assert results["command"] == " ".join(
        ["uv run --frozen python bench/deferral_bench.py --no-casual", *arguments]
    )
    modes = results["modes"]
    assert modes["stable_anthropic"]["strict_model_accepts"] is True
    assert modes["append_anthropic"]["strict_model_accepts"] is False
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    rows = _bench().markdown_rows(results)
    assert len(rows) == 8
    assert [row for row in rows if row not in readme] == []


@pytest.mark.parametrize("saved", ["deferral.json", "deferral_long_tool_result_chars_4000.json"])
def test_the_readme_rows_are_the_saved_results(saved: str) -> None:
    results = json.loads((REPO_ROOT / "bench" / "results" / saved).read_text(encoding="utf-8"))
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    rows = _bench().markdown_rows(results)
    assert len(rows) == 10  # the saved runs include casual-mcp 1.0's two rows
    assert [row for row in rows if row not in readme] == []
