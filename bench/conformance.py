"""The official MCP conformance suite against its reference server, directly and through the gateway.

Runs ``@modelcontextprotocol/conformance`` 0.1.16 (revision 2025-11-25) and 0.2.0-alpha.12
(2026-07-28) against the reference "everything" server (``../shared/conformance``) directly, then
through a real ``toolscout up`` fronting it as its only server, in ``all`` mode and in ``meta`` mode
(see tests/support/conformance.py for how each piece is installed and run). Prints one row per
scenario (pass/fail directly and through each mode; "hollow": the suite accepted a tool
result unlike the one the server sends directly, e.g. the gateway's own error text) and the totals: of the scenarios passing
directly, how many pass through the gateway.

Run: uv run --frozen python bench/conformance.py [--label NAME]
Writes bench/results/conformance.json (the run under ``runs[label]``, earlier labels kept).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.conformance import MODES, SUITE_VERSIONS, conformance_run  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "conformance.json"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--label", default="current", help="the name this run is saved under")
    args = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="toolscout-conformance-") as work:
        run = conformance_run(Path(work))
    table = run.as_json()
    for revision, data in table.items():
        print(f"\n{revision} (suite {SUITE_VERSIONS[revision]})")
        print(f"  {'scenario':40} {'direct':7} " + " ".join(f"{m:7}" for m in MODES))
        for scenario, row in data["scenarios"].items():
            print(f"  {scenario:40} {row['direct']:7} " + " ".join(f"{row[m]:7}" for m in MODES))
        totals = data["totals"]
        print(f"  direct: {totals['direct'][0]}/{totals['direct'][1]} scenarios pass")
        for mode in MODES:
            kept, passing = totals[mode]
            print(f"  {mode}: {kept} of the {passing} passing directly pass through the gateway")
        kept, passing = totals["meta_beyond_tool_list"]
        print(f"  meta, scenarios not about the tool list (not tools-*): {kept} of {passing}")
    saved = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    runs = saved.get("runs", {})
    runs[args.label] = {"recorded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "revisions": table}
    RESULTS.write_text(
        json.dumps(
            {"command": "uv run --frozen python bench/conformance.py --label LABEL", "runs": runs}, indent=2
        )
        + "\n"
    )
    print(f"\nsaved under {args.label!r} in {RESULTS.relative_to(ROOT)} ({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
