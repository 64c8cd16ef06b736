"""The gateway checks opaque tokens by introspection (RFC 7662) at a real authorization server (npm
``oidc-provider`` handing out opaque access tokens, with a client for the gateway that may
introspect): the ``mcp`` SDK client finds the metadata, authorizes and calls; the gateway asks the
provider once per token for its life; a token the provider does not know is refused."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from prometheus_client import generate_latest

from tests.support.gateway import GatewayStack, gateway_stack
from tests.support.mcp_servers import example_server_config, free_port
from tests.support.oauth_servers import AuthServer, login_as, running_authorization_server
from toolscout_kit.config import parse_config
from toolscout_kit.errors import ConfigError
from toolscout_kit.token_store import TokenStore

pytestmark = [pytest.mark.e2e]

CLIENT = ("toolscout-gateway", "introspection-secret-0123456789")
SECRET_ENV = "GATEWAY_INTROSPECTION_SECRET"


@pytest.fixture(scope="module")
def auth_server() -> Iterator[AuthServer]:
    with running_authorization_server(
        account="bob", access_token_format="opaque", introspection_client=CLIENT
    ) as server:
        yield server


def _config(auth_server: AuthServer, port: int, base: Path) -> Any:
    return parse_config(
        {
            "servers": {"weather": example_server_config("weather")},
            "toolscout": {
                "gateway": {
                    "oauth": {
                        "issuer": auth_server.issuer,
                        "audience": f"http://127.0.0.1:{port}",
                        "required_scopes": ["mcp:tools"],
                        "introspection_endpoint": f"{auth_server.issuer}/token/introspection",
                        "introspection_client_id": CLIENT[0],
                        "introspection_client_secret_env": SECRET_ENV,
                    }
                }
            },
        },
        base_dir=base,
    )


@pytest.fixture
async def gateway(
    auth_server: AuthServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[GatewayStack]:
    monkeypatch.setenv(SECRET_ENV, CLIENT[1])
    # The audience names the gateway's port, so it is picked before the start; another process may
    # take it in between (a loaded machine): a start refused for that is tried on another.
    for attempt in range(3):
        port = free_port()
        try:
            async with gateway_stack(_config(auth_server, port, tmp_path), listen=f"127.0.0.1:{port}") as gw:
                yield gw
                return
        except ConfigError as err:
            if "cannot listen" not in str(err) or attempt == 2:
                raise


async def _ping(url: str, token: str) -> int:
    async with httpx2.AsyncClient(timeout=30) as http:
        answer = await http.post(
            url,
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={"accept": "application/json, text/event-stream", "authorization": f"Bearer {token}"},
        )
    return answer.status_code


async def test_an_opaque_token_is_introspected_once_for_its_life_and_an_unknown_one_is_refused(
    gateway: GatewayStack,
    auth_server: AuthServer,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    store = TokenStore(tmp_path / "host-tokens.json")
    asked = auth_server.introspections()
    # The SDK client: 401 → the gateway's metadata → registration → code + PKCE → an opaque token.
    await login_as(gateway.url, store, "host", "bob")
    [(key, entry)] = store.entries()
    assert key.resource == gateway.url
    token = entry["tokens"]["access_token"]
    assert token.count(".") != 2  # opaque: no JWT the gateway could check itself
    for _ in range(3):
        assert await _ping(gateway.url, token) == 200
    # The login's own request and three more: the provider was asked once.
    assert auth_server.introspections() == asked + 1
    assert await _ping(gateway.url, "not-a-token-the-provider-issued") == 401
    assert auth_server.introspections() == asked + 2
    printed = capfd.readouterr()
    logs = caplog.text + printed.out + printed.err
    assert "gateway_token_refused" in logs  # the services' log lines are among what is checked
    said = logs + generate_latest(gateway.gateway.registry).decode()
    assert token not in said
    assert CLIENT[1] not in said
