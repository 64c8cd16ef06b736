"""The official MCP conformance suite's client authorization scenarios, through ``toolscout connect``.

``conformance client --suite auth --spec-version 2025-11-25`` (npm, pinned) starts, per scenario,
an MCP server and an authorization server of its own, runs ``tests/support/conformance_connect.py``
(``toolscout connect URL --headless --call test-tool``, with the pre-registered client the suite
passes in ``MCP_CONFORMANCE_CONTEXT``) and checks every request the client made. The suite runs
its scenarios in parallel: on a loaded machine each client needs more than the default 30 s.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.conformance import suite_bin
from tests.support.mcp_servers import REPO_ROOT
from tests.support.node import node_env

pytestmark = [pytest.mark.e2e]

SCENARIOS = {
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
}
_SUMMARY = re.compile(r"^([✓✗]) (auth/\S+): (\d+) passed, (\d+) failed")


@pytest.mark.timeout(900)
def test_every_client_auth_scenario_passes_through_toolscout_connect(tmp_path: Path) -> None:
    wrapper = f"{sys.executable} {REPO_ROOT / 'tests' / 'support' / 'conformance_connect.py'}"
    suite = ["--suite", "auth", "--spec-version", "2025-11-25", "--timeout", "300000", "-o", str(tmp_path)]
    done = subprocess.run(
        [str(suite_bin("2025-11-25")), "client", "--command", wrapper, *suite],
        env=node_env(),
        capture_output=True,
        text=True,
        timeout=850,
        check=False,
    )
    results = {
        m.group(2): m.group(1) == "✓"
        for line in (done.stdout + done.stderr).splitlines()
        if (m := _SUMMARY.match(line.strip()))
    }
    assert set(results) == SCENARIOS, done.stderr[-3000:]
    assert [name for name, passed in sorted(results.items()) if not passed] == []
    assert done.returncode == 0
