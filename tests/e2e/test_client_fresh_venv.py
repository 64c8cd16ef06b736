"""The toolscout-client wheel, installed alone into a fresh venv, calls a running stack.

Proves the distribution is self-contained: only grpcio and protobuf (from the package registry)
next to it, none of the services' dependencies, and the typed clients work against real services.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from toolscout import client as tc

from tests.support.mcp_servers import REPO_ROOT, example_server_config, time_server_config
from tests.support.stack import running_stack
from toolscout_kit.config import parse_config

pytestmark = pytest.mark.e2e

SCRIPT = r"""
import asyncio, importlib.util, json, sys
from toolscout.client import AsyncToolscoutClient, NotFoundError, PoolClient

pool, discovery = sys.argv[1], sys.argv[2]

async def main():
    async with AsyncToolscoutClient.connect(pool=pool, discovery=discovery, orchestrator=discovery) as ts:
        servers = await ts.pool.list_servers()
        hits = await ts.discovery.search_tools("current time in a timezone")
        plan = await ts.discovery.plan_tools(include_deferred_names=True)
        try:
            await ts.pool.call_tool("no_such_tool")
            missing = None
        except NotFoundError as err:
            missing = type(err).__name__
    with PoolClient.connect(pool) as sync_pool:
        result = sync_pool.call_tool("time__get_current_time", {"timezone": "UTC"})
    print(json.dumps({
        "servers": {s.name: s.state for s in servers},
        "top_hit": hits.matches[0].tool.llm_name,
        "deferred": sorted(plan.deferred_tool_names),
        "missing": missing,
        "call_text": result.text,
        "foreign": [m for m in ("toolscout_kit", "mcp", "pydantic", "mcp_pool_svc") if importlib.util.find_spec(m)],
    }))

asyncio.run(main())
"""


def _uv() -> list[str]:
    uv = shutil.which("uv")
    return [uv] if uv else [sys.executable, "-m", "uv"]


def _run(*cmd: str, cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def venv_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("fresh-venv")
    dist = tmp / "dist"
    _run(*_uv(), "build", "--package", "toolscout-client", "--wheel", "--out-dir", str(dist), cwd=REPO_ROOT)
    (wheel,) = dist.glob("toolscout_client-*.whl")
    venv = tmp / "venv"
    _run(*_uv(), "venv", "--python", sys.executable, str(venv), cwd=tmp)
    python = venv / "bin" / "python"
    _run(*_uv(), "pip", "install", "--python", str(python), str(wheel), cwd=tmp)
    return python


async def _all_ready(pool_target: str, discovery_target: str) -> None:
    # On a busy machine a server can connect after the pool's start-up wait, and discovery needs
    # the catalog that follows: wait (bounded) for both before the real test.
    async with (
        tc.AsyncPoolClient.connect(pool_target) as pool,
        tc.AsyncDiscoveryClient.connect(discovery_target) as discovery,
        asyncio.timeout(60),
    ):
        async for snapshot in pool.watch_catalog():
            if {t.server for t in snapshot.tools} == {"notes", "time"}:
                break
        while True:
            try:
                plan = await discovery.plan_tools()
                if plan.total_tools == len(snapshot.tools):
                    return
            except tc.UnavailableError:
                pass  # no catalog yet
            # Discovery follows the pool's catalog stream; give it a moment (bounded above).
            await asyncio.sleep(0.1)


async def test_the_wheel_alone_in_a_fresh_venv_calls_a_running_stack(
    venv_python: Path, tmp_path: Path
) -> None:
    config = parse_config(
        {
            "servers": {
                "notes": example_server_config("notes"),
                "time": time_server_config(defer_loading=True),
            },
            "tool_discovery": {"enabled": True},
        },
        base_dir=tmp_path,
    )
    script = tmp_path / "call_stack.py"
    script.write_text(SCRIPT)
    async with running_stack(config, orchestrator=False) as stack:
        await _all_ready(stack.pool.address, stack.discovery.address)
        process = await asyncio.create_subprocess_exec(
            str(venv_python),
            str(script),
            stack.pool.address,
            stack.discovery.address,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=tmp_path,  # not the repo: nothing importable from the working directory
        )
        out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, err.decode()
    got = json.loads(out)
    assert got["servers"] == {"notes": "ready", "time": "ready"}
    assert got["top_hit"] == "time__get_current_time"
    assert got["deferred"] == ["time__convert_time", "time__get_current_time"]
    assert got["missing"] == "NotFoundError"
    assert '"timezone": "UTC"' in got["call_text"]
    assert got["foreign"] == []
