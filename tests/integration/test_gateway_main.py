"""``python -m mcp_gateway_svc``: the gateway as its own process, in front of a pool and discovery."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

import anyio
import httpx2
from mcp import Client

from tests.support.mcp_servers import REPO_ROOT, example_server_config, free_port
from tests.support.stack import running_stack
from toolscout_kit.config import parse_config


async def test_the_gateway_process_serves_mcp_reports_ready_and_stops_cleanly_on_sigterm(
    tmp_path: Path,
) -> None:
    doc = {
        "servers": {"weather": example_server_config("weather", defer_loading=True)},
        "tool_discovery": {"enabled": True},
    }
    async with running_stack(parse_config(doc), orchestrator=False) as stack:
        port = free_port()
        doc["toolscout"] = {
            "gateway": {
                "listen": f"127.0.0.1:{port}",
                "metrics_port": -1,
                "discovery_target": stack.discovery.address,
                "pool_target": stack.pool.address,
            }
        }
        path = tmp_path / "config.json"
        path.write_text(json.dumps(doc))
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "mcp_gateway_svc",
            "--config",
            str(path),
            cwd=REPO_ROOT,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            async with httpx2.AsyncClient(timeout=5) as http:
                with anyio.fail_after(60):
                    while True:
                        try:
                            if (await http.get(f"{url}/readyz")).status_code == 200:
                                break
                        except httpx2.HTTPError:
                            pass  # not listening yet
                        await anyio.sleep(0.1)
            async with Client(f"{url}/mcp") as client:
                names = [t.name for t in (await client.list_tools()).tools]
        finally:
            process.send_signal(signal.SIGTERM)
            with anyio.fail_after(30):
                code = await process.wait()
            stderr = (await process.stderr.read()).decode() if process.stderr else ""
    assert names == ["search_tools", "call_tool", "read_result"]
    assert code == 0, stderr
    assert "Traceback" not in stderr
