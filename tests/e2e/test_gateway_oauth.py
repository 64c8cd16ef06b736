"""The gateway as an OAuth 2.1 resource server, found and used by the ``mcp`` SDK client's OAuth
support (``toolscout connect``), with tokens from a real authorization server (npm
``oidc-provider``) that approves without a person."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from tests.support.cli_stack import run_cli
from tests.support.oauth_servers import (
    AuthServer,
    running_authorization_server,
    running_oauth_gateway,
    running_protected_server,
)
from toolscout_kit.token_store import TokenStore

pytestmark = [pytest.mark.e2e]


@pytest.fixture(scope="module")
def auth_server() -> Iterator[AuthServer]:
    with running_authorization_server(account="bob") as server:
        yield server


@pytest.fixture(scope="module")
def gateway(
    auth_server: AuthServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, dict[str, str]]]:
    tmp = tmp_path_factory.mktemp("gateway-oauth")
    env = {"TOOLSCOUT_RUNTIME_DIR": str(tmp / "run")}
    with running_oauth_gateway(auth_server.issuer, tmp, env) as gateway:
        yield gateway.url, env


def _post(url: str, token: str | None = None) -> tuple[int, httpx2.Headers]:
    headers = {"Accept": "application/json, text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    answer = httpx2.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers=headers, timeout=30)
    return answer.status_code, answer.headers


def test_without_a_token_the_gateway_points_at_its_resource_metadata(
    gateway: tuple[str, dict[str, str]], auth_server: AuthServer
) -> None:
    url, _env = gateway
    status, headers = _post(url)
    assert status == 401
    origin = url.rsplit("/mcp", 1)[0]
    metadata_url = f"{origin}/.well-known/oauth-protected-resource/mcp"
    assert headers["www-authenticate"] == f'Bearer resource_metadata="{metadata_url}", scope="mcp:tools"'
    metadata = httpx2.get(metadata_url, timeout=30).json()
    assert metadata["resource"] == url
    assert metadata["authorization_servers"] == [auth_server.issuer]
    assert metadata["scopes_supported"] == ["mcp:tools"]


def test_the_sdk_client_discovers_authorizes_and_uses_the_gateway(
    gateway: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    url, env = gateway
    token_file = tmp_path / "t.json"
    done = run_cli(
        "connect",
        url,
        "--headless",
        "--call",
        "search_tools",
        "--args",
        '{"query": "forecast"}',
        env={**env, "TOOLSCOUT_TOKEN_FILE": str(token_file)},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "search_tools" in done.stdout
    assert "call_tool" in done.stdout
    assert "weather__get_forecast" in done.stdout
    [(key, entry)] = TokenStore(token_file).entries()
    assert key.resource == url
    # The token works for the gateway only: another resource's token is refused.
    status, _headers = _post(url, entry["tokens"]["access_token"])
    assert status == 200


def test_a_token_for_another_resource_is_refused(
    gateway: tuple[str, dict[str, str]], auth_server: AuthServer, tmp_path: Path
) -> None:
    url, env = gateway
    token_file = tmp_path / "t.json"
    with running_protected_server(auth_server.issuer) as other:
        done = run_cli(
            "connect",
            other.url,
            "--headless",
            env={**env, "TOOLSCOUT_TOKEN_FILE": str(token_file)},
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
    [(_key, entry)] = TokenStore(token_file).entries()
    status, headers = _post(url, entry["tokens"]["access_token"])
    assert status == 401
    assert 'error="invalid_token"' in headers["www-authenticate"]
