"""Per-user upstream credentials (``auth.per_user``) against real parts: ``oidc-provider`` with two
users (alice, bob), an MCP server that validates its tokens and records which subject each call ran
as, the pool over gRPC-free in-process calls. Logins are the authorization code flow with PKCE,
fetched headlessly with a ``login_hint`` that picks the user.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from cryptography.fernet import Fernet
from mcp.shared.auth_utils import resource_url_from_server_url
from toolscout.client import CallRequest

from mcp_pool_svc.errors import UserAuthorizationRequiredError
from mcp_pool_svc.pool import McpPool
from tests.support.oauth_servers import (
    AuthServer,
    ProtectedServer,
    login_as,
    running_authorization_server,
    running_protected_server,
)
from toolscout_kit.config import parse_config
from toolscout_kit.token_store import STACK_PRINCIPAL, TokenStore, TokenStoreError

pytestmark = [pytest.mark.e2e]

USERS = {"oauth:alice": "alice", "oauth:bob": "bob"}


@pytest.fixture(scope="module")
def auth_server() -> Iterator[AuthServer]:
    with running_authorization_server(account="operator") as server:
        yield server


@pytest.fixture(scope="module")
def protected(auth_server: AuthServer) -> Iterator[ProtectedServer]:
    with running_protected_server(auth_server.issuer) as server:
        yield server


async def _login(url: str, store: TokenStore, principal: str, user: str) -> None:
    await login_as(url, store, principal, user)
    assert store.find(principal, resource_url_from_server_url(url))


def _env(tmp_path: Path) -> dict[str, str]:
    return {
        "TOOLSCOUT_TOKEN_FILE": str(tmp_path / "t.json"),
        "TOOLSCOUT_TOKEN_KEY": Fernet.generate_key().decode(),
    }


def _pool(url: str, env: dict[str, str], **pool: Any) -> McpPool:
    config = parse_config(
        {
            "toolscout": {"pool": pool},
            "servers": {"protected": {"url": url, "auth": {"type": "oauth", "per_user": True}}},
        }
    )
    return McpPool(config, environ=env)


async def _whoami(pool: McpPool, principal: str) -> str:
    result = await pool.call(CallRequest(server="protected", tool="whoami", principal=principal))
    assert not result.is_error, result.content
    return result.content[0].text


async def test_each_principal_calls_with_its_own_token_never_another_nor_the_stacks(
    protected: ProtectedServer, tmp_path: Path
) -> None:
    env = _env(tmp_path)
    store = TokenStore.from_env(env)
    # The stack's own authorization (an operator) lists the tools; calls never use it.
    await _login(protected.url, store, STACK_PRINCIPAL, "operator")
    pool = _pool(protected.url, env, per_user_sessions=8)
    await pool.start(wait=60)
    try:
        # No token of one's own, no principal, or the stack's name: refused, not sent, naming the server.
        for principal in ("oauth:alice", "", STACK_PRINCIPAL):
            with pytest.raises(UserAuthorizationRequiredError) as refused:
                await _whoami(pool, principal)
            assert refused.value.server == "protected"
        for principal, user in USERS.items():
            await _login(protected.url, store, principal, user)
        before = len(protected.subjects())
        rng = random.Random(33)  # noqa: S311 - a test's randomness
        sequence = [rng.choice(list(USERS)) for _ in range(400)]
        for principal in sequence:
            assert await _whoami(pool, principal) == f"subject: {USERS[principal]}"
        ran_as = protected.subjects()[before:]
        assert Counter(ran_as) == Counter(USERS[p] for p in sequence)
        assert "operator" not in ran_as
        assert len(pool._users) == 2  # one session per (server, principal), reused
    finally:
        await pool.stop()


async def test_an_expired_token_is_refreshed_once_and_a_revoked_one_asks_for_a_login(
    auth_server: AuthServer, protected: ProtectedServer, tmp_path: Path
) -> None:
    env = _env(tmp_path)
    store = TokenStore.from_env(env)
    await _login(protected.url, store, STACK_PRINCIPAL, "operator")
    await _login(protected.url, store, "oauth:bob", "bob")
    resource = resource_url_from_server_url(protected.url)

    def bobs() -> tuple[Any, dict[str, Any]]:
        [(key, entry)] = [(k, e) for k, e in store.entries() if k.principal == "oauth:bob"]
        return key, entry

    key, _ = bobs()
    store.update(key, {"expires_at": 1.0})  # expired, as far as the client knows
    refreshes = auth_server.grants("refresh_token")
    pool = _pool(protected.url, env)
    await pool.start(wait=60)
    try:
        assert await _whoami(pool, "oauth:bob") == "subject: bob"
        assert await _whoami(pool, "oauth:bob") == "subject: bob"
    finally:
        await pool.stop()
    assert auth_server.grants("refresh_token") == refreshes + 1
    # Revoked at the authorization server, and expired: the refresh is refused → a login is needed.
    key, entry = bobs()
    client = entry["client"]
    async with httpx2.AsyncClient(timeout=30) as http:
        revoked = await http.post(
            f"{auth_server.issuer}/token/revocation",
            data={"token": entry["tokens"]["refresh_token"], "client_id": client["client_id"]},
            auth=(client["client_id"], client["client_secret"]) if client.get("client_secret") else None,
        )
    assert revoked.status_code == 200, revoked.text
    store.update(key, {"expires_at": 1.0})
    pool = _pool(protected.url, env)
    await pool.start(wait=60)
    try:
        with pytest.raises(UserAuthorizationRequiredError):
            await _whoami(pool, "oauth:bob")
        await _login(protected.url, store, "oauth:bob", "bob")
        assert await _whoami(pool, "oauth:bob") == "subject: bob"
    finally:
        await pool.stop()
    assert store.find("oauth:bob", resource)


async def test_user_sessions_are_bounded_and_closed_when_idle(
    protected: ProtectedServer, tmp_path: Path
) -> None:
    env = _env(tmp_path)
    store = TokenStore.from_env(env)
    await _login(protected.url, store, STACK_PRINCIPAL, "operator")
    for principal, user in USERS.items():
        await _login(protected.url, store, principal, user)
    pool = _pool(protected.url, env, per_user_sessions=1, per_user_idle=0.3)
    await pool.start(wait=60)
    try:
        assert await _whoami(pool, "oauth:alice") == "subject: alice"
        assert await _whoami(pool, "oauth:bob") == "subject: bob"
        assert len(pool._users) == 1  # alice's, the least recently used, was closed
        await pool._users.wait_until(lambda: len(pool._users) == 0, 10)
        # Opened again on the next call, as its own user.
        assert await _whoami(pool, "oauth:alice") == "subject: alice"
    finally:
        await pool.stop()


async def test_per_user_tokens_need_the_encryption_key(protected: ProtectedServer, tmp_path: Path) -> None:
    env = {"TOOLSCOUT_TOKEN_FILE": str(tmp_path / "t.json")}
    await _login(protected.url, TokenStore.from_env(env), STACK_PRINCIPAL, "operator")
    pool = _pool(protected.url, env)
    await pool.start(wait=60)
    try:
        with pytest.raises(TokenStoreError, match="TOOLSCOUT_TOKEN_KEY"):
            await _whoami(pool, "oauth:alice")
    finally:
        await pool.stop()


async def test_a_token_revoked_during_a_live_session_asks_for_a_login_then_works_again(
    auth_server: AuthServer, protected: ProtectedServer, tmp_path: Path
) -> None:
    env = _env(tmp_path)
    store = TokenStore.from_env(env)
    await _login(protected.url, store, STACK_PRINCIPAL, "operator")
    await _login(protected.url, store, "oauth:bob", "bob")
    pool = _pool(protected.url, env)
    await pool.start(wait=60)
    try:
        assert await _whoami(pool, "oauth:bob") == "subject: bob"
        [(_key, entry)] = [(k, e) for k, e in store.entries() if k.principal == "oauth:bob"]
        client = entry["client"]
        async with httpx2.AsyncClient(timeout=30) as http:
            revoked = await http.post(
                f"{auth_server.issuer}/token/revocation",
                data={"token": entry["tokens"]["refresh_token"], "client_id": client["client_id"]},
                auth=(client["client_id"], client["client_secret"]) if client.get("client_secret") else None,
            )
        assert revoked.status_code == 200
        # The live session's access token is due (its clock is the edge we move): the refresh is refused.
        live = pool._users._sessions[("protected", "oauth:bob")].conn
        assert live is not None
        assert live.auth is not None
        live.auth.context.token_expiry_time = 1.0
        with pytest.raises(UserAuthorizationRequiredError):
            await _whoami(pool, "oauth:bob")
        assert len(pool._users) == 0  # that session is closed
        await _login(protected.url, store, "oauth:bob", "bob")
        assert await _whoami(pool, "oauth:bob") == "subject: bob"
    finally:
        await pool.stop()
