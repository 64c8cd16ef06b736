"""Operating a sharded pool from the CLI, as real processes: `serve` flags that work or are refused,
`up --pool-shards N` setting the count, the CLI finding a running `up` stack from its config alone,
and each shard of `up` being its own process that can fail (and come back) alone."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.support.cli_stack import CLI, ThreadedProvider, UpProcess, run_cli, stack_config, wait_gone
from tests.support.fake_provider import Reply
from tests.support.mcp_servers import REPO_ROOT, example_server_config, free_port

pytestmark = pytest.mark.e2e


def _pinned_config(path: Path, ports: tuple[int, int, int] = (0, 0, 0)) -> Path:
    """notes on shard 0, weather on shard 2, time on shard 1: none of them valid for count 1."""
    config = stack_config(
        path,
        ports=ports,
        extra_servers={
            "notes": example_server_config("notes", shard=0),
            "weather": example_server_config("weather", defer_loading=True, shard=2),
        },
    )
    data = json.loads(config.read_text())
    data["servers"]["time"]["shard"] = 1
    config.write_text(json.dumps(data))
    return config


# --- `serve`: every flag works or is refused ------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "refused"),
    [
        (["serve", "pool", "--pool-target", "127.0.0.1:1"], "--pool-target"),
        (["serve", "pool", "--discovery-target", "127.0.0.1:1"], "--discovery-target"),
        (["serve", "discovery", "--discovery-target", "127.0.0.1:1"], "--discovery-target"),
        (["serve", "discovery", "--orchestrator-target", "127.0.0.1:1"], "--orchestrator-target"),
        (["serve", "orchestrator", "--orchestrator-target", "127.0.0.1:1"], "--orchestrator-target"),
        (["serve", "orchestrator", "--target", "127.0.0.1:1"], "--target"),
        (["serve", "gateway", "--orchestrator-target", "127.0.0.1:1"], "--orchestrator-target"),
        (["serve", "gateway", "--shard", "0/2"], "--shard"),
        (["serve", "discovery", "--tls"], "--tls"),
        (["serve", "discovery", "--ca-file", "ca.pem"], "--ca-file"),
        (["serve", "pool", "--json"], "--json"),
        (["up", "--pool-target", "127.0.0.1:1"], "--pool-target"),
        (["up", "--target", "127.0.0.1:1"], "--target"),
        (["up", "--tls"], "--tls"),
        (["serve", "discovery", "--shard", "0/2"], "--shard"),
        (["up", "--pool-shards", "0"], "--pool-shards"),
    ],
)
def test_a_flag_a_stack_command_cannot_use_is_refused_before_anything_starts(
    tmp_path: Path, argv: list[str], refused: str
) -> None:
    config = stack_config(tmp_path / "config.json")
    done = run_cli(*argv, "-c", str(config), timeout=30)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"toolscout: {refused}"), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr


def _serve(*argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*CLI, "serve", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
    )


def _stop(*processes: subprocess.Popen[str]) -> None:
    for process in processes:
        process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=30)
        finally:
            if process.stderr:
                process.stderr.close()


def _gateway_call(url: str) -> tuple[list[str], str]:
    """The gateway's tool list and what its ``call_tool`` answers for the weather forecast."""
    import anyio
    from mcp import Client

    async def run() -> tuple[list[str], str]:
        with anyio.fail_after(60):
            async with Client(url, mode="legacy") as client:
                names = [t.name for t in (await client.list_tools()).tools]
                arguments = {"location": {"city": "Tokyo"}, "days": 2}
                result = await client.call_tool(
                    "call_tool", {"name": "weather__get_forecast", "arguments": arguments}
                )
                return names, "".join(getattr(block, "text", "") for block in result.content)

    return anyio.run(run)


def test_serve_discovery_orchestrator_and_gateway_call_the_targets_given_on_the_command_line(
    tmp_path: Path,
) -> None:
    # The config points them at a port where nothing listens: only the flags lead to the pool.
    nowhere = f"127.0.0.1:{free_port()}"
    pool_port, discovery_port, orchestrator_port = free_port(), free_port(), free_port()
    gateway_port = free_port()
    with ThreadedProvider() as provider:
        provider.script(Reply.answer("all good"))
        config = stack_config(tmp_path / "config.json", provider_url=provider.openai_base_url)
        data = json.loads(config.read_text())
        data["toolscout"]["discovery"]["pool_target"] = nowhere
        data["toolscout"]["orchestrator"].update(pool_target=nowhere, discovery_target=nowhere)
        data["toolscout"]["gateway"].update(pool_target=nowhere, discovery_target=nowhere)
        config.write_text(json.dumps(data))
        pool = _serve("pool", "-c", str(config), "--listen", f"127.0.0.1:{pool_port}")
        discovery = _serve(
            "discovery", "-c", str(config), "--listen", f"127.0.0.1:{discovery_port}",
            "--pool-target", f"127.0.0.1:{pool_port}",
        )  # fmt: skip
        orchestrator = _serve(
            "orchestrator", "-c", str(config), "--listen", f"127.0.0.1:{orchestrator_port}",
            "--pool-target", f"127.0.0.1:{pool_port}", "--discovery-target", f"127.0.0.1:{discovery_port}",
        )  # fmt: skip
        gateway = _serve(
            "gateway", "-c", str(config), "--listen", f"127.0.0.1:{gateway_port}",
            "--pool-target", f"127.0.0.1:{pool_port}", "--discovery-target", f"127.0.0.1:{discovery_port}",
        )  # fmt: skip
        try:
            targets = [
                "--pool-target", f"127.0.0.1:{pool_port}",
                "--discovery-target", f"127.0.0.1:{discovery_port}",
                "--orchestrator-target", f"127.0.0.1:{orchestrator_port}",
            ]  # fmt: skip
            deadline = time.monotonic() + 90
            while True:  # the three start in parallel; discovery serves once it has a catalog
                found = run_cli("search", "forecast", "--json", *targets)
                if found.returncode == 0 or time.monotonic() > deadline:
                    break
            chat = run_cli("chat", "hello", "--model", "fake", *targets)
            names, forecast = _gateway_call(f"http://127.0.0.1:{gateway_port}/mcp")
        finally:
            _stop(gateway, orchestrator, discovery, pool)
    assert names[-3:] == ["search_tools", "call_tool", "read_result"]
    assert forecast.startswith("Tokyo forecast\nday 1: "), forecast
    assert found.returncode == 0, found.stderr
    assert "weather__get_forecast" in found.stdout
    assert chat.returncode == 0, chat.stderr
    assert "all good" in chat.stdout


# --- `up --pool-shards N` ---------------------------------------------------------------------------


def _shard_of_each_server(endpoints: dict[str, str], count: int) -> dict[str, int]:
    placed: dict[str, int] = {}
    for k in range(count):
        done = run_cli("servers", "--json", "--pool-target", endpoints[f"pool-{k}"])
        assert done.returncode == 0, done.stderr
        for server in json.loads(done.stdout)["servers"]:
            placed[server["name"]] = k
    return placed


def test_up_pool_shards_sets_the_shard_count_so_servers_may_be_pinned_to_any_of_them(tmp_path: Path) -> None:
    up = UpProcess(_pinned_config(tmp_path / "config.json"), "--pool-shards", "3")
    try:
        endpoints = up.wait_ready(timeout=120)
        placed = _shard_of_each_server(endpoints, 3)
    finally:
        code = up.stop()
    assert code == 0, up.stderr
    assert placed == {"notes": 0, "time": 1, "weather": 2}


def _state_files() -> set[Path]:
    from toolscout_cli.stack_state import state_dir

    return set(state_dir().glob("*.json"))


def test_the_cli_finds_the_shards_of_a_running_up_stack_from_the_config_alone(
    tmp_path: Path, own_runtime_dir: Path
) -> None:
    config = _pinned_config(tmp_path / "config.json", ports=(free_port(), free_port(), free_port()))
    up = UpProcess(config, "--pool-shards", "3")
    try:
        up.wait_ready(timeout=120)
        servers = run_cli("-c", str(config), "servers", "--json")
        call = run_cli("-c", str(config), "call", "weather__list_cities")
        recorded = _state_files()
    finally:
        code = up.stop()
    assert code == 0, up.stderr
    assert servers.returncode == 0, servers.stderr
    assert sorted(s["name"] for s in json.loads(servers.stdout)["servers"]) == ["notes", "time", "weather"]
    assert call.returncode == 0, call.stderr
    assert recorded
    assert not recorded & _state_files()  # the stack's record went with it
    # Without the running stack the config is read as written again: one shard, so the pins are wrong.
    gone = run_cli("-c", str(config), "servers", timeout=60)
    assert gone.returncode == 2, gone.stderr
    assert "toolscout.pool.shards.count is 1" in gone.stderr


def _shard_processes(up: UpProcess, count: int) -> dict[int, psutil.Process]:
    found: dict[int, psutil.Process] = {}
    for child in psutil.Process(up.process.pid).children():
        cmdline = child.cmdline()
        if "toolscout_cli.shard_process" in cmdline:
            found[json.loads(cmdline[-1])["shard"]] = child
    assert sorted(found) == list(range(count)), found
    return found


def _servers_by_name(config: Path) -> dict[str, dict[str, Any]]:
    done = run_cli("-c", str(config), "servers", "--json")
    assert done.returncode == 0, done.stderr
    return {s["name"]: s for s in json.loads(done.stdout)["servers"]}


def test_each_shard_of_up_is_its_own_process_that_fails_alone_and_comes_back(tmp_path: Path) -> None:
    config = _pinned_config(tmp_path / "config.json", ports=(free_port(), free_port(), free_port()))
    up = UpProcess(config, "--pool-shards", "3")
    try:
        endpoints = up.wait_ready(timeout=120)
        shards = _shard_processes(up, 3)
        # Each shard process runs its own servers' processes: killing one shard touches nothing else.
        others = {p.pid for k in (0, 1) for p in shards[k].children(recursive=True)} | {
            shards[0].pid,
            shards[1].pid,
        }
        shards[2].kill()
        exited = up.next_event("shard_exited", timeout=60)
        # notes (shard 0) and time (shard 1) keep answering while weather's shard is down.
        during = run_cli("-c", str(config), "call", "time__get_current_time", "--args", '{"timezone": "UTC"}')
        assert {p.pid for p in psutil.Process(up.process.pid).children(recursive=True)} >= others
        back = up.next_event("shard_restarted", timeout=90)
        weather = run_cli("-c", str(config), "call", "weather__list_cities")
        children = {p.pid for p in psutil.Process(up.process.pid).children(recursive=True)}
    finally:
        code = up.stop()
    assert code == 0, up.stderr
    assert exited["shard"] == 2
    assert exited["signal"] == "SIGKILL"
    assert during.returncode == 0, during.stderr
    assert back == {"event": "shard_restarted", "shard": 2, "address": endpoints["pool-2"]}
    assert weather.returncode == 0, weather.stderr
    assert wait_gone(children) == set()  # stopping `up` leaves no shard or MCP server behind
