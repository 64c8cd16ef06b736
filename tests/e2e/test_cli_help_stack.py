"""`up --help` and `serve --help` show only the options those commands take (the others are still
refused with the reason when given)."""

from __future__ import annotations

import re

import pytest

from tests.support.cli_stack import run_cli


@pytest.mark.parametrize(
    ("command", "absent", "present"),
    [
        (
            ("up",),
            ("--target", "--pool-target", "--tls", "--ca-file", "--orchestrator-target"),
            ("--pool-shards",),
        ),
        (
            ("serve",),
            ("--target", "--tls", "--ca-file", "--orchestrator-target"),
            ("--pool-target", "--listen"),
        ),
    ],
)
def test_stack_commands_list_no_option_they_refuse(
    command: tuple[str, ...], absent: tuple[str, ...], present: tuple[str, ...]
) -> None:
    shown = run_cli(*command, "--help", timeout=30)
    assert shown.returncode == 0, shown.stderr
    flags = set(re.findall(r"--[a-z][a-z-]*", shown.stdout))
    assert not flags & set(absent)
    assert set(present) <= flags
    refused = run_cli(*command, "--tls", *(["pool"] if command == ("serve",) else []), timeout=30)
    assert refused.returncode == 2
    assert refused.stderr.startswith("toolscout: --tls: not an option")
