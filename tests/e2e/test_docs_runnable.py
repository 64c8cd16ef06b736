"""The documentation runs as written: every block marked runnable in README.md, clients/README.md
and deploy/README.md, and every command `toolscout up --walkthrough` (what `make up` runs) prints.

The stack is `toolscout up` on the example config itself, on free ports, with the LLM providers'
base URLs pointed at the fake provider through the variables the example config already reads
(`OPENAI_BASE_URL`, `OLLAMA_BASE_URL`) or the SDK reads (`ANTHROPIC_BASE_URL`). The commands then
run like in a reader's second terminal: bash from the repository root, with the project's virtual
environment *not* on PATH, reaching the stack through `TOOLSCOUT_*_TARGET` (which is how the
documented `-c examples/casual_mcp_config.json` finds a stack that is not on the default ports).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shlex
import subprocess
import sys
import sysconfig
from collections.abc import Iterator, Mapping
from operator import itemgetter
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli_stack import (
    ThreadedProvider,
    UpProcess,
    fixed_ports,
    stack_config,
    wait_for_search_mode,
)
from tests.support.discovery_catalogs import EXAMPLE_TOOLS
from tests.support.doc_blocks import DOCS, DocBlock, blocks, output_matches
from tests.support.fake_provider import FakeProvider, Reply
from tests.support.mcp_servers import REPO_ROOT
from tests.support.oauth_servers import (
    running_authorization_server,
    running_oauth_gateway,
    running_protected_server,
)

pytestmark = pytest.mark.e2e

EXAMPLE_CONFIG = REPO_ROOT / "examples" / "casual_mcp_config.json"
EXAMPLE_SERVERS = {"notes", "time", "weather", "text", "media"}
RUNNABLE = [b for path in DOCS for b in blocks(REPO_ROOT, path) if b.marker == "runnable"]
# The output a runnable block is documented to print (the block right after it), by block id.
OUTPUTS = {
    before.id: block
    for path in DOCS
    for before, block in itertools.pairwise(blocks(REPO_ROOT, path))
    if block.marker == "output"
}
# What a runnable block without an output block after it must print (stdout and stderr together),
# found by a text only that block contains: every runnable block is checked for what it shows, not
# only for its exit status (test_every_runnable_block_has_its_output_checked).
SHOWS: dict[str, tuple[str, ...]] = {
    'search "forecast for a city"': (
        "weather__get_forecast",  # the search's first match, described, then called
        "location",
        "Berlin forecast\nday 1: ",
        "\nday 2: ",
    ),
    'chat "What time is it in Tokyo?"': ("It is 9 in the evening in Tokyo.",),
    "source .venv/bin/activate": (
        "time__get_current_time",
        '"timezone": "Asia/Tokyo"',
        "weather__get_forecast",
        "It is 9 in the evening in Tokyo.",
    ),
    "TOOLSCOUT_GATEWAY_URL": (
        "revision: 2026-07-28",
        "found: weather__get_forecast",
        "Berlin forecast\nday 1: ",
    ),
    "uv pip install ./clients": ("toolscout-client==0.2.0",),
    "with PoolClient.connect(POOL) as pool:": ('"timezone": "UTC"', "It is 9 in the evening in Tokyo."),
    "weather__get_forcast": ("no such tool:", "weather__get_forecast"),
    "deploy/check.sh": ("deploy checks: 6 ok, 0 failing", " passed"),
    "OAUTH_GATEWAY_URL": (
        "HTTP/1.1 401 Unauthorized",
        'www-authenticate: Bearer resource_metadata="http://127.0.0.1:',
        '/.well-known/oauth-protected-resource/mcp", scope="mcp:tools"',
        '"authorization_servers": ["http://127.0.0.1:',
        "call search_tools: ok",
        "weather__get_forecast (server: weather",
    ),
}


def _shows(block: DocBlock) -> tuple[str, ...] | None:
    found = [texts for key, texts in SHOWS.items() if key in block.body]
    assert len(found) <= 1, f"{block.id}: more than one SHOWS key matches"
    return found[0] if found else None


SEARCH_MODE = (
    json.loads(EXAMPLE_CONFIG.read_text(encoding="utf-8"))
    .get("toolscout", {})
    .get("search", {})
    .get("mode", "bm25")
)


def example_config_copy(
    path: Path,
    ports: tuple[int, int, int] = (0, 0, 0),
    gateway_port: int = 0,
    *,
    discovery_metrics: bool = False,
    search: Mapping[str, Any] | None = None,
) -> Path:
    """examples/casual_mcp_config.json as it is, except where it listens (and, being elsewhere now,
    its relative paths made absolute); ``discovery_metrics`` serves discovery's metrics on a free
    port, ``search`` replaces ``toolscout.search``."""
    config = json.loads(EXAMPLE_CONFIG.read_text(encoding="utf-8"))
    for server in config["servers"].values():
        if "command" in server:
            server["cwd"] = str(EXAMPLE_CONFIG.parent / server.get("cwd", "."))
    settings = config.setdefault("toolscout", {})
    for name, port in zip(("pool", "discovery", "orchestrator"), ports, strict=True):
        metrics = 0 if discovery_metrics and name == "discovery" else -1
        settings.setdefault(name, {}).update(listen=f"127.0.0.1:{port}", metrics_port=metrics)
    settings.setdefault("gateway", {}).update(listen=f"127.0.0.1:{gateway_port}", metrics_port=-1)
    if search is not None:
        settings["search"] = dict(search)
    orchestrator = settings["orchestrator"]
    orchestrator["templates_dir"] = str(
        EXAMPLE_CONFIG.parent / orchestrator.get("templates_dir", "prompt-templates")
    )
    search = settings.get("search", {})
    if search.get("cache_dir"):
        search["cache_dir"] = str(path.parent / "embeddings")  # this test's own, not the repo's
    path.write_text(json.dumps(config, indent=2), encoding="utf-8")
    return path


def provider_env(fake: FakeProvider) -> dict[str, str]:
    return {
        "OPENAI_BASE_URL": fake.openai_base_url,
        "OPENAI_API_KEY": "test-key",
        "ANTHROPIC_BASE_URL": fake.anthropic_base_url,
        "ANTHROPIC_API_KEY": "test-key",
        "OLLAMA_BASE_URL": fake.openai_base_url,
    }


def reader_env(targets: Mapping[str, str] | None = None) -> dict[str, str]:
    """A second terminal: no virtual environment active or on PATH, no toolscout settings."""
    scripts = Path(sysconfig.get_path("scripts")).resolve()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"VIRTUAL_ENV", "UV_RUN_RECURSION_DEPTH", "PYTHONPATH"}
        # The test session's own runtime folder stays: a reader's `make up` elsewhere is not this stack.
        and (not k.startswith("TOOLSCOUT_") or k == "TOOLSCOUT_RUNTIME_DIR")
    }
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if p and Path(p).resolve() != scripts
    )
    for service, address in (targets or {}).items():
        if service == "console":
            continue  # a web page, not something the CLI or the MCP examples reach
        # The MCP front door is an HTTP URL, not a gRPC target.
        name = "TOOLSCOUT_GATEWAY_URL" if service == "gateway" else f"TOOLSCOUT_{service.upper()}_TARGET"
        env[name] = address
    return env


def run_shell(script: str, env: Mapping[str, str], timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        cwd=REPO_ROOT,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _answering(fake: FakeProvider) -> None:
    fake.responder = lambda _request: Reply.answer("It is 9 in the evening in Tokyo.")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    tmp = tmp_path_factory.mktemp("docs-stack")
    with ThreadedProvider() as fake:
        _answering(fake)
        # Started like `.venv/bin/toolscout up` from a plain terminal: the config's "python" servers
        # must still get the Python that has the MCP SDK.
        env = {**provider_env(fake), "PATH": reader_env()["PATH"]}
        config = example_config_copy(tmp / "casual_mcp_config.json", discovery_metrics=True)
        up = UpProcess(config, env=env)
        try:
            ready = up.next_event("ready", timeout=120)
            states = up.server_states(EXAMPLE_SERVERS, timeout=120)
            assert {s["state"] for s in states.values()} == {"ready"}, states
            # What the docs show is what the configured search mode answers: with hybrid search
            # the example's tools are embedded first.
            wait_for_search_mode(ready["metrics"]["discovery"], SEARCH_MODE, timeout=120)
            yield dict(ready["endpoints"])
        finally:
            code = up.stop()
        assert code == 0, up.stderr


@pytest.mark.parametrize("block", RUNNABLE, ids=[b.id for b in RUNNABLE])
def test_a_runnable_documentation_block_runs_as_written(
    block: DocBlock, stack: dict[str, str], tmp_path: Path
) -> None:
    env = reader_env(stack)
    with contextlib.ExitStack() as servers:
        if block.detail == "oauth-test-servers":
            # The README's OAuth example: the test authorization server and the MCP server behind it.
            auth_server = servers.enter_context(running_authorization_server())
            protected = servers.enter_context(running_protected_server(auth_server.issuer))
            env["OAUTH_TEST_SERVER_URL"] = protected.url
            env["TOOLSCOUT_TOKEN_FILE"] = str(tmp_path / "oauth-tokens.json")
        if block.detail == "oauth-gateway":
            # The README's gateway behind an identity provider: the test authorization server and a
            # stack whose gateway has gateway.oauth with it.
            auth_server = servers.enter_context(running_authorization_server())
            gateway = servers.enter_context(
                running_oauth_gateway(auth_server.issuer, tmp_path, {"TOOLSCOUT_RUNTIME_DIR": str(tmp_path)})
            )
            env["OAUTH_GATEWAY_URL"] = gateway.url
            env["TOOLSCOUT_TOKEN_FILE"] = str(tmp_path / "oauth-tokens.json")
        _run_block(block, env, tmp_path)


def _run_block(block: DocBlock, env: dict[str, str], tmp_path: Path) -> None:
    if block.detail == "app-venv":
        # The reader's own application's environment, activated.
        venv = tmp_path / "app-venv"
        made = subprocess.run(
            ["uv", "venv", "--quiet", "--python", sys.executable, str(venv)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert made.returncode == 0, made.stderr
        env["VIRTUAL_ENV"] = str(venv)
        env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
    if block.language == "python":
        script = tmp_path / "example.py"
        script.write_text(block.body, encoding="utf-8")
        done = subprocess.run(
            [sys.executable, str(script)],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    else:
        assert block.language in ("bash", "sh", "shell"), f"{block.id}: cannot run a {block.language!r} block"
        done = run_shell(block.body, env)
    report = f"{block.id} exited {done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    assert done.returncode == 0, report
    assert "Traceback" not in done.stderr, report
    shown = OUTPUTS.get(block.id)
    if shown is not None:
        assert output_matches(shown.body, done.stdout), f"{shown.id} shows:\n{shown.body}\n{report}"
    printed = done.stdout + done.stderr
    missing = [text for text in _shows(block) or () if text not in printed]
    assert missing == [], f"{block.id} did not print {missing}\n{report}"


@pytest.mark.parametrize("block", RUNNABLE, ids=[b.id for b in RUNNABLE])
def test_every_runnable_block_has_its_output_checked(block: DocBlock) -> None:
    assert block.id in OUTPUTS or _shows(block) is not None, (
        f"{block.id}: add an output block after it, or what it prints to SHOWS"
    )


def test_the_readme_mcp_host_example_searches_then_calls_through_call_tool(
    stack: dict[str, str], tmp_path: Path
) -> None:
    block = next(b for b in RUNNABLE if b.path == "README.md" and "TOOLSCOUT_GATEWAY_URL" in b.body)
    script = tmp_path / "example.py"
    script.write_text(block.body, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=REPO_ROOT,
        env=reader_env(stack),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "revision: 2026-07-28"
    tools = lines[1].removeprefix("tools: ").split(", ")
    # The example config's eager servers (notes, time), then the stable pair; weather is deferred.
    assert tools[-3:] == ["search_tools", "call_tool", "read_result"]
    assert {t.split("__")[0] for t in tools[:-3]} == {"notes", "time"}
    assert lines[2].startswith("found: weather__get_forecast")
    assert lines[3] == "Berlin forecast"
    assert lines[4].startswith("day 1: ")
    assert lines[5].startswith("day 2: ")
    assert lines[6] == "Error: The arguments do not fit what weather__get_forecast takes:"


def _printed_commands(lines: list[str]) -> list[str]:
    """The `$ command` lines, and the command under each "Example:" heading."""
    commands = [line[2:] for line in lines if line.startswith("$ ")]
    commands += [lines[i + 1].strip() for i, line in enumerate(lines[:-1]) if line == "Example:"]
    return commands


_WALKTHROUGH_COMMANDS = {"servers", "tools", "manifest", "search", "describe", "call", "tokens", "chat"}


@pytest.mark.parametrize("shards", [1, 3], ids=["one pool", "3 pool shards"])
def test_every_command_the_walkthrough_prints_runs_as_printed(tmp_path: Path, shards: int) -> None:
    with ThreadedProvider() as fake:
        _answering(fake)
        # Fixed (free) ports, like `make up`: the printed commands then find the stack through the
        # config, exactly as a reader's would. Shards listen on free ports: the printed commands
        # then carry every shard's address (--pool-target A,B,C).
        config = example_config_copy(tmp_path / "casual_mcp_config.json", fixed_ports())
        extra = ["--pool-shards", str(shards)] if shards > 1 else []
        up = UpProcess(config, "--walkthrough", *extra, env=provider_env(fake), json_output=False)
        try:
            printed = up.wait_for_line("The stack keeps running", timeout=180)
            commands = _printed_commands(printed)
            program = shlex.split(commands[0])[0]
            assert program == ".venv/bin/toolscout", printed  # what a new terminal can run
            shown = {next(w for w in shlex.split(c) if w in _WALKTHROUGH_COMMANDS) for c in commands}
            assert shown == _WALKTHROUGH_COMMANDS, printed
            results = {command: run_shell(command, reader_env(), timeout=60) for command in commands}
            # Every server's tools answer through the printed prefix, whichever shard runs them.
            prefix = commands[0][: commands[0].index(" servers")]
            servers = json.loads(run_shell(f"{prefix} servers --json", reader_env(), timeout=60).stdout)
            calls = {
                name: run_shell(f"{prefix} call {name} --args '{args}'", reader_env(), timeout=60)
                for name, args in _ONE_CALL_PER_SERVER.items()
            }
        finally:
            code = up.stop()
    assert code == 0, up.stderr
    failed = {c: f"{r.returncode}: {r.stderr}" for c, r in results.items() if r.returncode != 0}
    assert failed == {}, "\n".join(printed)
    assert "It is 9 in the evening in Tokyo." in next(r.stdout for c, r in results.items() if " chat " in c)
    assert sorted(s["name"] for s in servers["servers"]) == sorted(
        {n.split("__")[0] for n in _ONE_CALL_PER_SERVER}
    )
    assert {n: (r.returncode, r.stderr) for n, r in calls.items()} == dict.fromkeys(
        _ONE_CALL_PER_SERVER, (0, "")
    )


def test_the_walkthrough_asks_for_no_key_when_the_clients_base_url_makes_it_optional(tmp_path: Path) -> None:
    # OPENAI_BASE_URL points the example's OpenAI clients at an OpenAI-compatible server (here the
    # fake): no OPENAI_API_KEY is needed, so the walkthrough must not ask for one, and the chat it
    # prints answers.
    with ThreadedProvider() as fake:
        _answering(fake)
        config = example_config_copy(tmp_path / "casual_mcp_config.json", fixed_ports())
        env = {"OPENAI_BASE_URL": fake.openai_base_url, "OPENAI_API_KEY": "", "ANTHROPIC_API_KEY": ""}
        up = UpProcess(config, "--walkthrough", env=env, json_output=False)
        try:
            printed = up.wait_for_line("The stack keeps running", timeout=180)
            chat = next(c for c in _printed_commands(printed) if " chat " in c)
            answered = run_shell(chat, reader_env(), timeout=60)
        finally:
            code = up.stop()
    assert code == 0, up.stderr
    assert " --model gpt-4.1" in chat
    assert not [line for line in printed if "OPENAI_API_KEY" in line], "\n".join(printed)
    assert answered.returncode == 0, answered.stderr
    assert "It is 9 in the evening in Tokyo." in answered.stdout


# One call to a tool of every server of the example config.
_ONE_CALL_PER_SERVER = {
    "time__get_current_time": '{"timezone": "UTC"}',
    "weather__list_cities": "{}",
    "notes__list_tasks": "{}",
    "text__reverse": '{"text": "abc"}',
    "media__swatch_image": '{"color": "#ff0000"}',
}


def test_up_for_a_person_prints_state_lines_and_keeps_logs_out_of_the_terminal(tmp_path: Path) -> None:
    broken = {
        "command": sys.executable,
        "args": ["-c", "import sys; print('boom', file=sys.stderr); sys.exit(3)"],
    }
    config = stack_config(tmp_path / "config.json", extra_servers={"broken": broken})
    log = tmp_path / "up.log"
    up = UpProcess(config, "--log-file", str(log), json_output=False)
    try:
        up.wait_for_line("Ctrl-C stops everything", timeout=120)
        # The pool retries the server with backoff; the terminal shows the state, not each retry.
        lines = up.wait_for_line(lambda line: line.split()[1:3] == ["broken", "reconnecting"], timeout=60)
    finally:
        code = up.stop()
    assert code == 0, up.stderr
    assert not [line for line in up.lines if line.lstrip().startswith("{")], up.lines
    assert up.stderr == ""
    assert lines[-1].split()[0] == "…"
    assert [line.rstrip("\n") for line in up.lines[-2:]] == [
        "stopping… (what is in flight gets up to 10 s)",
        "stopped.",
    ]
    logged = log.read_text()
    assert "boom" in logged  # the server's own stderr
    assert '"level": "warning"' in logged
    # What the first line and the README say the file holds is what it holds.
    assert up.lines[0].rstrip("\n") == f"logs (INFO and up, MCP servers' stderr): {log}"
    assert '"level": "info"' in logged
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert "Logs (INFO and up, and the MCP servers' stderr) go to the file" in readme


def _section(lines: list[str], start: str, end: str) -> list[str]:
    first = next(i for i, line in enumerate(lines) if line.startswith(start))
    last = next(i for i, line in enumerate(lines) if i > first and line.startswith(end))
    return lines[first:last]


def test_the_walkthrough_searches_the_same_with_a_cold_and_a_warm_embedding_cache(tmp_path: Path) -> None:
    # The example config in hybrid mode: the first start embeds the tools (searches answer with
    # BM25 until then), the second finds every vector in the cache. The walkthrough waits for the
    # configured ranking either way, so a reader sees the same search both times.
    cache = tmp_path / "embeddings"
    shown: list[list[str]] = []
    for _run in ("cold", "warm"):
        config = example_config_copy(
            tmp_path / "casual_mcp_config.json",
            fixed_ports(),
            search={"mode": "hybrid", "cache_dir": str(cache)},
        )
        with ThreadedProvider() as fake:
            up = UpProcess(config, "--walkthrough", env=provider_env(fake), json_output=False)
            try:
                printed = up.wait_for_line("The stack keeps running", timeout=180)
            finally:
                code = up.stop()
        assert code == 0, up.stderr
        shown.append(_section(printed, "── A search", "── A tool call"))
    assert shown[0] == shown[1]
    assert any("ranked by hybrid" in line for line in shown[0]), shown[0]


def test_the_example_catalog_that_search_is_measured_on_is_what_the_example_servers_list(
    stack: dict[str, str],
) -> None:
    # bench/retrieval.py and the example-catalog search tests read bench/data/example.tools.jsonl.
    done = run_shell(".venv/bin/toolscout -c examples/casual_mcp_config.json tools --json", reader_env(stack))
    assert done.returncode == 0, done.stderr
    live = [
        {
            "server": t["server"],
            "name": t["tool"],
            "description": t["description"],
            "input_schema": t["input_schema"],
        }
        for t in json.loads(done.stdout)["tools"]
    ]
    saved = [
        json.loads(line) for line in EXAMPLE_TOOLS.read_text(encoding="utf-8").splitlines() if line.strip()
    ]
    key = itemgetter("server", "name")
    assert sorted(live, key=key) == sorted(saved, key=key)
