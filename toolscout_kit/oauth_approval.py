"""Who approves an OAuth authorization request of the pool or the CLI (:mod:`toolscout_kit.oauth_client`).

The SDK hands its user the authorization URL and waits for the redirect's parameters; it leaves
who looks at that URL to the application. Here: :class:`LoopbackApprover` (a person's browser,
the redirect caught on 127.0.0.1), :class:`HeadlessApprover` (fetches the URL itself, for
authorization servers that approve without a person) and :class:`NoApprover` (a running pool:
the server must be authorized beforehand with ``toolscout auth login``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol
from urllib.parse import parse_qs, urljoin, urlsplit

import anyio
import httpx2
from mcp.shared.auth import AuthorizationCodeResult

from toolscout_kit.errors import FailedPreconditionError

if TYPE_CHECKING:
    from toolscout_kit.config import OAuthConfig

__all__ = [
    "DEFAULT_REDIRECT_URI",
    "Approver",
    "AuthorizationError",
    "HeadlessApprover",
    "LoopbackApprover",
    "NoApprover",
    "redirect_uri_of",
]

# A loopback redirect (RFC 8252 §7.3); the same for every flow so that a client registered by one
# (`toolscout auth login`) is usable by the next (the pool's refresh, a headless re-authorization).
DEFAULT_REDIRECT_URI = "http://127.0.0.1:33418/callback"


def redirect_uri_of(auth: OAuthConfig | None) -> str:
    """The redirect URI a server's authorizations use: its ``auth.redirect_uri``, else the default."""
    return (auth.redirect_uri if auth is not None else None) or DEFAULT_REDIRECT_URI


# How long a person has to approve at the printed URL.
_APPROVAL_TIMEOUT = 300.0
_HEADLESS_HOPS = 10


class AuthorizationError(FailedPreconditionError):
    """The server asked for an authorization the pool could not get (none stored, refused, failed)."""


class Approver(Protocol):
    """Gets an authorization URL approved and returns the redirect's parameters."""

    redirect_uri: str

    async def __call__(self, authorization_url: str) -> AuthorizationCodeResult: ...


def _result_from_redirect(location: str) -> AuthorizationCodeResult:
    """The code, state and issuer of a redirect to us; an ``error`` redirect is a refusal.

    Raises:
        AuthorizationError: the authorization server refused (``error=...``) or sent no code.
    """
    query = parse_qs(urlsplit(location).query)
    if "error" in query:
        detail = query.get("error_description", query["error"])[0]
        raise AuthorizationError(f"the authorization server refused: {query['error'][0]} ({detail})")
    if "code" not in query:
        raise AuthorizationError("the authorization server redirected back without a code")
    return AuthorizationCodeResult(
        code=query["code"][0], state=query.get("state", [None])[0], iss=query.get("iss", [None])[0]
    )


@dataclass
class HeadlessApprover:
    """Fetches the authorization URL itself and follows the authorization server's redirects (with
    its cookies) until one comes back to the redirect URI: for servers that approve without a person."""

    redirect_uri: str = DEFAULT_REDIRECT_URI
    timeout: float = 30.0

    async def __call__(self, authorization_url: str) -> AuthorizationCodeResult:
        async with httpx2.AsyncClient(timeout=self.timeout, follow_redirects=False) as client:
            url = authorization_url
            for _ in range(_HEADLESS_HOPS):
                try:
                    response = await client.get(url)
                except httpx2.HTTPError as err:
                    raise AuthorizationError(
                        f"the authorization server is unreachable: {type(err).__name__}"
                    ) from None
                location = response.headers.get("location")
                if not response.is_redirect or not location:
                    raise AuthorizationError(
                        f"the authorization server wants a person (HTTP {response.status_code} at its "
                        "authorization URL): authorize without --headless"
                    )
                url = urljoin(url, location)
                if url.startswith(self.redirect_uri):
                    return _result_from_redirect(url)
        raise AuthorizationError("the authorization server redirected too many times")


@dataclass
class LoopbackApprover:
    """Shows the authorization URL (``announce``) and waits for the browser's redirect on 127.0.0.1."""

    announce: Callable[[str], None]
    redirect_uri: str = DEFAULT_REDIRECT_URI
    timeout: float = _APPROVAL_TIMEOUT

    async def __call__(self, authorization_url: str) -> AuthorizationCodeResult:
        parts = urlsplit(self.redirect_uri)
        arrived: asyncio.Future[str] = asyncio.get_running_loop().create_future()

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                line = (await reader.readline()).decode("latin-1").split(" ")
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass
                target = line[1] if len(line) > 1 else ""
                if urlsplit(target).path == parts.path and not arrived.done():
                    arrived.set_result(target)
                    body = b"toolscout: authorized. You can close this window.\n"
                    status = b"200 OK"
                else:
                    body, status = b"not found\n", b"404 Not Found"
                writer.write(
                    b"HTTP/1.1 " + status + b"\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                    b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
                )
                await writer.drain()
            finally:
                writer.close()

        try:
            server = await asyncio.start_server(handle, parts.hostname, parts.port)
        except OSError as err:
            raise AuthorizationError(
                f"cannot listen for the redirect on {parts.hostname}:{parts.port}: {err.strerror} "
                "(another program holds it: set the server's auth.redirect_uri to another loopback port)"
            ) from None
        async with server:
            self.announce(authorization_url)
            try:
                with anyio.fail_after(self.timeout):
                    target = await arrived
            except TimeoutError:
                raise AuthorizationError(f"no authorization within {self.timeout:g}s") from None
        return _result_from_redirect(urljoin(self.redirect_uri, target))


@dataclass
class NoApprover:
    """Nobody to approve (a running pool): the server must be authorized beforehand."""

    server: str
    redirect_uri: str = DEFAULT_REDIRECT_URI

    async def __call__(self, authorization_url: str) -> AuthorizationCodeResult:
        raise AuthorizationError(
            f"server {self.server!r} needs an authorization: run `toolscout auth login {self.server}`"
        )
