"""Every test session keeps its stack records to itself.

``toolscout up`` records each running stack in a per-user runtime folder, where the CLI finds it by
its config (``toolscout_cli.stack_state``). A developer's own ``make up`` (README) records itself in
the default folder; the stacks the tests start must neither see that record nor leave theirs
beside it. So the session gets a fresh private folder as ``TOOLSCOUT_RUNTIME_DIR`` before any test
or fixture starts a stack (subprocesses inherit it); a test that reads every record in the folder
gives itself a folder of its own on top (``own_runtime_dir``). Tests pick their ports themselves
(port 0 or a free port), never the defaults a README stack listens on.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from toolscout_cli.stack_state import RUNTIME_DIR_ENV

_session_dir: Path | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _session_dir  # noqa: PLW0603 - one folder per test session, set before any fixture
    _session_dir = Path(tempfile.mkdtemp(prefix="toolscout-test-runtime-"))
    os.environ[RUNTIME_DIR_ENV] = str(_session_dir)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _session_dir is not None:
        shutil.rmtree(_session_dir, ignore_errors=True)


@pytest.fixture
def own_runtime_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A runtime folder for this test alone (for tests that read every record in it)."""
    folder = tmp_path / "runtime"
    folder.mkdir(mode=0o700)
    monkeypatch.setenv(RUNTIME_DIR_ENV, str(folder))
    return folder
