"""The pool and the CLI as OAuth 2.1 clients, against a real authorization server (npm
``oidc-provider``: dynamic registration, PKCE, resource indicators, refresh tokens) in front of an
MCP server that validates its tokens with the ``mcp`` SDK's resource-server side.

The authorization server approves without a person, so everything authorizes headlessly.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import pytest
from cryptography.fernet import Fernet

from mcp_pool_svc.pool import McpPool
from mcp_pool_svc.supervisor import ServerState
from tests.support.cli_stack import CLI, UpProcess, run_cli
from tests.support.mcp_servers import REPO_ROOT, free_port
from tests.support.oauth_servers import (
    AuthServer,
    ProtectedServer,
    running_authorization_server,
    running_protected_server,
)
from toolscout_kit.config import parse_config
from toolscout_kit.token_store import STACK_PRINCIPAL, TokenStore

pytestmark = [pytest.mark.e2e]


@pytest.fixture(scope="module")
def auth_server() -> Iterator[AuthServer]:
    with running_authorization_server(account="alice") as server:
        yield server


@pytest.fixture(scope="module")
def protected(auth_server: AuthServer) -> Iterator[ProtectedServer]:
    with running_protected_server(auth_server.issuer) as server:
        yield server


def _secrets(store: TokenStore) -> list[str]:
    """Every token and client secret the store holds."""
    found = []
    for _key, entry in store.entries():
        tokens = entry.get("tokens") or {}
        found += [tokens[k] for k in ("access_token", "refresh_token") if tokens.get(k)]
        if (entry.get("client") or {}).get("client_secret"):
            found.append(entry["client"]["client_secret"])
    return found


def _config(path: Path, url: str, **auth: Any) -> Path:
    path.write_text(json.dumps({"servers": {"protected": {"url": url, "auth": {"type": "oauth", **auth}}}}))
    return path


def test_connect_authorizes_headlessly_lists_and_calls(protected: ProtectedServer, tmp_path: Path) -> None:
    token_file = tmp_path / "state" / "oauth-tokens.json"
    done = run_cli(
        "connect",
        protected.url,
        "--headless",
        "--call",
        "whoami",
        env={"TOOLSCOUT_TOKEN_FILE": str(token_file)},
    )
    assert done.returncode == 0, done.stderr
    assert "revision: " in done.stdout
    assert "  whoami  Who the caller's token says it is." in done.stdout
    assert "subject: alice" in done.stdout
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    store = TokenStore(token_file)
    [(key, entry)] = store.entries()
    assert (key.principal, key.resource) == (STACK_PRINCIPAL, protected.url)
    assert entry["tokens"]["refresh_token"]
    secrets = _secrets(store)
    assert secrets
    assert not [s for s in secrets if s in done.stdout + done.stderr]


def test_connect_says_in_one_line_when_the_tool_does_not_exist(
    protected: ProtectedServer, tmp_path: Path
) -> None:
    env = {"TOOLSCOUT_TOKEN_FILE": str(tmp_path / "t.json")}
    done = run_cli("connect", protected.url, "--headless", "--call", "whoamı", env=env)
    assert done.returncode == 3
    assert done.stderr.count("\n") == 1
    assert "whoami" in done.stderr


async def test_the_pool_refreshes_an_expired_token_once_and_never_reauthorizes(
    auth_server: AuthServer, protected: ProtectedServer, tmp_path: Path
) -> None:
    key = Fernet.generate_key().decode()
    env = {"TOOLSCOUT_TOKEN_FILE": str(tmp_path / "t.json"), "TOOLSCOUT_TOKEN_KEY": key}
    config = parse_config({"servers": {"protected": {"url": protected.url, "auth": {"headless": True}}}})
    pool = McpPool(config, environ=env)
    await pool.start(wait=60)
    try:
        result = await pool.call_tool(server="protected", tool="whoami", arguments={})
        assert result.content[0].text == "subject: alice"
    finally:
        await pool.stop()
    store = TokenStore.from_env(env)
    assert b"access_token" not in store.path.read_bytes()  # encrypted at rest
    codes, refreshes = auth_server.grants("authorization_code"), auth_server.grants("refresh_token")
    # The token expired meanwhile (as far as the client knows: its clock is the edge we move).
    [(entry_key, _entry)] = store.entries()
    store.update(entry_key, {"expires_at": 1.0})
    pool = McpPool(config, environ=env)
    await pool.start(wait=60)
    try:
        result = await pool.call_tool(server="protected", tool="whoami", arguments={})
        assert result.content[0].text == "subject: alice"
    finally:
        await pool.stop()
    assert auth_server.grants("refresh_token") == refreshes + 1
    assert auth_server.grants("authorization_code") == codes


async def test_without_a_stored_authorization_the_pool_says_to_log_in_and_login_fixes_it(
    protected: ProtectedServer, tmp_path: Path
) -> None:
    env = {"TOOLSCOUT_TOKEN_FILE": str(tmp_path / "t.json"), "TOOLSCOUT_CONFIG": ""}
    config_file = _config(tmp_path / "config.json", protected.url)
    pool = McpPool(parse_config(json.loads(config_file.read_text())), environ=env)
    await pool.start(wait=60)
    try:
        [status] = pool.list_servers()
        assert status.state is not ServerState.READY
        assert "needs an authorization: run `toolscout auth login protected`" in status.last_error
    finally:
        await pool.stop()

    done = run_cli("auth", "status", "-c", str(config_file), "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["servers"][0]["authorized"] is False

    done = run_cli("auth", "login", "protected", "--headless", "-c", str(config_file), env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "protected: authorized (1 tools)"

    done = run_cli("auth", "status", "-c", str(config_file), "--json", env=env)
    [row] = json.loads(done.stdout)["servers"]
    assert (row["server"], row["authorized"], row["refreshable"], row["scope"]) == (
        "protected",
        True,
        True,
        "mcp:tools",
    )
    secrets = _secrets(TokenStore.from_env(env))
    assert not [s for s in secrets if s in done.stdout]

    done = run_cli("auth", "logout", "protected", "-c", str(config_file), env=env)
    assert (done.returncode, done.stdout.strip()) == (0, "protected: logged out")
    assert TokenStore.from_env(env).entries() == []


def test_toolscout_up_authorizes_calls_and_leaks_no_secret(
    protected: ProtectedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLSCOUT_RUNTIME_DIR", str(tmp_path / "run"))
    env = {
        "TOOLSCOUT_TOKEN_FILE": str(tmp_path / "t.json"),
        "TOOLSCOUT_TOKEN_KEY": Fernet.generate_key().decode(),
        "TOOLSCOUT_RUNTIME_DIR": str(tmp_path / "run"),
    }
    config_file = tmp_path / "config.json"
    config_file.write_text(
        json.dumps(
            {
                "servers": {"protected": {"url": protected.url, "auth": {"type": "oauth", "headless": True}}},
                "toolscout": {
                    service: {"listen": "127.0.0.1:0", "metrics_port": 0 if service == "pool" else -1}
                    for service in ("pool", "discovery", "orchestrator", "gateway")
                },
            }
        )
    )
    log_file = tmp_path / "stack.log"
    up = UpProcess(config_file, "--log-file", str(log_file), "--log-level", "DEBUG", env=env)
    try:
        ready = up.next_event("ready", timeout=120)
        states = up.server_states({"protected"}, timeout=60)
        assert states["protected"]["state"] == "ready", states
        done = run_cli("call", "protected__whoami", "-c", str(config_file), env=env)
        assert done.returncode == 0, done.stderr
        assert "subject: alice" in done.stdout
        metrics = httpx2.get(ready["metrics"]["pool"], timeout=30).text
        assert 'server="protected"' in metrics
    finally:
        up.stop()
    secrets = _secrets(TokenStore.from_env(env))
    assert secrets
    seen = log_file.read_text() + "".join(up.lines) + up.stderr + done.stdout + done.stderr + metrics
    assert "protected" in log_file.read_text()  # the log was written
    assert not [s for s in secrets if s in seen]


async def test_a_running_pool_refreshes_before_the_token_expires(tmp_path: Path) -> None:
    # Tokens that live 12 s: the pool's health pings reach the server after the refresh point
    # (a tenth of the lifetime before expiry), so a refresh must happen with no call at all.
    with (
        running_authorization_server(account="carol", access_token_ttl=12) as short,
        running_protected_server(short.issuer) as server,
    ):
        env = {"TOOLSCOUT_TOKEN_FILE": str(tmp_path / "t.json")}
        config = parse_config({"servers": {"short": {"url": server.url, "auth": {"headless": True}}}})
        pool = McpPool(config, environ=env)
        await pool.start(wait=60)
        try:
            first = await pool.call_tool(server="short", tool="whoami", arguments={})
            assert first.content[0].text == "subject: carol"
            await anyio.to_thread.run_sync(
                lambda: short.lines.wait_for(
                    lambda i: i.get("event") == "grant" and i.get("grant_type") == "refresh_token", 60
                )
            )
            again = await pool.call_tool(server="short", tool="whoami", arguments={})
            assert again.content[0].text == "subject: carol"
            [status] = pool.list_servers()
            assert status.restarts == 0
        finally:
            await pool.stop()
        assert short.grants("authorization_code") == 1
        assert short.grants("refresh_token") >= 1


def test_auth_login_waits_for_the_browsers_redirect_on_the_loopback(
    protected: ProtectedServer, tmp_path: Path
) -> None:
    env = {**os.environ, "TOOLSCOUT_TOKEN_FILE": str(tmp_path / "t.json")}
    env.pop("TOOLSCOUT_CONFIG", None)
    # A port of its own (auth.redirect_uri): the default 33418 lies in the kernel's ephemeral range,
    # where any outgoing connection of the test run can hold it at that moment.
    redirect = f"http://127.0.0.1:{free_port()}/callback"
    config_file = _config(tmp_path / "config.json", protected.url, redirect_uri=redirect)
    login = subprocess.Popen(
        [*CLI, "auth", "login", "protected", "--no-browser", "-c", str(config_file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO_ROOT,
    )
    try:
        assert login.stderr is not None
        line = login.stderr.readline()  # blocks until the CLI prints the URL (bounded by its own timeout)
        assert line.startswith("toolscout: authorize at: "), line
        url = line.removeprefix("toolscout: authorize at: ").strip()
        assert parse_qs(urlsplit(url).query)["redirect_uri"] == [redirect]
        # The person's browser: the authorization server approves, then redirects to the CLI.
        with httpx2.Client(follow_redirects=True, timeout=30) as browser:
            page = browser.get(url)
        assert page.status_code == 200
        assert "authorized" in page.text
        out, err = login.communicate(timeout=60)
    finally:
        if login.poll() is None:
            login.kill()
            login.communicate(timeout=10)
    assert login.returncode == 0, err
    assert out.strip() == "protected: authorized (1 tools)"
