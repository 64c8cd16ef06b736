"""The FakePool example of clients/README.md runs without a word on stderr (issue 30): a client's
channel health-checks its server, so the fake serves grpc.health.v1 as a real pool does, and its
stop lets the clients' health watches end instead of cancelling them (a GOAWAY log line)."""

from __future__ import annotations

import subprocess
import sys

from tests.support.doc_blocks import blocks
from tests.support.mcp_servers import REPO_ROOT


def test_the_fake_pool_example_prints_nothing_on_stderr() -> None:
    (example,) = [
        b for b in blocks(REPO_ROOT, "clients/README.md") if b.marker == "runnable" and "FakePool(" in b.body
    ]
    done = subprocess.run(
        [sys.executable, "-c", example.body],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert "may or may not have run" in done.stdout
