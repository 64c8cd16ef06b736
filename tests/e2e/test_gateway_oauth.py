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
    OAuthGatewayStack,
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
) -> Iterator[tuple[OAuthGatewayStack, dict[str, str]]]:
    tmp = tmp_path_factory.mktemp("gateway-oauth")
    env = {"TOOLSCOUT_RUNTIME_DIR": str(tmp / "run")}
    with running_oauth_gateway(auth_server.issuer, tmp, env, metrics=True, log_level="DEBUG") as gateway:
        yield gateway, env


def _post(url: str, token: str | None = None) -> tuple[int, httpx2.Headers]:
    headers = {"Accept": "application/json, text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    answer = httpx2.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers=headers, timeout=30)
    return answer.status_code, answer.headers


def test_without_a_token_the_gateway_points_at_its_resource_metadata(
    gateway: tuple[OAuthGatewayStack, dict[str, str]], auth_server: AuthServer
) -> None:
    url = gateway[0].url
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
    gateway: tuple[OAuthGatewayStack, dict[str, str]], tmp_path: Path
) -> None:
    stack, env = gateway
    url = stack.url
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
    # Neither the host's tokens nor its client's secret in what the stack said: the services' log
    # lines (DEBUG), the CLI's output, every service's /metrics.
    secrets = [entry["tokens"][k] for k in ("access_token", "refresh_token") if entry["tokens"].get(k)]
    secrets += [entry["client"]["client_secret"]] if entry["client"].get("client_secret") else []
    metrics = "".join(httpx2.get(u, timeout=30).text for u in stack.metrics.values())
    assert "toolscout_gateway_requests_total" in metrics
    logs = stack.up.stderr + "".join(stack.up.lines)
    assert "/toolscout.discovery.v1.Discovery/Search" in logs  # the services' DEBUG lines of the call
    said = logs + done.stdout + done.stderr + metrics
    assert not [i for i, s in enumerate(secrets) if s in said]


def test_a_token_for_another_resource_is_refused(
    gateway: tuple[OAuthGatewayStack, dict[str, str]], auth_server: AuthServer, tmp_path: Path
) -> None:
    stack, env = gateway
    url = stack.url
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
