"""`toolscout up` and `toolscout serve` as real processes: progress, endpoints, clean shutdown."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path

import psutil
import pytest

from tests.support.cli_stack import CLI, UpProcess, run_cli, stack_config, wait_gone
from tests.support.mcp_servers import REPO_ROOT, example_server_config, free_port
from tests.support.sharded_stack import wait_serving
from toolscout_kit.event_loop import EVENT_LOOP_ENV

pytestmark = pytest.mark.e2e


def _around_traceback(text: str) -> str:
    at = text.find("Traceback")
    return text[max(at - 1000, 0) : at + 3000]


def _descendants(pid: int) -> set[int]:
    return {p.pid for p in psutil.Process(pid).children(recursive=True)}


def test_up_reports_each_server_serves_metrics_and_stops_on_ctrl_c_leaving_no_process(tmp_path: Path) -> None:
    broken = {"command": sys.executable, "args": ["-c", "import sys; sys.exit(3)"]}
    config = stack_config(tmp_path / "config.json", metrics_port=0, extra_servers={"broken": broken})
    up = UpProcess(config)
    try:
        ready = up.next_event("ready")
        servers = up.server_states({"notes", "time", "weather", "broken"})
        children = _descendants(up.process.pid)
        with urllib.request.urlopen(ready["metrics"]["pool"], timeout=10) as response:  # noqa: S310 - local URL
            assert b"toolscout_" in response.read()
    finally:
        code = up.stop(signal.SIGINT)
    assert code == 0, up.stderr
    assert set(ready["endpoints"]) == {"pool", "discovery", "orchestrator", "gateway", "console"}
    assert set(ready["metrics"]) == {"pool", "discovery", "orchestrator", "gateway"}
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/mcp", ready["endpoints"]["gateway"])
    # The web console, on the gateway's port (served on loopback by default).
    assert ready["endpoints"]["console"] == ready["endpoints"]["gateway"].removesuffix("/mcp") + "/console"
    assert {name: s["state"] for name, s in servers.items() if name != "broken"} == {
        "notes": "ready",
        "time": "ready",
        "weather": "ready",
    }
    # A server that cannot start is reported with its error and does not stop the others.
    assert servers["broken"]["state"] in {"reconnecting", "failed"}
    assert servers["broken"]["error"]
    assert len(children) >= 3  # the stdio MCP servers
    assert wait_gone(children) == set()
    assert up.lines[-1].strip() == '{"event": "stopped"}'
    assert "Traceback" not in up.stderr, _around_traceback(up.stderr)


def test_up_stops_cleanly_on_sigterm_leaving_no_process(tmp_path: Path) -> None:
    up = UpProcess(stack_config(tmp_path / "config.json"))
    try:
        up.wait_ready()
        children = _descendants(up.process.pid)
    finally:
        code = up.stop(signal.SIGTERM)
    assert code == 0, up.stderr
    assert children
    assert wait_gone(children) == set()
    assert "Traceback" not in up.stderr, _around_traceback(up.stderr)


def test_up_with_a_bad_config_exits_2_with_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("servers:\n  x: {command: python, defer_loadng: true}\n")
    done = run_cli("up", "-c", str(bad))
    assert done.returncode == 2
    assert "defer_loadng" in done.stderr
    assert "Traceback" not in done.stderr
    done = run_cli("up")
    assert done.returncode == 2
    assert "no configuration given" in done.stderr


@pytest.mark.parametrize("command", ["up", "serve"])
def test_an_event_loop_that_is_not_one_exits_2_with_one_line(tmp_path: Path, command: str) -> None:
    marker = uuid.uuid4().hex
    notes = example_server_config("notes", env={"TS_CLI_TEST_MARKER": marker})
    config = stack_config(tmp_path / "config.json", extra_servers={"notes": notes})
    args = ["up"] if command == "up" else ["serve", "pool", "--listen", "127.0.0.1:0"]
    done = run_cli(*args, "-c", str(config), env={EVENT_LOOP_ENV: "trio"})
    assert done.returncode == 2, done.stderr
    assert f"{EVENT_LOOP_ENV} must be one of uvloop, asyncio (or unset), got 'trio'" in done.stderr
    assert "Traceback" not in done.stderr
    assert _marked(marker) == set()  # no MCP server was started


def _marked(marker: str) -> set[int]:
    found = set()
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("TS_CLI_TEST_MARKER") == marker:
                found.add(proc.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def test_up_on_a_port_in_use_exits_2_and_stops_the_servers_it_started(tmp_path: Path) -> None:
    marker = uuid.uuid4().hex
    notes = example_server_config("notes", env={"TS_CLI_TEST_MARKER": marker})
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        # The pool (and its MCP servers) start first; discovery then cannot bind.
        config = stack_config(tmp_path / "config.json", ports=(0, port, 0), extra_servers={"notes": notes})
        done = run_cli("up", "-c", str(config), timeout=90)
    assert done.returncode == 2, done.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "Traceback" not in done.stderr
    assert _marked(marker) == set()


@pytest.mark.parametrize(("chosen", "loop"), [(None, "uvloop"), ("asyncio", "asyncio")])
def test_serve_runs_one_service_until_sigterm(tmp_path: Path, chosen: str | None, loop: str) -> None:
    """On uvloop by default (``TOOLSCOUT_EVENT_LOOP=asyncio``: asyncio's loop), its stdio servers
    reaped when it stops either way."""
    port = free_port()
    config = stack_config(tmp_path / "config.json")
    env = {key: value for key, value in os.environ.items() if key != EVENT_LOOP_ENV}
    if chosen is not None:
        env[EVENT_LOOP_ENV] = chosen
    process = subprocess.Popen(
        [*CLI, "serve", "pool", "-c", str(config), "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
        env=env,
    )
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in process.stdout or ()], daemon=True)
    reader.start()
    try:
        # The service logs JSON to stdout (like python -m mcp_pool_svc); wait for its start line.
        deadline = time.monotonic() + 90
        while '"server started"' not in (line := lines.get(timeout=max(deadline - time.monotonic(), 0.01))):
            pass
        assert json.loads(line)["event_loop"] == loop
        done = run_cli("servers", "--json", "--pool-target", f"127.0.0.1:{port}")
        assert done.returncode == 0, done.stderr
        assert {s["name"] for s in json.loads(done.stdout)["servers"]} == {"notes", "time", "weather"}
        children = _descendants(process.pid)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
        # The reader owns stdout until EOF; closing it under the thread (communicate) races with it.
        reader.join(timeout=10)
        err = process.stderr.read() if process.stderr else ""
        for pipe in (process.stdout, process.stderr):
            if pipe:
                pipe.close()
    assert process.returncode == 0, err
    assert children
    assert wait_gone(children) == set()


def test_up_with_a_model_template_that_does_not_load_exits_2_before_starting_anything(tmp_path: Path) -> None:
    marker = uuid.uuid4().hex
    notes = example_server_config("notes", env={"TS_CLI_TEST_MARKER": marker})
    config = stack_config(tmp_path / "config.json", extra_servers={"notes": notes})
    data = json.loads(config.read_text())
    data["models"]["fake"]["template"] = "nope"
    config.write_text(json.dumps(data))
    done = run_cli("up", "-c", str(config))
    assert done.returncode == 2
    assert done.stderr.startswith(
        f"toolscout: {config}: models.fake.template: system prompt template 'nope' not found"
    )
    assert "Traceback" not in done.stderr
    assert _marked(marker) == set()  # no MCP server was started


def test_up_applies_the_configured_blip_grace(tmp_path: Path) -> None:
    from toolscout.client import PoolClient, ToolscoutClientError

    from tests.support.mcp_servers import misbehaving_config

    path = stack_config(tmp_path / "config.json", extra_servers={"flaky": misbehaving_config()})
    config = json.loads(path.read_text())
    # No grace at all: a crash marks the server's tools unavailable at once. With the default
    # (2 s) a restart in well under a second would leave the catalog untouched.
    config["toolscout"]["pool"]["blip_grace"] = 0
    path.write_text(json.dumps(config))
    up = UpProcess(path)
    try:
        endpoints = up.wait_ready()
        up.server_states({"flaky"})
        with PoolClient.connect(endpoints["pool"]) as pool:
            before = pool.list_tools(["flaky"])
            assert before.tools
            assert all(t.available for t in before.tools)
            with pytest.raises(ToolscoutClientError):
                pool.call_tool("crash", server="flaky")
            marked_unavailable = False
            for snapshot in pool.watch_catalog(before.catalog_version, deadline=20):
                flaky = [t for t in snapshot.tools if t.server == "flaky"]
                if flaky and not any(t.available for t in flaky):
                    marked_unavailable = True
                    break
    finally:
        up.stop(signal.SIGINT)
    assert marked_unavailable


def test_up_with_pool_shards_runs_each_server_on_one_shard_and_serves_the_whole_catalog(
    tmp_path: Path,
) -> None:
    import asyncio

    from toolscout import client as tc

    config = stack_config(tmp_path / "config.json", metrics_port=-1)
    up = UpProcess(config, "--pool-shards", "3")
    try:
        endpoints = up.wait_ready()
        states = up.server_states({"notes", "time", "weather"})
        shard_targets = [endpoints[f"pool-{k}"] for k in range(3)]

        async def look() -> tuple[list[set[str]], set[str], set[str]]:
            # Discovery serves once its first merged catalog is in (it may follow "ready" by a moment).
            await wait_serving(endpoints["discovery"], "toolscout.discovery.v1.Discovery")
            per_shard = []
            for target in shard_targets:
                async with tc.AsyncPoolClient.connect(target) as shard:
                    per_shard.append({s.name for s in await shard.list_servers()})
            async with tc.AsyncDiscoveryClient.connect(endpoints["discovery"]) as discovery:
                plan = await discovery.plan_tools(include_deferred_tools=True, deadline=30)
            async with tc.AsyncShardedPoolClient.connect(shard_targets) as pool:
                merged = await pool.list_tools()
                result = await pool.call_tool("get_current_time", {"timezone": "UTC"}, server="time")
            assert not result.is_error
            servers = {t.server for t in (*plan.loaded_tools, *plan.deferred_tools)}
            return per_shard, servers, {t.server for t in merged.tools}

        per_shard, planned, merged = asyncio.run(look())
    finally:
        code = up.stop(signal.SIGINT)
    assert code == 0, up.stderr
    assert {name: s["state"] for name, s in states.items()} == dict.fromkeys(
        ["notes", "time", "weather"], "ready"
    )
    # Each server on exactly one shard; discovery and the merged catalog see all of them.
    assert sorted(name for names in per_shard for name in names) == ["notes", "time", "weather"]
    assert planned == merged == {"notes", "time", "weather"}


def test_up_serves_the_mcp_front_door_and_prints_how_to_add_it_to_mcp_hosts(tmp_path: Path) -> None:
    import anyio
    from mcp import Client

    up = UpProcess(stack_config(tmp_path / "config.json"), json_output=False)
    try:
        lines = up.wait_for_line("Cursor:")
        url_line = next(line for line in lines if line.startswith("MCP front door: "))
        url = url_line.split()[3]
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/mcp", url)
        text = "\n".join(lines)
        assert f"claude mcp add --transport http toolscout {url}" in text
        assert f'url = "{url}"' in text  # Codex's config.toml, under [mcp_servers.toolscout]
        assert "[mcp_servers.toolscout]" in text
        assert json.dumps({"servers": {"toolscout": {"type": "http", "url": url}}}) in text
        assert json.dumps({"mcpServers": {"toolscout": {"url": url}}}) in text
        # The web console's URL, on the same port, answers with its sign-in-free servers page.
        console = next(line.split()[1] for line in lines if line.startswith("console "))
        assert console == url.removesuffix("/mcp") + "/console"
        with urllib.request.urlopen(console, timeout=30) as page:  # noqa: S310 - a local URL
            assert page.url.endswith("/console/servers")
            assert b"<h1>Servers</h1>" in page.read()

        async def listed() -> list[str]:
            with anyio.fail_after(30):
                async with Client(url, mode="legacy") as client:
                    return [t.name for t in (await client.list_tools()).tools]

        # The printed URL is a working MCP endpoint (meta mode: eager tools + the stable pair).
        names = anyio.run(listed)
    finally:
        code = up.stop(signal.SIGINT)
    assert code == 0, up.stderr
    assert names[-3:] == ["search_tools", "call_tool", "read_result"]
    assert "notes__add_note" in names


def _start_marker(path: Path) -> dict[str, object]:
    """An "MCP server" that only records that it was started (the pool stops it on exit)."""
    code = f"import time; open({str(path)!r}, 'w').write('started'); time.sleep(120)"
    return {"command": sys.executable, "args": ["-c", code], "connect_timeout": 1}


def test_a_second_up_on_the_same_ports_is_refused_at_once_before_any_server_starts(tmp_path: Path) -> None:
    pool, discovery, orchestrator = free_port(), free_port(), free_port()
    metrics = free_port()
    first = stack_config(tmp_path / "first.json", ports=(pool, discovery, orchestrator))
    data = json.loads(first.read_text())
    data["toolscout"]["pool"]["metrics_port"] = metrics
    first.write_text(json.dumps(data))
    started = tmp_path / "started"
    second = tmp_path / "second.json"
    data["servers"]["marker"] = _start_marker(started)
    second.write_text(json.dumps(data))
    up = UpProcess(first)
    try:
        up.wait_ready()
        done = run_cli("up", "-c", str(second), timeout=60)
    finally:
        code = up.stop()
    assert code == 0, up.stderr
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"toolscout: cannot listen on 127.0.0.1:{pool} (pool gRPC): address already in use",
        f"cannot listen on 127.0.0.1:{metrics} (pool metrics): address already in use",
        f"cannot listen on 127.0.0.1:{discovery} (discovery gRPC): address already in use",
        f"cannot listen on 127.0.0.1:{orchestrator} (orchestrator gRPC): address already in use",
        "is another toolscout (or another program) running on these ports? Stop it, or set other "
        "`listen` / `metrics_port` values in the config (0 = any free port)",
    ]
    assert not started.exists()  # refused before the pool started any MCP server
    assert done.stdout == ""


def test_up_reports_ignored_keys_and_keyless_models_when_it_loads_the_config(tmp_path: Path) -> None:
    config = stack_config(
        tmp_path / "config.json",
        extra_clients={"claude": {"provider": "anthropic"}},
        extra_models={"sonnet": {"client": "claude", "model": "claude-sonnet-4-6"}},
        extra_keys={"$schema": "https://example.com/casual_mcp_config.schema.json"},
    )
    up = UpProcess(config, env={"ANTHROPIC_API_KEY": ""})
    try:
        up.wait_ready()
    finally:
        code = up.stop()
    assert code == 0, up.stderr
    assert up.stderr.splitlines()[:2] == [
        f"toolscout: warning: {config}: $schema: not a key toolscout knows: ignored, as casual-mcp does",
        "toolscout: warning: no ANTHROPIC_API_KEY in this environment: chat with sonnet exits 2 until "
        "the stack runs with it",
    ]


@pytest.mark.parametrize(
    "command",
    [[*CLI, "serve", "pool"], [sys.executable, "-m", "mcp_pool_svc"]],
    ids=["toolscout serve pool", "python -m mcp_pool_svc"],
)
def test_one_service_on_a_taken_port_is_refused_before_its_servers_start(
    tmp_path: Path, command: list[str]
) -> None:
    started = tmp_path / "started"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = stack_config(
            tmp_path / "config.json", ports=(port, 0, 0), extra_servers={"marker": _start_marker(started)}
        )
        done = subprocess.run(
            [*command, "-c", str(config)],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=REPO_ROOT,
            check=False,
        )
    assert done.returncode == 2, done.stderr
    assert f"cannot listen on 127.0.0.1:{port} (pool gRPC): address already in use" in done.stderr
    assert "Traceback" not in done.stderr
    assert not started.exists()
