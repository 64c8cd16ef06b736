"""The gateway's login route for ``per_user`` servers: each user authorizes the server for themself.

A tool call of a ``per_user`` server (``servers.<name>.auth.per_user``) by a principal without a
usable token of their own comes back from the pool marked "authorization required"
(:func:`toolscout.client.authorization_required`). The gateway then answers with a link to
``/oauth/login/<server>?ticket=…`` — as a URL-mode elicitation (MCP 2025-11-25) when the host
declared that capability, and always as an ``isError`` text with the same URL.

The ticket names the principal and the server and expires after :data:`TICKET_SECONDS`; it is
signed (HMAC-SHA256) with a key derived from ``$TOOLSCOUT_TOKEN_KEY``, which per-user tokens need
anyway, so any gateway replica sharing that key accepts it and nobody can sign in as someone else
by editing the link (keys from :mod:`toolscout_kit.token_keys`: during a rotation, links and states
made under a key of ``$TOOLSCOUT_TOKEN_KEY_PREVIOUS`` are still accepted). Following it runs the authorization code flow with PKCE on the ``mcp`` SDK's
:class:`~mcp.client.auth.OAuthClientProvider` (:func:`toolscout_kit.oauth_client.build_provider`, bound to
that principal): discovery and the client's registration (kept in the token store every replica
shares), then the browser is sent to the authorization server, which redirects back to
``/oauth/callback``; the code is exchanged (the SDK's token request and answer handling) and the
tokens are stored under the principal in the token store the pool reads
(:mod:`toolscout_kit.token_store`). No replica keeps the flow in memory: the ``state`` parameter
carries the principal, the server, the PKCE verifier and the redirect URI, encrypted with a key
derived from ``$TOOLSCOUT_TOKEN_KEY`` (Fernet, expiring with the approval time), so the callback
finishes on whichever replica the load balancer picks, and nobody can read the verifier on the
way. The SDK's own state and challenge in its authorization URL are replaced by these (the SDK
keeps the verifier in a local variable of a flow that would have to wait in one process). The
call retried after the login runs with the new token, on the same MCP session.

Nothing here logs or answers a token, a code or a ticket.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, parse_qsl, quote, urlencode, urlsplit, urlunsplit

import httpx2
from cryptography.fernet import InvalidToken
from mcp.client.auth import OAuthFlowError, OAuthTokenError, PKCEParameters
from mcp.client.auth.utils import validate_authorization_response_iss
from mcp.shared.auth import AuthorizationCodeResult
from starlette.types import Receive, Scope, Send

from toolscout_kit.config import RemoteServerConfig, ToolscoutConfig
from toolscout_kit.logging import get_logger
from toolscout_kit.oauth_approval import Approver, AuthorizationError
from toolscout_kit.oauth_client import OAuthProvider, RemoteAuth
from toolscout_kit.token_keys import KeyUse, TokenKeys
from toolscout_kit.token_store import TokenStore, TokenStoreError

__all__ = [
    "CALLBACK_PATH",
    "LOGIN_PREFIX",
    "TICKET_SECONDS",
    "UserLogin",
    "base_url",
    "has_per_user_servers",
    "is_login_path",
    "sign_in_instructions",
]

_log = get_logger(__name__)

LOGIN_PREFIX = "/oauth/login/"
CALLBACK_PATH = "/oauth/callback"
# A login link is good for this long (a host shows it at once; the user follows it soon).
TICKET_SECONDS = 900.0
# How long the authorization server may take to hand out its URL, and a user to come back.
_START_TIMEOUT = 30.0
_APPROVAL_TIMEOUT = 600.0


def has_per_user_servers(config: ToolscoutConfig) -> bool:
    return bool(config.per_user_servers)


def is_login_path(path: str) -> bool:
    return path.startswith(LOGIN_PREFIX) or path == CALLBACK_PATH


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True, slots=True)
class _Pending:
    """What the callback needs to finish a sign-in, carried in the ``state`` parameter (encrypted)."""

    principal: str
    server: str
    code_verifier: str
    redirect_uri: str


class _HandedOver(AuthorizationError):
    """Ends the SDK's flow at the redirect: the callback finishes it, on whichever replica."""


@dataclass
class UserLogin:
    """Login links and the ASGI app that serves them (see the module docstring)."""

    config: ToolscoutConfig
    environ: Mapping[str, str]
    store: TokenStore | None = None
    _starts: set[asyncio.Task[None]] = field(default_factory=set)

    def __post_init__(self) -> None:
        # Without the key there are no per-user tokens (the pool refuses them): links are refused too.
        self._keys = TokenKeys.from_env(self.environ)
        # Seals the sign-in state (it carries the PKCE verifier, so it is encrypted, not just signed).
        self._sealer = self._keys.sealer(KeyUse.LOGIN_STATE)

    def per_user(self, server: str) -> RemoteServerConfig | None:
        config = self.config.servers.get(server)
        if isinstance(config, RemoteServerConfig) and config.auth is not None and config.auth.per_user:
            return config
        return None

    # --- tickets -----------------------------------------------------------------------------

    def ticket(self, principal: str, server: str, *, now: float | None = None) -> str:
        """A signed ticket for ``principal`` to sign in to ``server`` ("" without the key)."""
        if not self._keys:
            return ""
        body = _b64(json.dumps([principal, server, (now or time.time()) + TICKET_SECONDS]).encode())
        return f"{body}.{_b64(self._keys.sign(KeyUse.LOGIN_TICKET, body.encode()))}"

    def principal_of(self, ticket: str, server: str) -> str | None:
        """The principal a valid, unexpired ticket for ``server`` names, else None."""
        body, _, signature = ticket.partition(".")
        if not self._keys or not body or not signature:
            return None
        try:
            if not self._keys.verify(KeyUse.LOGIN_TICKET, body.encode(), _unb64(signature)):
                return None
            principal, named, expires = json.loads(_unb64(body))
        except (ValueError, TypeError):
            return None
        if named != server or not isinstance(principal, str) or float(expires) < time.time():
            return None
        return principal

    def link(self, base_url: str, principal: str, server: str) -> str:
        """The login URL of ``server`` for ``principal`` ("" without the key)."""
        ticket = self.ticket(principal, server)
        if not ticket:
            return ""
        return f"{base_url.rstrip('/')}{LOGIN_PREFIX}{quote(server, safe='')}?ticket={ticket}"

    # --- the routes --------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        status, body, location = await self._answer(scope)
        headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"cache-control", b"no-store")]
        if location:
            headers.append((b"location", location.encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body.encode()})

    async def _answer(self, scope: Scope) -> tuple[int, str, str]:
        if scope.get("method") != "GET":
            return 405, "GET only\n", ""
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        path: str = scope["path"]
        if path == CALLBACK_PATH:
            return await self._callback(query)
        return await self._login(scope, path.removeprefix(LOGIN_PREFIX), query)

    async def _login(
        self, scope: Mapping[str, Any], server: str, query: dict[str, list[str]]
    ) -> tuple[int, str, str]:
        config = self.per_user(server)
        if config is None:
            return 404, "no such server with per-user sign-in\n", ""
        principal = self.principal_of(query.get("ticket", [""])[0], server)
        if principal is None:
            return (
                403,
                "this sign-in link is not valid (or has expired): call the tool again for a new one\n",
                "",
            )
        redirect_uri = f"{base_url(scope)}{CALLBACK_PATH}"
        try:
            url = await asyncio.wait_for(
                self._authorization_url(server, config, principal, redirect_uri), _START_TIMEOUT
            )
        except TimeoutError:
            return 504, "the authorization server did not answer in time\n", ""
        except AuthorizationError as err:
            return 502, f"sign-in to {server!r} could not start: {err}\n", ""
        return 302, f"continue at the authorization server for {server!r}\n", url

    def _provider(
        self, server: str, config: RemoteServerConfig, principal: str, approver: Approver
    ) -> OAuthProvider:
        """The SDK's OAuth provider of ``server`` for ``principal``, over the shared token store.

        Raises:
            AuthorizationError: the client secret's variable is not set.
        """
        remote = RemoteAuth(
            self.environ, self.store, principal=principal, approver=lambda _name, _auth: approver
        )
        provider = remote.provider(server, config)
        self.store = remote.store
        assert provider is not None  # a per_user server has auth
        return provider

    async def _authorization_url(
        self, server: str, config: RemoteServerConfig, principal: str, redirect_uri: str
    ) -> str:
        """The authorization URL for ``principal``, its state sealed for the callback.

        The SDK's flow runs up to the redirect (the server's 401, its metadata, the authorization
        server's, the client's registration, kept in the shared token store); its URL then gets a
        PKCE challenge of ours and a ``state`` that carries, encrypted, what the callback needs to
        finish on any replica: the principal, the server, the verifier, the redirect URI.

        Raises:
            AuthorizationError: the flow failed before the redirect.
        """
        assert self._sealer is not None  # a valid ticket needs the key
        sealer = self._sealer
        found: asyncio.Future[str] = asyncio.get_running_loop().create_future()

        @dataclass
        class _Redirect:
            redirect_uri: str

            async def __call__(self_, authorization_url: str) -> AuthorizationCodeResult:
                pkce = PKCEParameters.generate()
                pending = _Pending(principal, server, pkce.code_verifier, self_.redirect_uri)
                state = sealer.encrypt(json.dumps(dataclasses.astuple(pending)).encode()).decode()
                parts = urlsplit(authorization_url)
                params = dict(parse_qsl(parts.query, keep_blank_values=True))
                params.update(state=state, code_challenge=pkce.code_challenge, code_challenge_method="S256")
                if not found.done():
                    found.set_result(urlunsplit(parts._replace(query=urlencode(params))))
                raise _HandedOver("handed over to the callback")

        provider = self._provider(server, config, principal, _Redirect(redirect_uri))

        async def run() -> None:
            problem = None
            try:
                async with httpx2.AsyncClient(auth=provider, timeout=config.connect_timeout) as client:
                    await client.post(
                        config.url,
                        json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                        headers={"accept": "application/json, text/event-stream"},
                    )
                if not isinstance(provider.failure, _HandedOver):
                    problem = str(provider.failure) if provider.failure else "the server asked for no sign-in"
            except httpx2.HTTPError as err:
                problem = f"the server could not be reached ({type(err).__name__})"
            except TokenStoreError as err:
                problem = _store_unusable(err)
            if problem is not None and not found.done():
                found.set_exception(AuthorizationError(problem))

        task = asyncio.create_task(run(), name=f"user-login-{server}")
        self._starts.add(task)
        task.add_done_callback(self._starts.discard)
        return await asyncio.shield(found)

    def _unseal(self, state: str) -> _Pending | None:
        if self._sealer is None or not state:
            return None
        try:
            fields = json.loads(self._sealer.decrypt(state.encode(), ttl=int(_APPROVAL_TIMEOUT)))
            return _Pending(*fields)
        except (InvalidToken, ValueError, TypeError):
            return None

    async def _callback(self, query: dict[str, list[str]]) -> tuple[int, str, str]:
        pending = self._unseal(query.get("state", [""])[0])
        config = self.per_user(pending.server) if pending is not None else None
        if pending is None or config is None:
            return 400, "unknown or expired sign-in (start again from the link)\n", ""
        if "code" not in query:
            error = query.get("error", ["no code"])[0]
            _log.info("user_login", server=pending.server, ok=False)
            return 403, f"sign-in refused by the authorization server ({error})\n", ""
        problem = await self._finish(config, pending, query["code"][0], query.get("iss", [None])[0])
        _log.info("user_login", server=pending.server, ok=problem is None)
        if problem is not None:
            return 502, f"sign-in failed: {problem}\n", ""
        return 200, "signed in: go back to your app and call the tool again\n", ""

    async def _finish(
        self, config: RemoteServerConfig, pending: _Pending, code: str, iss: str | None
    ) -> str | None:
        """Exchanges ``code`` for the principal's tokens (the SDK's request and answer handling) and
        stores them; None when done, else what failed."""
        try:
            provider = self._provider(
                pending.server, config, pending.principal, _Unused(pending.redirect_uri)
            )
            await provider._initialize()
            context = provider.context
            if context.client_info is None or context.oauth_metadata is None:
                return "the sign-in's registration is gone: start again from the link"
            validate_authorization_response_iss(iss, context.oauth_metadata)
            request = await provider._exchange_token_authorization_code(code, pending.code_verifier)
            async with httpx2.AsyncClient(timeout=config.connect_timeout, follow_redirects=False) as client:
                response = await client.send(request)
            await provider._handle_token_response(response)
        except (OAuthFlowError, httpx2.HTTPError, AuthorizationError, TokenStoreError) as err:
            return _why_not_finished(err)
        return None

    async def aclose(self) -> None:
        tasks = list(self._starts)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _why_not_finished(err: Exception) -> str:
    """What a user is told when the code could not become tokens (never a token or a file path)."""
    match err:
        case OAuthTokenError():
            return "the authorization server did not accept the code"
        case OAuthFlowError():
            return "the authorization response came from another issuer"
        case httpx2.HTTPError():
            return f"the authorization server could not be reached ({type(err).__name__})"
        case TokenStoreError():
            return _store_unusable(err)
        case _:
            return str(err)  # AuthorizationError: written for the user


def _store_unusable(err: TokenStoreError) -> str:
    # The detail names a file of this host: logged, not answered.
    _log.warning("user_login_token_store", error=str(err))
    return "the gateway's token store cannot be used (see its log)"


@dataclass
class _Unused:
    """The approver of a provider that only exchanges a code: nobody is asked again."""

    redirect_uri: str

    async def __call__(self, authorization_url: str) -> AuthorizationCodeResult:
        raise AuthorizationError("no new authorization while finishing one")


def sign_in_instructions(links: Sequence[tuple[str, str]], limit: int = 2048) -> str:
    """What ``initialize`` instructions say of the ``per_user`` servers a caller has not signed
    in to: ``links`` = (server, its login link for them, "" without the key). The link's ticket
    expires like every ticket (a new session, or a call of one of its tools, gives a fresh one).
    Whole lines within ``limit`` bytes (Claude Code cuts server instructions at 2 KB): the
    servers past it are named without a link."""
    head = (
        "Sign-in needed: these MCP servers list their tools, resources and prompts to each user "
        "under the user's own authorization, and you have not signed in to them yet, so none of "
        "their tools are listed here:"
    )
    tail = "After signing in, list the tools again (tools/list) or search them."
    lines = [head]
    size = len(head.encode()) + len(tail.encode()) + 2
    for index, (server, link) in enumerate(links):
        line = f"- {server}: sign in at {link}" if link else f"- {server}"
        rest = ", ".join(s for s, _ in links[index + 1 :])
        if size + len(line.encode()) + 1 + (len(rest.encode()) + 80 if rest else 0) > limit:
            names = ", ".join(s for s, _ in links[index:])
            lines.append(f"- also {names} (a call of one of their tools answers with its link)")
            break
        lines.append(line)
        size += len(line.encode()) + 1
    lines.append(tail)
    return "\n".join(lines)


def base_url(scope: Mapping[str, Any]) -> str:
    """The URL the client reached this gateway at (scheme and Host)."""
    host = None
    for name, value in scope.get("headers", []):
        if name.lower() == b"host":
            host = value.decode("latin-1")  # (the last one, as a dict of the headers kept)
    if not host:
        server = scope.get("server") or ("127.0.0.1", 80)
        host = f"{server[0]}:{server[1]}"
    return f"{scope.get('scheme', 'http')}://{host}"
