"""The gateway's token introspection (RFC 7662): active tokens for the gateway only, each answer kept
for the token's remaining life (bounded), refusals kept briefly, the provider's outage a refusal."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from mcp_gateway_svc.front import Tenant
from mcp_gateway_svc.metrics import GatewayMetrics
from mcp_gateway_svc.resource_server import OAuthResourceServer, Refusal
from toolscout_kit.config import GatewayOAuthSettings, IntrospectionAuth
from toolscout_kit.errors import ConfigError

ISSUER = "https://login.example.com"
GATEWAY = "https://gw.example.com"


class Provider:
    """An identity provider's introspection endpoint: token → its answer; counts the questions."""

    def __init__(self, now: float) -> None:
        self.now = now
        self.answers: dict[str, tuple[int, Any]] = {}
        self.asked: list[str] = []
        self.down = False

    def active(self, token: str, **claims: Any) -> None:
        body = {
            "active": True,
            "iss": ISSUER,
            "aud": f"{GATEWAY}/mcp",
            "sub": "alice",
            "exp": self.now + 600,
            "scope": "mcp:tools",
            **claims,
        }
        self.answers[token] = (200, body)

    async def __call__(self, token: str) -> tuple[int, Any]:
        self.asked.append(token)
        if self.down:
            raise httpx2.ConnectError("refused")
        return self.answers.get(token, (200, {"active": False}))


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _settings(**extra: Any) -> GatewayOAuthSettings:
    return GatewayOAuthSettings(
        issuer=ISSUER,
        audience=GATEWAY,
        required_scopes=["mcp:tools"],
        introspection_endpoint=f"{ISSUER}/token/introspection",
        introspection_client_id="gateway",
        introspection_client_secret_env="GATEWAY_INTROSPECTION_SECRET",
        **extra,
    )


def _server(provider: Provider, clock: Clock, **extra: Any) -> OAuthResourceServer:
    server = OAuthResourceServer(_settings(**extra), introspect=provider)
    assert server.introspector is not None
    server.introspector._clock = clock
    return server


async def test_an_active_token_for_the_gateway_is_its_subject_and_asked_once_for_its_life() -> None:
    clock = Clock()
    provider = Provider(clock.now)
    provider.active("opaque-1", exp=clock.now + 120)
    server = _server(provider, clock)
    for _ in range(3):
        assert await server.authenticate("Bearer opaque-1", "/mcp") == Tenant("oauth:alice", frozenset({"*"}))
    assert provider.asked == ["opaque-1"]
    clock.now += 121  # past its expiry: asked again (and now it is not active any more)
    del provider.answers["opaque-1"]
    assert isinstance(await server.authenticate("Bearer opaque-1", "/mcp"), Refusal)
    assert provider.asked == ["opaque-1", "opaque-1"]


async def test_an_answer_is_kept_at_most_introspection_cache_seconds() -> None:
    clock = Clock()
    provider = Provider(clock.now)
    provider.active("opaque-1")  # expires in 600 s
    server = _server(provider, clock, introspection_cache_seconds=60)
    await server.authenticate("Bearer opaque-1", "/mcp")
    clock.now += 61
    provider.answers["opaque-1"] = (200, {"active": False})  # revoked meanwhile
    refusal = await server.authenticate("Bearer opaque-1", "/mcp")
    assert isinstance(refusal, Refusal)
    assert refusal.status == 401
    assert len(provider.asked) == 2


@pytest.mark.parametrize(
    "claims",
    [
        {"active": False},
        {"iss": "https://elsewhere.example"},
        {"aud": "https://other-service.example/mcp"},
        {"aud": [f"{GATEWAY}/mcp/other-toolset"]},
        {"sub": None},
        {"exp": 1_000_000.0 - 3600},
    ],
    ids=["inactive", "other-issuer", "other-audience", "other-endpoint", "no-subject", "expired"],
)
async def test_tokens_not_active_for_this_endpoint_get_401_and_are_not_asked_about_again_at_once(
    claims: dict[str, Any],
) -> None:
    clock = Clock()
    provider = Provider(clock.now)
    provider.active("opaque-1", **claims)
    server = _server(provider, clock)
    for _ in range(2):
        refusal = await server.authenticate("Bearer opaque-1", "/mcp")
        assert isinstance(refusal, Refusal)
        assert refusal.status == 401
        assert 'error="invalid_token"' in dict(refusal.headers)[b"www-authenticate"].decode()
    assert provider.asked == ["opaque-1"]


async def test_too_little_scope_gets_403_and_claims_pick_toolsets() -> None:
    clock = Clock()
    provider = Provider(clock.now)
    provider.active("narrow", scope="openid")
    provider.active("planner", aud=f"{GATEWAY}/mcp/planning", groups=["planners"])
    server = _server(provider, clock, toolsets={"planners": ["planning"]}, default_toolsets=[])
    refusal = await server.authenticate("Bearer narrow", "/mcp")
    assert isinstance(refusal, Refusal)
    assert (refusal.status, refusal.reason) == (403, "insufficient_scope")
    tenant = await server.authenticate("Bearer planner", "/mcp/planning")
    assert tenant == Tenant("oauth:alice", frozenset({"planning"}))


async def test_an_unreachable_or_odd_provider_refuses_and_nothing_is_kept() -> None:
    clock = Clock()
    provider = Provider(clock.now)
    provider.active("opaque-1")
    server = _server(provider, clock)
    provider.down = True
    assert isinstance(await server.authenticate("Bearer opaque-1", "/mcp"), Refusal)
    provider.down = False
    provider.answers["odd"] = (500, {"error": "server_error"})
    assert isinstance(await server.authenticate("Bearer odd", "/mcp"), Refusal)
    # The outage was not kept: the next request asks again and passes.
    assert isinstance(await server.authenticate("Bearer opaque-1", "/mcp"), Tenant)


def test_the_client_secret_variable_must_be_set_and_the_keys_come_together() -> None:
    with pytest.raises(ConfigError, match="GATEWAY_INTROSPECTION_SECRET"):
        OAuthResourceServer(_settings(), environ={})
    assert OAuthResourceServer(_settings(), environ={"GATEWAY_INTROSPECTION_SECRET": "s"}).introspector
    with pytest.raises(ValueError, match="introspection_client_id"):
        GatewayOAuthSettings(issuer=ISSUER, audience=GATEWAY, introspection_endpoint=f"{ISSUER}/i")
    with pytest.raises(ValueError, match="without introspection_endpoint"):
        GatewayOAuthSettings(issuer=ISSUER, audience=GATEWAY, introspection_client_id="gateway")


def test_the_introspection_auth_method_decides_whether_a_secret_is_named() -> None:
    public = GatewayOAuthSettings(
        issuer=ISSUER,
        audience=GATEWAY,
        introspection_endpoint=f"{ISSUER}/i",
        introspection_client_id="gateway",
        introspection_auth="none",
    )
    assert public.introspection_auth is IntrospectionAuth.NONE
    # A public client needs no secret's variable at the start.
    assert OAuthResourceServer(public, environ={}).introspector is not None
    with pytest.raises(ValueError, match="sends no secret"):
        _settings(introspection_auth="none")
    with pytest.raises(ValueError, match="client_secret_post needs introspection_client_secret_env"):
        GatewayOAuthSettings(
            issuer=ISSUER,
            audience=GATEWAY,
            introspection_endpoint=f"{ISSUER}/i",
            introspection_client_id="gateway",
            introspection_auth="client_secret_post",
        )
    with pytest.raises(ValueError, match="without introspection_endpoint"):
        GatewayOAuthSettings(issuer=ISSUER, audience=GATEWAY, introspection_auth="none")
    with pytest.raises(ValueError, match="introspection_auth"):
        _settings(introspection_auth="private_key_jwt")


async def test_each_question_to_the_provider_is_counted_by_outcome_and_each_kept_answer_as_a_hit() -> None:
    clock = Clock()
    provider = Provider(clock.now)
    provider.active("opaque-1")
    registry = CollectorRegistry()
    server = OAuthResourceServer(_settings(), introspect=provider, metrics=GatewayMetrics(registry))
    assert server.introspector is not None
    server.introspector._clock = clock
    for token in ("opaque-1", "opaque-1", "never-issued", "never-issued", "never-issued"):
        await server.authenticate(f"Bearer {token}", "/mcp")
    provider.down = True
    for _ in range(2):
        assert isinstance(await server.authenticate("Bearer other", "/mcp"), Refusal)

    def sample(name: str, outcome: str) -> float | None:
        return registry.get_sample_value(f"toolscout_gateway_{name}", {"outcome": outcome})

    assert [sample("introspections_total", o) for o in ("active", "inactive", "error")] == [1, 1, 2]
    assert [sample("introspection_cache_hits_total", o) for o in ("active", "inactive")] == [1, 2]
    assert sample("introspection_duration_seconds_count", "error") == 2
    exposed = generate_latest(registry).decode()
    assert "opaque-1" not in exposed
    assert "never-issued" not in exposed
