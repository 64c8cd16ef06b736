"""The gateway's login route for ``per_user`` servers: each user authorizes the server for themself.

A tool call of a ``per_user`` server (``servers.<name>.auth.per_user``) by a principal without a
usable token of their own comes back from the pool marked "authorization required"
(:func:`toolscout.client.authorization_required`). The gateway then answers with a link to
``/oauth/login/<server>?ticket=…`` — as a URL-mode elicitation (MCP 2025-11-25) when the host
declared that capability, and always as an ``isError`` text with the same URL.

The ticket names the principal and the server and expires after :data:`TICKET_SECONDS`; it is
signed (HMAC-SHA256) with a key derived from ``$TOOLSCOUT_TOKEN_KEY``, which per-user tokens need
anyway, so any gateway replica sharing that key accepts it and nobody can sign in as someone else
by editing the link. Following it runs the authorization code flow with PKCE on the ``mcp`` SDK's
:class:`~mcp.client.auth.OAuthClientProvider` (:func:`toolscout_kit.oauth_client.build_provider`, bound to
that principal): the browser is sent to the authorization server, which redirects back to
``/oauth/callback`` on this gateway; the code is exchanged and the tokens are stored under the
principal in the token store the pool reads (:mod:`toolscout_kit.token_store`). The callback must
reach the replica that started the flow (the flow's PKCE verifier lives there): put the login
routes behind sticky sessions when replicas are load-balanced. The call retried after the login
runs with the new token, on the same MCP session.

Nothing here logs or answers a token, a code or a ticket.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import httpx2
from mcp.shared.auth import AuthorizationCodeResult
from starlette.types import Receive, Scope, Send

from toolscout_kit.config import RemoteServerConfig, ToolscoutConfig
from toolscout_kit.logging import get_logger
from toolscout_kit.oauth_approval import AuthorizationError
from toolscout_kit.oauth_client import build_provider
from toolscout_kit.token_store import TOKEN_KEY_ENV, TokenStore

__all__ = [
    "CALLBACK_PATH",
    "LOGIN_PREFIX",
    "TICKET_SECONDS",
    "UserLogin",
    "base_url",
    "has_per_user_servers",
    "is_login_path",
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
    return any(
        isinstance(c, RemoteServerConfig) and c.auth is not None and c.auth.per_user
        for c in config.servers.values()
    )


def is_login_path(path: str) -> bool:
    return path.startswith(LOGIN_PREFIX) or path == CALLBACK_PATH


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class _Flow:
    """One login in progress: the authorization URL once known, then the code the browser brings."""

    authorization_url: asyncio.Future[str]
    code: asyncio.Future[AuthorizationCodeResult]
    done: asyncio.Future[str | None]  # None: stored; else what failed
    task: asyncio.Task[None] | None = None


@dataclass
class UserLogin:
    """Login links and the ASGI app that serves them (see the module docstring)."""

    config: ToolscoutConfig
    environ: Mapping[str, str]
    store: TokenStore | None = None
    _flows: dict[str, _Flow] = field(default_factory=dict)

    def __post_init__(self) -> None:
        key = self.environ.get(TOKEN_KEY_ENV, "")
        # Without the key there are no per-user tokens (the pool refuses them): links are refused too.
        self._key = hashlib.sha256(b"toolscout login ticket\0" + key.encode()).digest() if key else b""

    def per_user(self, server: str) -> RemoteServerConfig | None:
        config = self.config.servers.get(server)
        if isinstance(config, RemoteServerConfig) and config.auth is not None and config.auth.per_user:
            return config
        return None

    # --- tickets -----------------------------------------------------------------------------

    def ticket(self, principal: str, server: str, *, now: float | None = None) -> str:
        """A signed ticket for ``principal`` to sign in to ``server`` ("" without the key)."""
        if not self._key:
            return ""
        body = _b64(json.dumps([principal, server, (now or time.time()) + TICKET_SECONDS]).encode())
        return f"{body}.{_b64(hmac.new(self._key, body.encode(), hashlib.sha256).digest())}"

    def principal_of(self, ticket: str, server: str) -> str | None:
        """The principal a valid, unexpired ticket for ``server`` names, else None."""
        body, _, signature = ticket.partition(".")
        if not self._key or not body or not signature:
            return None
        expected = _b64(hmac.new(self._key, body.encode(), hashlib.sha256).digest())
        if not hmac.compare_digest(expected, signature):
            return None
        try:
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
        base = base_url(scope)
        flow = self._start(server, config, principal, f"{base}{CALLBACK_PATH}")
        try:
            url = await asyncio.wait_for(asyncio.shield(flow.authorization_url), _START_TIMEOUT)
        except TimeoutError:
            return 504, "the authorization server did not answer in time\n", ""
        except AuthorizationError as err:
            return 502, f"sign-in to {server!r} could not start: {err}\n", ""
        return 302, f"continue at the authorization server for {server!r}\n", url

    def _start(self, server: str, config: RemoteServerConfig, principal: str, redirect_uri: str) -> _Flow:
        loop = asyncio.get_running_loop()
        flow = _Flow(loop.create_future(), loop.create_future(), loop.create_future())
        assert config.auth is not None
        if self.store is None:
            self.store = TokenStore.from_env(self.environ)

        @dataclass
        class _Browser:
            redirect_uri: str

            async def __call__(self_, authorization_url: str) -> AuthorizationCodeResult:
                state = parse_qs(urlsplit(authorization_url).query).get("state", [""])[0]
                self._flows[state] = flow
                if not flow.authorization_url.done():
                    flow.authorization_url.set_result(authorization_url)
                try:
                    return await asyncio.wait_for(asyncio.shield(flow.code), _APPROVAL_TIMEOUT)
                except TimeoutError:
                    raise AuthorizationError(
                        "nobody came back from the authorization server in time"
                    ) from None
                finally:
                    self._flows.pop(state, None)

        provider = build_provider(
            config.url,
            config.auth,
            store=self.store,
            approver=_Browser(redirect_uri),
            environ=self.environ,
            principal=principal,
        )

        async def run() -> None:
            problem: str | None = None
            try:
                async with httpx2.AsyncClient(auth=provider, timeout=config.connect_timeout) as client:
                    await client.post(
                        config.url,
                        json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                        headers={"accept": "application/json, text/event-stream"},
                    )
                failure = provider.failure
                problem = str(failure) if failure is not None else None
            except httpx2.HTTPError as err:
                problem = f"the server could not be reached ({type(err).__name__})"
            if problem is not None and not flow.authorization_url.done():
                flow.authorization_url.set_exception(AuthorizationError(problem))
            if not flow.done.done():
                flow.done.set_result(problem)
            _log.info("user_login", server=server, ok=problem is None)

        flow.task = asyncio.create_task(run(), name=f"user-login-{server}")
        return flow

    async def _callback(self, query: dict[str, list[str]]) -> tuple[int, str, str]:
        flow = self._flows.get(query.get("state", [""])[0])
        if flow is None:
            return 400, "unknown or finished sign-in (start again from the link)\n", ""
        if "code" not in query:
            error = query.get("error", ["no code"])[0]
            flow.code.set_exception(AuthorizationError(f"the authorization server refused: {error}"))
            with contextlib.suppress(AuthorizationError):
                await flow.done
            return 403, f"sign-in refused by the authorization server ({error})\n", ""
        if not flow.code.done():
            flow.code.set_result(
                AuthorizationCodeResult(
                    code=query["code"][0],
                    state=query.get("state", [None])[0],
                    iss=query.get("iss", [None])[0],
                )
            )
        try:
            problem = await asyncio.wait_for(asyncio.shield(flow.done), _START_TIMEOUT)
        except TimeoutError:
            return 504, "the authorization server did not hand out the tokens in time\n", ""
        if problem is not None:
            return 502, f"sign-in failed: {problem}\n", ""
        return 200, "signed in: go back to your app and call the tool again\n", ""

    async def aclose(self) -> None:
        tasks = [f.task for f in self._flows.values() if f.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def base_url(scope: Mapping[str, Any]) -> str:
    """The URL the client reached this gateway at (scheme and Host)."""
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
    host = headers.get("host")
    if not host:
        server = scope.get("server") or ("127.0.0.1", 80)
        host = f"{server[0]}:{server[1]}"
    return f"{scope.get('scheme', 'http')}://{host}"
