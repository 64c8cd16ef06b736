"""Token introspection (RFC 7662): the gateway asks the identity provider about a bearer token.

The alternative to checking JWTs against the issuer's keys, for identity providers that hand out
opaque access tokens (or when a revocation must count before the token expires). The gateway is a
client of the provider's introspection endpoint (``gateway.oauth.introspection_endpoint``) as
``introspection_client_id``, authenticating as ``introspection_auth`` says: HTTP Basic
(``client_secret_basic``) or form fields (``client_secret_post``) with the secret in the variable
``introspection_client_secret_env``, or the client id alone (``none``, where the provider lets a
public client introspect). An active answer must name the issuer (when it names one), the gateway
as audience, a subject and an expiry not passed.

Answers are kept per token (by its SHA-256, never the token itself) for the token's remaining
life, at most ``introspection_cache_seconds``: a host calling many times asks the provider once,
and a revocation counts within that bound. A refusal (inactive, another audience) is kept for a
short while too, so a flood of one bad token is not a flood of requests to the provider. Each
request to the provider is counted and timed by outcome, each kept answer used counted
(:class:`~mcp_gateway_svc.metrics.IntrospectionMetrics`); neither the token nor the secret is in a label.

The ``mcp`` SDK defines what a token verifier answers (``mcp.server.auth.provider.TokenVerifier``)
but ships no introspection client, and its bearer middleware serves one resource; this module
does the gateway's checks (issuer, an audience per endpoint, leeway) with a bounded cache.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx2

from mcp_gateway_svc.metrics import IntrospectionMetrics, IntrospectionOutcome
from toolscout_kit.config import GatewayOAuthSettings, IntrospectionAuth
from toolscout_kit.errors import ConfigError
from toolscout_kit.logging import get_logger

__all__ = ["IntrospectionError", "Introspector", "TokenInactiveError"]

_TIMEOUT = 10.0
# Refusals are kept this long (a token that was inactive stays so; a new login brings a new token).
_REFUSAL_SECONDS = 30.0
_MAX_ENTRIES = 10_000
# An OAuth error code (RFC 6749 section 5.2: invalid_client, …): repeated in the log, nothing longer.
_ERROR_CODE = re.compile(r"[a-z_]{1,40}")
_log = get_logger(__name__)

# The identity provider's answer to one token: (status code, JSON body).
Ask = Callable[[str], Awaitable[tuple[int, Any]]]


class IntrospectionError(Exception):
    """The identity provider could not be asked, or answered something else than RFC 7662."""


class TokenInactiveError(Exception):
    """The token is not active for the gateway (inactive, expired, another issuer or audience)."""


@dataclass(frozen=True, slots=True)
class _Kept:
    claims: dict[str, Any] | None  # None: refused
    until: float


class Introspector:
    """Asks the introspection endpoint about tokens, keeping each answer for the token's life."""

    def __init__(
        self,
        settings: GatewayOAuthSettings,
        *,
        environ: Mapping[str, str],
        ask: Ask | None = None,
        clock: Callable[[], float] = time.time,
        metrics: IntrospectionMetrics | None = None,
    ) -> None:
        """Raises:
        ConfigError: the client secret's variable is not set (a client with a secret)."""
        self._settings = settings
        self._clock = clock
        self._metrics = metrics
        self._kept: OrderedDict[bytes, _Kept] = OrderedDict()
        if ask is None:
            secret = None
            if settings.introspection_auth is not IntrospectionAuth.NONE:
                variable = settings.introspection_client_secret_env or ""
                secret = environ.get(variable, "")
                if not secret:
                    raise ConfigError(
                        f"toolscout.gateway.oauth.introspection_client_secret_env: {variable} is not set "
                        "(the gateway's client secret at the identity provider)"
                    )
            ask = self._asker(secret)
        self._ask = ask
        self.requests = 0  # how many times the provider was asked (tests, figures)

    def _asker(self, secret: str | None) -> Ask:
        endpoint = str(self._settings.introspection_endpoint)
        client_id = str(self._settings.introspection_client_id)
        method = self._settings.introspection_auth
        # The client's credentials, each method's way (RFC 6749 section 2.3.1; ``none``: the id alone).
        form = {"token_type_hint": "access_token"}
        basic: tuple[str, str] | None = None
        if method is IntrospectionAuth.CLIENT_SECRET_BASIC:
            # Each form-urlencoded before it goes into the header (RFC 6749 section 2.3.1), as
            # the SDK's client does: a secret with ":" or "%" is read back as it is.
            basic = (quote(client_id, safe=""), quote(str(secret), safe=""))
        elif method is IntrospectionAuth.CLIENT_SECRET_POST:
            form |= {"client_id": client_id, "client_secret": str(secret)}
        else:
            form |= {"client_id": client_id}

        async def ask(token: str) -> tuple[int, Any]:
            async with httpx2.AsyncClient(auth=basic, timeout=_TIMEOUT, follow_redirects=False) as client:
                answer = await client.post(
                    endpoint,
                    data={"token": token, **form},
                    headers={"accept": "application/json"},
                )
            try:
                return answer.status_code, answer.json()
            except ValueError:
                return answer.status_code, None

        return ask

    async def claims(self, token: str, audiences: Sequence[str]) -> dict[str, Any]:
        """The token's claims when the provider says it is active for one of ``audiences``.

        Raises:
            TokenInactiveError: it is not.
            IntrospectionError: the provider could not be asked (nothing is kept then).
        """
        digest = hashlib.sha256(token.encode()).digest()
        now = self._clock()
        kept = self._kept.get(digest)
        if kept is None or kept.until <= now:
            kept = await self._timed(token, audiences, now)
            self._keep(digest, kept)
        elif self._metrics is not None:
            self._metrics.kept(_outcome(kept))
        if kept.claims is None:
            raise TokenInactiveError(
                "the identity provider does not know the token as active for this gateway"
            )
        return kept.claims

    async def _timed(self, token: str, audiences: Sequence[str], now: float) -> _Kept:
        """:meth:`_introspect`, counted and timed by outcome."""
        started = time.perf_counter()
        outcome = IntrospectionOutcome.ERROR
        try:
            kept = await self._introspect(token, audiences, now)
            outcome = _outcome(kept)
            return kept
        except IntrospectionError as err:
            # The operator's clue (a client or method the provider refuses is a 401 here); the
            # message names a status and an error code at most, never the token or the secret.
            _log.warning("gateway_introspection_failed", problem=str(err))
            raise
        finally:
            if self._metrics is not None:
                self._metrics.asked(outcome, time.perf_counter() - started)

    async def _introspect(self, token: str, audiences: Sequence[str], now: float) -> _Kept:
        self.requests += 1
        try:
            status, body = await self._ask(token)
        except httpx2.HTTPError as err:
            raise IntrospectionError(
                f"the introspection endpoint is unreachable ({type(err).__name__})"
            ) from None
        if status != 200 or not isinstance(body, dict) or not isinstance(body.get("active"), bool):
            code = body.get("error") if isinstance(body, dict) else None
            said = f" ({code})" if isinstance(code, str) and _ERROR_CODE.fullmatch(code) else ""
            raise IntrospectionError(
                f"the introspection endpoint answered {status}{said} without an RFC 7662 body"
            )
        refused = _Kept(None, now + _REFUSAL_SECONDS)
        if not body["active"] or not self._for_us(body, audiences, now):
            return refused
        expires = body.get("exp")
        until = now + self._settings.introspection_cache_seconds
        if isinstance(expires, int | float):
            until = min(until, float(expires))
        return _Kept(dict(body), until)

    def _for_us(self, body: Mapping[str, Any], audiences: Sequence[str], now: float) -> bool:
        issuer = body.get("iss")
        if issuer is not None and str(issuer).rstrip("/") != self._settings.issuer.rstrip("/"):
            return False
        audience = body.get("aud")
        named = [audience] if isinstance(audience, str) else audience if isinstance(audience, list) else []
        if not any(a in audiences for a in named):
            return False
        subject = body.get("sub")
        if not isinstance(subject, str) or not subject:
            return False
        leeway = self._settings.leeway
        expires, not_before = body.get("exp"), body.get("nbf")
        if isinstance(expires, int | float) and expires + leeway <= now:
            return False
        return not (isinstance(not_before, int | float) and not_before - leeway > now)

    def _keep(self, digest: bytes, kept: _Kept) -> None:
        self._kept[digest] = kept
        self._kept.move_to_end(digest)
        while len(self._kept) > _MAX_ENTRIES:
            self._kept.popitem(last=False)


def _outcome(kept: _Kept) -> IntrospectionOutcome:
    return IntrospectionOutcome.INACTIVE if kept.claims is None else IntrospectionOutcome.ACTIVE
