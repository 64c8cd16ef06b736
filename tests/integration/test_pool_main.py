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

import grpc
import pytest
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
        assert 'toolscout_pool_catalog_tools{server="fixture"} 10.0' in metrics
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
