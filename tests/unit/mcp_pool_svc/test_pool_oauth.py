"""The pool's OAuth pieces around the SDK: who approves, where credentials go, when to refresh."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import grpc
import httpx2
import pytest
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from tests.support.mcp_servers import free_port
from toolscout_kit.config import OAuthConfig, RemoteServerConfig
from toolscout_kit.oauth_approval import AuthorizationError, LoopbackApprover, NoApprover
from toolscout_kit.oauth_client import (
    RemoteAuth,
    StoredCredentials,
    build_provider,
)
from toolscout_kit.status import status_for
from toolscout_kit.token_store import TokenStore, TokenStoreError

URL = "https://mcp.example/mcp"


async def test_nobody_to_approve_says_which_login_to_run() -> None:
    with pytest.raises(AuthorizationError, match=r"run `toolscout auth login github`"):
        await NoApprover("github")("https://as.example/authorize?x=1")


async def test_the_loopback_approver_returns_the_browsers_redirect() -> None:
    redirect = f"http://127.0.0.1:{free_port()}/callback"
    shown: list[str] = []
    listening = anyio.Event()

    def announce(url: str) -> None:
        shown.append(url)
        listening.set()

    async def browser() -> None:
        await listening.wait()
        async with httpx2.AsyncClient() as client:
            answer = await client.get(f"{redirect}?code=c1&state=s1&iss=https%3A%2F%2Fas.example")
            assert answer.status_code == 200

    async with anyio.create_task_group() as tg:
        tg.start_soon(browser)
        with anyio.fail_after(30):
            result = await LoopbackApprover(announce, redirect_uri=redirect)("https://as.example/authorize")
    assert shown == ["https://as.example/authorize"]
    assert (result.code, result.state, result.iss) == ("c1", "s1", "https://as.example")


async def test_a_refusal_at_the_redirect_is_an_authorization_error() -> None:
    redirect = f"http://127.0.0.1:{free_port()}/callback"
    listening = anyio.Event()

    async def browser() -> None:
        await listening.wait()
        async with httpx2.AsyncClient() as client:
            await client.get(f"{redirect}?error=access_denied&error_description=no")

    approver = LoopbackApprover(lambda _url: listening.set(), redirect_uri=redirect)
    async with anyio.create_task_group() as tg:
        tg.start_soon(browser)
        with anyio.fail_after(30), pytest.raises(AuthorizationError, match="refused: access_denied"):
            await approver("https://as.example/a")


async def test_stored_credentials_round_trip_under_the_discovered_issuer(tmp_path: Path) -> None:
    store = TokenStore(tmp_path / "t.json")
    storage = StoredCredentials(store, "stack", URL, issuer="https://as.example")
    await storage.set_client_info(OAuthClientInformationFull(client_id="c1"))
    await storage.set_tokens(OAuthToken(access_token="a1", refresh_token="r1", expires_in=600))
    [(key, entry)] = store.entries()
    assert (key.principal, key.issuer, key.resource) == ("stack", "https://as.example", URL)
    assert 590 < entry["expires_at"] - time.time() <= 600
    again = StoredCredentials(store, "stack", URL)
    assert (await again.get_tokens()) == OAuthToken(access_token="a1", refresh_token="r1", expires_in=600)
    assert (await again.get_client_info()).client_id == "c1"  # type: ignore[union-attr]
    assert await StoredCredentials(store, "alice", URL).get_tokens() is None


async def test_a_stored_token_is_treated_as_expired_a_little_early(tmp_path: Path) -> None:
    store = TokenStore(tmp_path / "t.json")
    storage = StoredCredentials(store, "stack", URL, issuer="https://as.example")
    await storage.set_tokens(OAuthToken(access_token="a1", refresh_token="r1", expires_in=30))
    provider = build_provider(
        URL, OAuthConfig(issuer="https://as.example"), store=store, approver=NoApprover("x"), environ={}
    )
    await provider._initialize()
    expiry = provider.context.token_expiry_time
    assert expiry is not None
    # A tenth of a 30 s lifetime ahead of the real expiry.
    assert 26 < expiry - time.time() <= 27
    assert provider.context.is_token_valid()


@pytest.mark.parametrize(
    "redirect_uri",
    [
        "https://127.0.0.1:28418/callback",  # not plain http
        "http://example.com:28418/callback",  # not the loopback
        "http://127.0.0.1/callback",  # no port
        "http://127.0.0.1:28418/callback?x=1",  # a query
    ],
)
def test_a_redirect_uri_must_be_a_loopback_http_url_with_its_port(redirect_uri: str) -> None:
    with pytest.raises(ValueError, match="redirect_uri"):
        OAuthConfig(redirect_uri=redirect_uri)
    assert OAuthConfig(redirect_uri="http://[::1]:28418/cb").redirect_uri == "http://[::1]:28418/cb"


def test_a_missing_client_secret_variable_is_named() -> None:
    config = RemoteServerConfig(url=URL, auth=OAuthConfig(client_id="c", client_secret_env="GH_SECRET"))
    with pytest.raises(AuthorizationError, match="GH_SECRET is not set"):
        RemoteAuth({}, store=TokenStore(Path("/nonexistent/t.json"))).provider("gh", config)


def test_servers_without_auth_get_no_provider() -> None:
    assert RemoteAuth({}).provider("plain", RemoteServerConfig(url=URL)) is None


def test_authorization_and_token_file_errors_are_failed_preconditions() -> None:
    assert status_for(AuthorizationError("x")) == grpc.StatusCode.FAILED_PRECONDITION
    assert status_for(TokenStoreError("x")) == grpc.StatusCode.FAILED_PRECONDITION
