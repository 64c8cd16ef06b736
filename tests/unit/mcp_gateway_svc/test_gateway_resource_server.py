"""The gateway's OAuth resource-server checks: JWTs of the issuer, for the gateway, with the scope."""

from __future__ import annotations

import json
import time
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from mcp_gateway_svc.front import Tenant
from mcp_gateway_svc.resource_server import OAuthResourceServer, Refusal
from toolscout_kit.config import GatewayOAuthSettings

ISSUER = "https://login.example.com"
GATEWAY = "https://gw.example.com"


class Issuer:
    """Signs tokens; its JWKS can rotate."""

    def __init__(self) -> None:
        self.keys: dict[str, ec.EllipticCurvePrivateKey] = {"k1": ec.generate_private_key(ec.SECP256R1())}
        self.fetches = 0

    def rotate(self, kid: str) -> None:
        self.keys = {kid: ec.generate_private_key(ec.SECP256R1())}

    async def jwks(self) -> dict[str, Any]:
        self.fetches += 1
        keys = []
        for kid, key in self.keys.items():
            jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key()))
            keys.append({**jwk, "kid": kid, "use": "sig", "alg": "ES256"})
        return {"keys": keys}

    def token(self, kid: str | None = None, **claims: Any) -> str:
        kid = kid or next(iter(self.keys))
        body = {
            "iss": ISSUER,
            "aud": f"{GATEWAY}/mcp",
            "sub": "alice",
            "exp": int(time.time()) + 300,
            "scope": "mcp:tools",
            **claims,
        }
        return jwt.encode(body, self.keys[kid], algorithm="ES256", headers={"kid": kid})


def _server(issuer: Issuer, **settings: Any) -> OAuthResourceServer:
    config = GatewayOAuthSettings(issuer=ISSUER, audience=GATEWAY, required_scopes=["mcp:tools"], **settings)
    return OAuthResourceServer(config, fetch_jwks=issuer.jwks)


async def test_a_valid_token_is_its_subject_with_the_default_toolsets() -> None:
    issuer = Issuer()
    tenant = await _server(issuer).authenticate(f"Bearer {issuer.token()}", "/mcp")
    assert tenant == Tenant("oauth:alice", frozenset({"*"}))


async def test_claim_values_pick_toolsets() -> None:
    issuer = Issuer()
    server = _server(issuer, claim="groups", toolsets={"planners": ["planning"]}, default_toolsets=[])
    token = issuer.token(aud=f"{GATEWAY}/mcp/planning", groups=["planners", "other"])
    tenant = await server.authenticate(f"Bearer {token}", "/mcp/planning")
    assert tenant == Tenant("oauth:alice", frozenset({"planning"}))


@pytest.mark.parametrize(
    "claims",
    [
        {"exp": int(time.time()) - 3600},
        {"iss": "https://elsewhere.example"},
        {"aud": "https://other-service.example/mcp"},
        {"aud": f"{GATEWAY}/mcp/other-toolset"},
    ],
    ids=["expired", "other-issuer", "other-audience", "other-endpoint"],
)
async def test_tokens_not_for_this_endpoint_get_401_with_the_metadata_url(claims: dict[str, Any]) -> None:
    issuer = Issuer()
    refusal = await _server(issuer).authenticate(f"Bearer {issuer.token(**claims)}", "/mcp")
    assert isinstance(refusal, Refusal)
    assert refusal.status == 401
    challenge = dict(refusal.headers)[b"www-authenticate"].decode()
    assert f'resource_metadata="{GATEWAY}/.well-known/oauth-protected-resource/mcp"' in challenge
    assert 'error="invalid_token"' in challenge


async def test_no_token_gets_401_without_an_error_code() -> None:
    refusal = await _server(Issuer()).authenticate(None, "/mcp/planning")
    assert isinstance(refusal, Refusal)
    challenge = dict(refusal.headers)[b"www-authenticate"].decode()
    assert challenge == (
        f'Bearer resource_metadata="{GATEWAY}/.well-known/oauth-protected-resource/mcp/planning", '
        'scope="mcp:tools"'
    )


async def test_a_token_signed_with_another_key_or_hmac_is_refused() -> None:
    issuer, stranger = Issuer(), Issuer()
    assert isinstance(await _server(issuer).authenticate(f"Bearer {stranger.token()}", "/mcp"), Refusal)
    forged = jwt.encode(
        {"iss": ISSUER, "aud": f"{GATEWAY}/mcp", "sub": "mallory", "exp": int(time.time()) + 60},
        "a-shared-secret-of-at-least-32-bytes!",
        algorithm="HS256",
        headers={"kid": "k1"},
    )
    assert isinstance(await _server(issuer).authenticate(f"Bearer {forged}", "/mcp"), Refusal)


async def test_too_little_scope_gets_403_insufficient_scope_naming_it() -> None:
    issuer = Issuer()
    refusal = await _server(issuer).authenticate(f"Bearer {issuer.token(scope='openid')}", "/mcp")
    assert isinstance(refusal, Refusal)
    assert (refusal.status, refusal.reason) == (403, "insufficient_scope")
    challenge = dict(refusal.headers)[b"www-authenticate"].decode()
    assert 'error="insufficient_scope"' in challenge
    assert 'scope="mcp:tools"' in challenge


async def test_keys_are_cached_and_a_rotated_key_is_fetched_once() -> None:
    issuer = Issuer()
    server = _server(issuer)
    for _ in range(3):
        assert isinstance(await server.authenticate(f"Bearer {issuer.token()}", "/mcp"), Tenant)
    assert issuer.fetches == 1
    issuer.rotate("k2")
    server._fetched_at -= 60  # the refetch interval passed (the clock is the edge we move)
    assert isinstance(await server.authenticate(f"Bearer {issuer.token()}", "/mcp"), Tenant)
    assert issuer.fetches == 2
    # Unknown key ids right after a fetch do not fetch again.
    stranger = Issuer()
    stranger.rotate("k3")
    for _ in range(3):
        assert isinstance(await server.authenticate(f"Bearer {stranger.token()}", "/mcp"), Refusal)
    assert issuer.fetches == 2


def test_resource_metadata_names_the_issuer_per_endpoint() -> None:
    server = _server(Issuer())
    assert server.metadata_for("/.well-known/oauth-protected-resource") == {
        "resource": GATEWAY,
        "authorization_servers": [ISSUER],
        "bearer_methods_supported": ["header"],
        "scopes_supported": ["mcp:tools"],
    }
    per_path = server.metadata_for("/.well-known/oauth-protected-resource/mcp/planning")
    assert per_path is not None
    assert per_path["resource"] == f"{GATEWAY}/mcp/planning"
    assert server.metadata_for("/.well-known/openid-configuration") is None
