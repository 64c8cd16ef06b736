"""The gateway checks opaque tokens by introspection (RFC 7662) at a real authorization server (npm
``oidc-provider`` handing out opaque access tokens, with clients for the gateway that may
introspect, one per way of authenticating): the ``mcp`` SDK client finds the metadata, authorizes
and calls; the gateway asks the provider once per token for its life, counted in its metrics; a
token the provider does not know is refused; ``client_secret_post`` and a public client (``none``)
are answered as HTTP Basic is, and a client the provider does not accept is an ``error``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2
import pytest
import pytest_asyncio
from prometheus_client import CollectorRegistry, generate_latest

from mcp_gateway_svc.front import Tenant
from mcp_gateway_svc.metrics import GatewayMetrics
from mcp_gateway_svc.resource_server import OAuthResourceServer, Refusal
from tests.support.gateway import GatewayStack, gateway_stack
from tests.support.mcp_servers import example_server_config, free_port
from tests.support.oauth_servers import (
    AuthServer,
    IntrospectionClient,
    login_as,
    running_authorization_server,
)
from toolscout_kit.config import GatewayOAuthSettings, IntrospectionAuth, parse_config
from toolscout_kit.errors import ConfigError
from toolscout_kit.token_store import TokenStore

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

# Characters HTTP Basic must carry form-urlencoded (RFC 6749 section 2.3.1).
BASIC = IntrospectionClient("toolscout-gateway", "introspection:secret/01%23+4567 89")
POST = IntrospectionClient(
    "toolscout-gateway-post", "introspection-post-secret-9876543210", "client_secret_post"
)
PUBLIC = IntrospectionClient("toolscout-gateway-public", method="none")
SECRET_ENV = "GATEWAY_INTROSPECTION_SECRET"


@pytest.fixture(scope="module")
def auth_server() -> Iterator[AuthServer]:
    with running_authorization_server(
        account="bob", access_token_format="opaque", introspection_clients=[BASIC, POST, PUBLIC]
    ) as server:
        yield server


def _oauth(auth_server: AuthServer, port: int, client: IntrospectionClient, method: str | None = None) -> Any:
    oauth: dict[str, Any] = {
        "issuer": auth_server.issuer,
        "audience": f"http://127.0.0.1:{port}",
        "required_scopes": ["mcp:tools"],
        "introspection_endpoint": f"{auth_server.issuer}/token/introspection",
        "introspection_client_id": client.client_id,
        "introspection_auth": method or client.method,
    }
    if (method or client.method) != "none":
        oauth["introspection_client_secret_env"] = SECRET_ENV
    return oauth


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def gateway(
    auth_server: AuthServer, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[GatewayStack]:
    base = tmp_path_factory.mktemp("introspection")
    with pytest.MonkeyPatch.context() as env:
        env.setenv(SECRET_ENV, str(BASIC.secret))
        # The audience names the gateway's port, so it is picked before the start; another process
        # may take it in between (a loaded machine): a start refused for that is tried on another.
        for attempt in range(3):
            port = free_port()
            config = parse_config(
                {
                    "servers": {"weather": example_server_config("weather")},
                    "toolscout": {"gateway": {"oauth": _oauth(auth_server, port, BASIC)}},
                },
                base_dir=base,
            )
            try:
                async with gateway_stack(config, listen=f"127.0.0.1:{port}") as gw:
                    yield gw
                    return
            except ConfigError as err:
                if "cannot listen" not in str(err) or attempt == 2:
                    raise


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def opaque_token(gateway: GatewayStack, tmp_path_factory: pytest.TempPathFactory) -> str:
    """bob's token for the gateway, got as an MCP host gets it: 401 → the gateway's metadata →
    registration → code + PKCE → an opaque token (the retried request introspected it once)."""
    store = TokenStore(tmp_path_factory.mktemp("host") / "host-tokens.json")
    await login_as(gateway.url, store, "host", "bob")
    [(key, entry)] = store.entries()
    assert key.resource == gateway.url
    token = str(entry["tokens"]["access_token"])
    assert token.count(".") != 2  # opaque: no JWT the gateway could check itself
    return token


async def _ping(url: str, token: str) -> int:
    async with httpx2.AsyncClient(timeout=30) as http:
        answer = await http.post(
            url,
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={"accept": "application/json, text/event-stream", "authorization": f"Bearer {token}"},
        )
    return answer.status_code


def _sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(f"toolscout_gateway_{name}", labels) or 0.0


async def test_an_opaque_token_is_introspected_once_for_its_life_and_an_unknown_one_is_refused(
    gateway: GatewayStack,
    opaque_token: str,
    auth_server: AuthServer,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    registry = gateway.gateway.registry
    asked = auth_server.introspections()
    hits = _sample(registry, "introspection_cache_hits_total", outcome="active")
    for _ in range(3):
        assert await _ping(gateway.url, opaque_token) == 200
    # The login's retried request asked the provider; these three were answered from what it said.
    assert auth_server.introspections() == asked
    assert _sample(registry, "introspections_total", outcome="active") == 1
    assert _sample(registry, "introspection_cache_hits_total", outcome="active") == hits + 3
    assert await _ping(gateway.url, "not-a-token-the-provider-issued") == 401
    assert await _ping(gateway.url, "not-a-token-the-provider-issued") == 401
    # Asked once; the refusal was kept for the second.
    assert auth_server.introspections() == asked + 1
    assert _sample(registry, "introspections_total", outcome="inactive") == 1
    assert _sample(registry, "introspection_cache_hits_total", outcome="inactive") == 1
    assert _sample(registry, "introspections_total", outcome="error") == 0
    assert _sample(registry, "introspection_duration_seconds_count", outcome="active") == 1
    assert _sample(registry, "introspection_duration_seconds_count", outcome="inactive") == 1
    printed = capfd.readouterr()
    logs = caplog.text + printed.out + printed.err
    assert "gateway_token_refused" in logs  # the services' log lines are among what is checked
    said = logs + generate_latest(registry).decode()
    assert opaque_token not in said
    assert str(BASIC.secret) not in said


@pytest.mark.parametrize("client", [POST, PUBLIC], ids=["client_secret_post", "none"])
async def test_the_gateway_introspects_with_client_secret_post_or_as_a_public_client(
    client: IntrospectionClient,
    gateway: GatewayStack,
    opaque_token: str,
    auth_server: AuthServer,
    capfd: pytest.CaptureFixture[str],
) -> None:
    port = int(gateway.url.rsplit(":", 1)[1].split("/")[0])
    registry = CollectorRegistry()
    environ = {SECRET_ENV: client.secret} if client.secret else {}
    server = OAuthResourceServer(
        GatewayOAuthSettings.model_validate(_oauth(auth_server, port, client)),
        environ=environ,
        metrics=GatewayMetrics(registry),
    )
    asked = auth_server.introspections()
    assert await server.authenticate(f"Bearer {opaque_token}", "/mcp") == Tenant(
        "oauth:bob", frozenset({"*"})
    )
    assert await server.authenticate(f"Bearer {opaque_token}", "/mcp") == Tenant(
        "oauth:bob", frozenset({"*"})
    )
    assert isinstance(await server.authenticate("Bearer unknown-token", "/mcp"), Refusal)
    assert auth_server.introspections() == asked + 2
    assert _sample(registry, "introspections_total", outcome="active") == 1
    assert _sample(registry, "introspections_total", outcome="inactive") == 1
    assert _sample(registry, "introspections_total", outcome="error") == 0
    assert _sample(registry, "introspection_cache_hits_total", outcome="active") == 1
    printed = capfd.readouterr()
    said = printed.out + printed.err + generate_latest(registry).decode()
    assert "gateway_token_refused" in said
    assert opaque_token not in said
    assert not client.secret or client.secret not in said


async def test_a_client_the_provider_does_not_accept_is_an_error_each_time_and_never_kept(
    gateway: GatewayStack, opaque_token: str, auth_server: AuthServer, capfd: pytest.CaptureFixture[str]
) -> None:
    port = int(gateway.url.rsplit(":", 1)[1].split("/")[0])
    registry = CollectorRegistry()
    # A confidential client presenting itself as a public one: the provider holds it to its
    # registered method and refuses (401 invalid_client).
    settings = GatewayOAuthSettings.model_validate(_oauth(auth_server, port, POST, "none"))
    assert settings.introspection_auth is IntrospectionAuth.NONE
    server = OAuthResourceServer(settings, environ={}, metrics=GatewayMetrics(registry))
    for _ in range(2):
        refusal = await server.authenticate(f"Bearer {opaque_token}", "/mcp")
        assert isinstance(refusal, Refusal)
        assert refusal.status == 401
    assert _sample(registry, "introspections_total", outcome="error") == 2
    assert _sample(registry, "introspection_duration_seconds_count", outcome="error") == 2
    assert _sample(registry, "introspections_total", outcome="active") == 0
    printed = capfd.readouterr()
    said = printed.out + printed.err + generate_latest(registry).decode()
    assert "reason=IntrospectionError" in said or '"reason": "IntrospectionError"' in said
    # The operator learns why: the provider's status and error code.
    assert "gateway_introspection_failed" in said
    assert "answered 401 (invalid_client)" in said
    assert opaque_token not in said
