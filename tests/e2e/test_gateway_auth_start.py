"""The gateway is closed when the stack is: started as its own process, by `toolscout up` and
`toolscout serve`, it refuses to run open where it may not, before anything else starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.cli_stack import run_cli, stack_config
from tests.support.mcp_servers import REPO_ROOT, free_port


def _marker(path: Path) -> dict[str, object]:
    """An "MCP server" that only records that it was started."""
    code = f"import time; open({str(path)!r}, 'w').write('started'); time.sleep(120)"
    return {"command": sys.executable, "args": ["-c", code], "connect_timeout": 1}


def _config(tmp: Path, **gateway: object) -> Path:
    path = stack_config(tmp / "config.json")
    data = json.loads(path.read_text())
    data["servers"] = {"marker": _marker(tmp / "started")}
    data["tool_sets"] = {}
    data["toolscout"]["gateway"].update(gateway)
    path.write_text(json.dumps(data))
    return path


def test_up_with_an_unset_gateway_token_variable_exits_2_naming_the_config_before_any_server(
    tmp_path: Path,
) -> None:
    path = _config(tmp_path, tokens={"TS_UNSET_GATEWAY_TOKEN": ["*"]})
    done = run_cli("up", "-c", str(path), env={"TS_UNSET_GATEWAY_TOKEN": ""}, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"toolscout: {path}: toolscout.gateway.tokens.TS_UNSET_GATEWAY_TOKEN: the environment variable "
        "TS_UNSET_GATEWAY_TOKEN is not set (it holds a bearer token clients send to the gateway)"
    ]
    assert not (tmp_path / "started").exists()


def test_serve_gateway_open_on_every_interface_exits_2_with_one_line_naming_the_setting(
    tmp_path: Path,
) -> None:
    path = _config(tmp_path, listen=f"0.0.0.0:{free_port()}")
    done = run_cli("serve", "gateway", "-c", str(path), env={"TOOLSCOUT_AUTH_TOKEN": ""}, timeout=60)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert "toolscout.gateway.allow_anonymous" in lines[0]
    assert str(path) in lines[0]


def test_the_gateway_process_open_on_purpose_logs_one_warning_line(tmp_path: Path) -> None:
    port = free_port()
    path = _config(tmp_path, listen=f"127.0.0.1:{port}", allow_anonymous=True)
    process = subprocess.Popen(
        [sys.executable, "-m", "mcp_gateway_svc", "--config", str(path)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TOOLSCOUT_AUTH_TOKEN": "services-token-0001"},
    )
    assert process.stdout is not None
    lines: list[str] = []
    try:
        for line in process.stdout:
            lines.append(line)
            if "gateway started" in line:
                break
    finally:
        process.terminate()
        _out, err = process.communicate(timeout=30)
    warnings = [json.loads(x) for x in lines if '"warning"' in x.lower()]
    assert [w["event"] for w in warnings] == ["the gateway answers anyone who reaches it (no token is asked)"]
    assert "allow_anonymous" in warnings[0]["because"]
    assert process.returncode == 0, err
