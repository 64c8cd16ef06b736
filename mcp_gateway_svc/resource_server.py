"""The gateway as an OAuth 2.1 resource server (``toolscout.gateway.oauth``), beside static tokens.

MCP hosts find how to authorize from the gateway itself: a request without a valid token gets
401 with ``WWW-Authenticate: Bearer resource_metadata="…"``, and the protected resource metadata
(RFC 9728) is served at ``/.well-known/oauth-protected-resource`` and, per endpoint, at
``/.well-known/oauth-protected-resource/mcp[/<toolset>]``, naming the issuer. A token is a JWT of
that issuer: signature against the issuer's JWKS (fetched from its metadata, cached, fetched again
for a key id it does not know, so a rotation needs no restart), ``iss``, ``aud`` (the gateway's
URL or the endpoint's), expiry, and the required scopes (403 ``insufficient_scope`` naming them
otherwise). With ``introspection_endpoint`` set, the identity provider is asked about each token
instead (RFC 7662, :mod:`mcp_gateway_svc.introspection`: opaque tokens, answers kept for the
token's life). The principal is the token's ``sub``; claims pick the toolsets. The token itself is
never passed on: the gateway calls the stack with its own credentials.

The SDK has the pieces for an MCP server of its own (``mcp.server.auth``: a bearer middleware
around one Starlette app with one resource URL); the gateway has many endpoints, each its own
resource, behind a front that also serves static tokens, so this module does the checks with
PyJWT and the front asks it (:meth:`OAuthResourceServer.authenticate`).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2
import jwt

from mcp_gateway_svc.front import Tenant
from mcp_gateway_svc.introspection import Ask, IntrospectionError, Introspector, TokenInactiveError
from mcp_gateway_svc.metrics import GatewayMetrics
from toolscout_kit.config import GatewayOAuthSettings
from toolscout_kit.logging import get_logger

__all__ = ["METADATA_PATH", "OAuthResourceServer", "Refusal"]

METADATA_PATH = "/.well-known/oauth-protected-resource"
# Asymmetric algorithms only: an HS* token would be checked against a public key as a secret.
_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]
# An unknown key id fetches the keys again at most this often (a flood of bad tokens must not
# become a flood of requests to the identity provider).
_REFETCH_INTERVAL = 30.0
_FETCH_TIMEOUT = 10.0
log = get_logger(__name__)

JwksFetcher = Callable[[], Awaitable[dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class Refusal:
    """An HTTP refusal: 401 (no valid token) or 403 (too little scope), with its challenge."""

    status: int
    reason: str
    message: str
    headers: tuple[tuple[bytes, bytes], ...]


class OAuthResourceServer:
    """Checks bearer JWTs for the gateway's endpoints and serves their resource metadata."""

    def __init__(
        self,
        settings: GatewayOAuthSettings,
        *,
        fetch_jwks: JwksFetcher | None = None,
        environ: Mapping[str, str] | None = None,
        introspect: Ask | None = None,
        metrics: GatewayMetrics | None = None,
    ) -> None:
        """Raises:
        ConfigError: introspection is configured and its client secret's variable is not set."""
        self._settings = settings
        self._issuer = settings.issuer.rstrip("/")
        self._audience = settings.audience.rstrip("/")
        self._fetch = fetch_jwks or self._fetch_from_issuer
        self.introspector = (
            Introspector(
                settings,
                environ=os.environ if environ is None else environ,
                ask=introspect,
                metrics=metrics.introspections if metrics is not None else None,
            )
            if settings.introspection_endpoint is not None
            else None
        )
        self._keys: dict[str, jwt.PyJWK] = {}
        self._fetched_at = float("-inf")
        self._lock = anyio.Lock()

    # --- resource metadata (RFC 9728) -------------------------------------------------------

    def resource_of(self, path: str) -> str:
        """The resource a request path belongs to: the endpoint's URL (``/mcp``, ``/mcp/<toolset>``)."""
        return self._audience + path.rstrip("/")

    def metadata_for(self, path: str) -> dict[str, Any] | None:
        """The metadata document served at ``path``, or None when ``path`` is not a metadata path."""
        if path.rstrip("/") == METADATA_PATH:
            resource = self._audience
        elif path.startswith(METADATA_PATH + "/mcp"):
            resource = self.resource_of(path[len(METADATA_PATH) :])
        else:
            return None
        document: dict[str, Any] = {
            "resource": resource,
            "authorization_servers": [self._settings.issuer],
            "bearer_methods_supported": ["header"],
        }
        if self._settings.required_scopes:
            document["scopes_supported"] = list(self._settings.required_scopes)
        return document

    def _challenge(self, path: str, extra: str = "") -> tuple[tuple[bytes, bytes], ...]:
        url = f"{self._audience}{METADATA_PATH}{path.rstrip('/')}"
        value = f'Bearer resource_metadata="{url}"'
        if self._settings.required_scopes:
            value += f', scope="{" ".join(self._settings.required_scopes)}"'
        return ((b"www-authenticate", (value + extra).encode()),)

    def unauthorized(self, path: str, *, given: bool) -> Refusal:
        """401 for a request without a usable token, pointing at the endpoint's metadata."""
        extra = ', error="invalid_token"' if given else ""
        return Refusal(
            401,
            "unauthorized",
            "unauthorized: send Authorization: Bearer <token>",
            self._challenge(path, extra),
        )

    # --- tokens -----------------------------------------------------------------------------

    async def authenticate(self, authorization: str | None, path: str) -> Tenant | Refusal:
        """The tenant of a valid token for ``path``, else the refusal to send."""
        if not authorization or not authorization.lower().startswith("bearer "):
            return self.unauthorized(path, given=False)
        token = authorization[7:].strip()
        try:
            if self.introspector is not None:
                claims = await self.introspector.claims(token, self._audiences(path))
            else:
                claims = await self._verify(token, path)
        except (
            jwt.PyJWTError,
            ValueError,
            KeyError,
            httpx2.HTTPError,
            TokenInactiveError,
            IntrospectionError,
        ) as err:
            log.info("gateway_token_refused", reason=type(err).__name__)
            return self.unauthorized(path, given=True)
        granted = set(_words(claims.get("scope", claims.get("scp", ""))))
        missing = [s for s in self._settings.required_scopes if s not in granted]
        if missing:
            extra = ', error="insufficient_scope"'
            return Refusal(
                403,
                "insufficient_scope",
                f"insufficient scope: the token lacks {' '.join(missing)}",
                self._challenge(path, extra),
            )
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject:
            return self.unauthorized(path, given=True)
        return Tenant(f"oauth:{subject}", self._toolsets(claims))

    def _toolsets(self, claims: dict[str, Any]) -> frozenset[str]:
        names = set(self._settings.default_toolsets)
        for value in _words(claims.get(self._settings.claim, [])):
            names.update(self._settings.toolsets.get(value, ()))
        return frozenset(names)

    def _audiences(self, path: str) -> list[str]:
        """What a token for ``path`` may name as its audience: the endpoint's URL or the gateway's."""
        return [self.resource_of(path), self._audience, self._audience + "/"]

    async def _verify(self, token: str, path: str) -> dict[str, Any]:
        """The token's claims once signature, issuer, audience and lifetime check out.

        Raises:
            jwt.PyJWTError: it does not.
        """
        kid = jwt.get_unverified_header(token).get("kid")
        key = await self._key(kid)
        claims: dict[str, Any] = jwt.decode(
            token,
            key=key,
            algorithms=_ALGORITHMS,
            audience=self._audiences(path),
            issuer=self._settings.issuer,
            leeway=self._settings.leeway,
            options={"require": ["exp", "iss", "aud", "sub"]},
        )
        return claims

    async def _key(self, kid: str | None) -> jwt.PyJWK:
        async with self._lock:
            now = time.monotonic()
            stale = now - self._fetched_at > self._settings.jwks_cache_seconds
            unknown = kid not in self._keys if kid is not None else not self._keys
            if stale or (unknown and now - self._fetched_at > _REFETCH_INTERVAL):
                document = await self._fetch()
                self._keys = {
                    str(k.key_id or ""): k
                    for k in jwt.PyJWKSet.from_dict(document).keys
                    if getattr(k, "public_key_use", None) in (None, "sig")
                }
                self._fetched_at = now
            if kid is not None:
                found = self._keys.get(kid)
            else:
                found = next(iter(self._keys.values()), None) if len(self._keys) == 1 else None
        if found is None:
            raise jwt.InvalidKeyError("no key of the issuer matches the token")
        return found

    async def _fetch_from_issuer(self) -> dict[str, Any]:
        """The issuer's JWKS, found through its metadata (RFC 8414, then OIDC discovery)."""
        async with httpx2.AsyncClient(timeout=_FETCH_TIMEOUT, follow_redirects=False) as client:
            jwks_uri = None
            for well_known in ("oauth-authorization-server", "openid-configuration"):
                answer = await client.get(f"{self._issuer}/.well-known/{well_known}")
                if answer.status_code == 200:
                    metadata = answer.json()
                    if metadata.get("issuer", "").rstrip("/") != self._issuer:
                        raise ValueError("the issuer's metadata names another issuer")
                    jwks_uri = metadata.get("jwks_uri")
                    break
            if not jwks_uri:
                raise ValueError("the issuer publishes no jwks_uri")
            answer = await client.get(jwks_uri)
            answer.raise_for_status()
            document: dict[str, Any] = json.loads(answer.content)
            return document


def _words(value: Any) -> Sequence[str]:
    """A claim as words: a space-separated string (``scope``) or a list of strings (groups)."""
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []
