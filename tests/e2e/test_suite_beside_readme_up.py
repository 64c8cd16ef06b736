"""The stack-starting tests pass while a README-style `toolscout up` runs beside them (issue 30,
item 6): that stack records itself in the default per-user runtime folder, and no test may read it
(or leave its own records there).

The README stack here listens on free ports (the defaults may be taken by a stack of someone else
on a shared machine); what matters is where it records itself: the default folder of a
`XDG_RUNTIME_DIR`, as a reader's `make up` does without `TOOLSCOUT_RUNTIME_DIR`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli_stack import UpProcess, run_cli, stack_config
from tests.support.mcp_servers import REPO_ROOT, free_port

pytestmark = pytest.mark.e2e

# The tests that start stacks and read the runtime folder (the one that failed beside `make up`).
_BESIDE = [
    "tests/e2e/test_cli_sharded_up.py::test_the_cli_finds_the_shards_of_a_running_up_stack_from_the_config_alone",
]


def test_the_stack_starting_tests_pass_beside_a_readme_up_in_the_default_runtime_folder(
    tmp_path: Path,
) -> None:
    runtime = tmp_path / "xdg"
    runtime.mkdir(mode=0o700)
    # A reader's terminal: no TOOLSCOUT_RUNTIME_DIR, so the default folder under XDG_RUNTIME_DIR.
    reader = {k: v for k, v in os.environ.items() if k != "TOOLSCOUT_RUNTIME_DIR"}
    reader["XDG_RUNTIME_DIR"] = str(runtime)
    config = stack_config(tmp_path / "config.json", ports=(free_port(), free_port(), free_port()))
    up = UpProcess(config, env={**reader, "TOOLSCOUT_RUNTIME_DIR": ""})
    try:
        up.wait_ready(timeout=120)
        recorded = set((runtime / "toolscout").glob("*.json"))
        suite = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *_BESIDE],
            cwd=REPO_ROOT,
            env=reader,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        still = run_cli("-c", str(config), "servers", env={**reader, "TOOLSCOUT_RUNTIME_DIR": ""})
        after = set((runtime / "toolscout").glob("*.json"))
    finally:
        code = up.stop()
    assert code == 0, up.stderr
    assert len(recorded) == 1
    assert suite.returncode == 0, suite.stdout[-3000:]
    assert "1 passed" in suite.stdout
    # The README stack is untouched: still found from its config, and the only record there.
    assert still.returncode == 0, still.stderr
    assert after == recorded
