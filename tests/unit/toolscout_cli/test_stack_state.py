"""The record of a running `toolscout up`: found by the CLI with the same config, ignored and
removed once stale, never taken from a folder another user could write to."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from toolscout_cli.__main__ import build_parser
from toolscout_cli.connection import resolve_targets
from toolscout_cli.stack_state import (
    RUNTIME_DIR_ENV,
    find_record,
    remove_record,
    shard_overrides,
    state_dir,
    write_record,
)


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "run"
    monkeypatch.setenv(RUNTIME_DIR_ENV, str(folder))
    monkeypatch.delenv("TOOLSCOUT_CONFIG", raising=False)
    for service in ("POOL", "DISCOVERY", "ORCHESTRATOR"):
        monkeypatch.delenv(f"TOOLSCOUT_{service}_TARGET", raising=False)
    monkeypatch.delenv("TOOLSCOUT_TARGET", raising=False)
    return folder


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"servers": {"a": {"command": "x", "shard": 2}}}))
    return path.resolve()


def _record(path: Path) -> dict[str, object]:
    return dict(json.loads(path.read_text()))


def test_the_runtime_folder_can_be_chosen_else_it_is_per_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(RUNTIME_DIR_ENV, "/somewhere")
    assert state_dir() == Path("/somewhere")
    monkeypatch.delenv(RUNTIME_DIR_ENV)
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/7")
    assert state_dir() == Path("/run/user/7/toolscout")
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    assert state_dir().name == f"toolscout-{os.getuid()}"


def test_the_cli_reaches_a_recorded_stack_and_reads_the_config_as_it_runs_it(
    runtime: Path, config: Path
) -> None:
    shards = ["127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"]
    written = write_record(
        config, ",".join(shards), "127.0.0.1:7100", "127.0.0.1:7200", shard_overrides(3, shards)
    )
    assert written is not None
    assert written.parent == runtime
    assert runtime.stat().st_mode & 0o777 == 0o700
    targets = resolve_targets(build_parser().parse_args(["-c", str(config), "servers"]))
    assert (targets.pool, targets.discovery, targets.orchestrator) == (
        ",".join(shards),
        "127.0.0.1:7100",
        "127.0.0.1:7200",
    )
    # Loaded with the stack's shard count: the server pinned to shard 2 is valid.
    assert targets.config is not None
    assert targets.config.toolscout.pool.shards.count == 3
    # Flags still come first.
    flagged = resolve_targets(
        build_parser().parse_args(["-c", str(config), "servers", "--pool-target", "h:1"])
    )
    assert flagged.pool == "h:1"
    remove_record(config)
    assert find_record(config) is None
    assert list(runtime.iterdir()) == []


def test_a_record_of_a_process_that_is_gone_is_stale_and_removed(runtime: Path, config: Path) -> None:
    written = write_record(config, "127.0.0.1:7001", "127.0.0.1:7100", "127.0.0.1:7200")
    assert written is not None
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()  # exited and reaped: its pid runs nothing now
    written.write_text(json.dumps(_record(written) | {"pid": finished.pid}))
    assert find_record(config) is None
    assert not written.exists()


def test_a_record_whose_pid_now_belongs_to_another_process_is_stale(runtime: Path, config: Path) -> None:
    written = write_record(config, "127.0.0.1:7001", "127.0.0.1:7100", "127.0.0.1:7200")
    assert written is not None
    assert _record(written)["started"]  # Linux: the start time from /proc
    written.write_text(json.dumps(_record(written) | {"started": "1"}))  # this pid, started long ago
    assert find_record(config) is None
    assert not written.exists()


def test_a_record_of_another_config_or_unreadable_is_ignored(
    runtime: Path, config: Path, tmp_path: Path
) -> None:
    written = write_record(config, "127.0.0.1:7001", "127.0.0.1:7100", "127.0.0.1:7200")
    assert written is not None
    other = tmp_path / "other.json"
    assert find_record(other) is None
    written.write_text("{not json")
    assert find_record(config) is None
    assert not written.exists()


def test_a_folder_others_may_write_to_is_not_used(runtime: Path, config: Path) -> None:
    runtime.mkdir(mode=0o700)
    assert write_record(config, "a:1", "b:2", "c:3") is not None
    runtime.chmod(0o777)
    assert find_record(config) is None
    assert write_record(config, "a:1", "b:2", "c:3") is None


def test_a_stack_removes_only_its_own_record(runtime: Path, config: Path) -> None:
    written = write_record(config, "a:1", "b:2", "c:3")
    assert written is not None
    written.write_text(json.dumps(_record(written) | {"pid": os.getppid()}))  # a newer stack's
    remove_record(config)
    assert written.exists()
