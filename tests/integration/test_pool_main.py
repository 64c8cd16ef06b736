"""``python -m mcp_pool_svc`` as a real process: serves, and on SIGTERM leaves no MCP server behind."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import grpc
import pytest
from toolscout import client as tc
from toolscout.mcp_pool.v1 import mcp_pool_pb2, mcp_pool_pb2_grpc

from tests.support.mcp_servers import (
    REPO_ROOT,
    free_port,
    misbehaving_config,
    wait_for_lines,
    wait_until_gone,
)


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        return str(response.read().decode())


async def test_the_service_serves_exports_metrics_and_stops_its_servers_on_sigterm(tmp_path: Path) -> None:
    port, metrics_port = free_port(), free_port()
    pids = tmp_path / "pids"
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "servers": {"fixture": misbehaving_config("--spawn-child", "--pid-file", str(pids))},
                "toolscout": {"pool": {"listen": f"127.0.0.1:{port}", "metrics_port": metrics_port}},
            }
        )
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "mcp_pool_svc",
        "--config",
        str(config),
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    try:
        server_pids = [int(p) for p in await wait_for_lines(pids, 2, within=30)]
        assert len(server_pids) == 2
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = mcp_pool_pb2_grpc.McpPoolStub(channel)
            resp = await stub.CallTool(
                mcp_pool_pb2.CallToolRequest(llm_name="fixture__echo", arguments_json='{"text": "up"}'),
                timeout=30,
                wait_for_ready=True,
            )
        assert resp.content[0].text == "up"
        metrics = await asyncio.to_thread(_scrape, metrics_port)
        assert 'toolscout_pool_tool_calls_total{outcome="ok",server="fixture"} 1.0' in metrics
        assert 'toolscout_pool_server_up{server="fixture"} 1.0' in metrics
        assert 'toolscout_pool_catalog_tools{server="fixture"} 11.0' in metrics
        assert 'toolscout_pool_tool_call_duration_seconds_count{outcome="ok",server="fixture"} 1.0' in metrics
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 30) == 0
        # The server and the child it spawned were in one process group, killed as a whole.
        assert await wait_until_gone(server_pids) == set()
    finally:
        if process.returncode is None:
            process.kill()
            await asyncio.wait_for(process.wait(), 10)


def test_a_missing_config_is_reported_with_exit_status_2(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mcp_pool_svc", "--config", str(tmp_path / "nope.json")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "nope.json" in done.stderr


@pytest.fixture(autouse=True)
def _no_config_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOOLSCOUT_CONFIG", raising=False)


async def _serving(port: int) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        await asyncio.wait_for(channel.channel_ready(), 30)


async def _start_service(config: dict[str, Any], tmp_path: Path, port: int) -> asyncio.subprocess.Process:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    # The child gets its own copies of the descriptors; ours are closed once it has them.
    with (tmp_path / "stdout").open("wb") as out, (tmp_path / "stderr").open("wb") as err:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "mcp_pool_svc",
            "--config",
            str(path),
            cwd=REPO_ROOT,
            stdout=out,
            stderr=err,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        )


async def test_an_idle_service_stops_at_once_on_sigterm_even_with_a_catalog_watch_open(
    tmp_path: Path,
) -> None:
    port = free_port()
    config = {
        "servers": {"fixture": misbehaving_config()},
        # A grace far longer than the bounded wait below: only ending the watch stream stops it in time.
        "toolscout": {"pool": {"listen": f"127.0.0.1:{port}", "metrics_port": -1, "shutdown_grace": 120}},
    }
    process = await _start_service(config, tmp_path, port)
    try:
        # The client library's channel, as discovery's: it also keeps a health Watch stream open.
        async with tc.AsyncPoolClient.connect(f"127.0.0.1:{port}") as client:
            await _serving(port)
            watch = client.watch_catalog()
            first = await asyncio.wait_for(anext(watch), 30)
            assert first.tools
            process.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(process.wait(), 30) == 0
            with pytest.raises(tc.UnavailableError):
                await asyncio.wait_for(anext(watch), 30)
    finally:
        if process.returncode is None:
            process.kill()
            await asyncio.wait_for(process.wait(), 10)


async def test_server_stderr_is_logged_as_one_json_event_per_line_with_its_secrets_masked(
    tmp_path: Path,
) -> None:
    port = free_port()
    secret = "hunter2-very-secret-value"
    calls = tmp_path / "calls"
    config = {
        "servers": {
            "fixture": misbehaving_config(
                "--stderr-env", "SERVICE_TOKEN", "--call-log", str(calls), env={"SERVICE_TOKEN": secret}
            )
        },
        "toolscout": {"pool": {"listen": f"127.0.0.1:{port}", "metrics_port": -1}},
    }
    process = await _start_service(config, tmp_path, port)
    try:
        async with tc.AsyncPoolClient.connect(f"127.0.0.1:{port}") as client:
            await _serving(port)
            await client.call_tool("fixture__echo", {"text": "hi"}, deadline=30)
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 30) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await asyncio.wait_for(process.wait(), 10)
    out = (tmp_path / "stdout").read_text() + (tmp_path / "stderr").read_text()
    assert secret not in out
    events = [
        json.loads(line) for line in (tmp_path / "stdout").read_text().splitlines() if line.startswith("{")
    ]
    leaked = [e for e in events if e.get("event") == "mcp_server_stderr"]
    # Two lines at start and two per call, each its own event naming the server.
    assert len(leaked) >= 4
    assert {e["server"] for e in leaked} == {"fixture"}
    assert all("[REDACTED]" in e["line"] and "\n" not in e["line"] for e in leaked)
