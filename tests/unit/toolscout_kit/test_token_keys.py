"""Rotating ``$TOOLSCOUT_TOKEN_KEY``: what a previous key made still opens, the current key makes everything new.

Real parts each: the token file on disk, the gateway's login links and sign-in state, and the sealed
``requestState`` of ``input_required`` rounds, each made under key A and used after the deployment
moved to key B with A in ``$TOOLSCOUT_TOKEN_KEY_PREVIOUS``, then once A is dropped.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from mcp.shared.exceptions import MCPError

from mcp_gateway_svc.input_rounds import HostRound, InputRounds, RoundOf
from mcp_gateway_svc.user_login import UserLogin
from mcp_pool_svc.pool import McpPool
from tests.support.mcp_servers import free_port
from toolscout_cli.__main__ import main
from toolscout_kit.config import parse_config
from toolscout_kit.oauth_client import RemoteAuth
from toolscout_kit.token_keys import TOKEN_KEY_ENV, TOKEN_KEY_PREVIOUS_ENV, KeyUse, TokenKeys
from toolscout_kit.token_store import CredentialKey, TokenStore, TokenStoreError

A, B, C = (Fernet.generate_key().decode() for _ in range(3))
ALICE = CredentialKey("oauth:alice", "https://as.example", "https://mcp.example/mcp")
CONFIG = parse_config(
    {"servers": {"gh": {"url": "https://mcp.example/mcp", "auth": {"type": "oauth", "per_user": True}}}}
)
ASKED = json.dumps(
    {"resultType": "input_required", "inputRequests": {"who": {"method": "roots/list"}}, "requestState": "s"}
)


def _env(tmp_path: Path, current: str, previous: str = "") -> dict[str, str]:
    env = {TOKEN_KEY_ENV: current, "TOOLSCOUT_TOKEN_FILE": str(tmp_path / "t.json")}
    if previous:
        env[TOKEN_KEY_PREVIOUS_ENV] = previous
    return env


def _opens_with(path: Path, key: str) -> bool:
    try:
        TokenStore(path, key=key).entries()
    except TokenStoreError:
        return False
    return True


def test_the_environment_gives_the_current_key_then_the_previous_ones_without_repeats() -> None:
    keys = TokenKeys.from_env({TOKEN_KEY_ENV: B, TOKEN_KEY_PREVIOUS_ENV: f" {A} ,{B},,{C},{A}"})
    assert keys.ring == (B, A, C)
    # Previous keys count only beside a current one.
    assert TokenKeys.from_env({TOKEN_KEY_PREVIOUS_ENV: A}).ring == ()
    # Each use has keys of its own; the current key seals, any verifies.
    assert len({k for use in KeyUse for k in keys.derived(use)}) == 3 * len(KeyUse)
    signature = TokenKeys(A).sign(KeyUse.LOGIN_TICKET, b"body")
    assert keys.verify(KeyUse.LOGIN_TICKET, b"body", signature)
    assert not keys.verify(KeyUse.LOGIN_STATE, b"body", signature)
    assert not TokenKeys(B).verify(KeyUse.LOGIN_TICKET, b"body", signature)


def test_a_token_file_written_under_a_previous_key_is_read_and_rewritten_under_the_current_one(
    tmp_path: Path,
) -> None:
    TokenStore.from_env(_env(tmp_path, A)).update(ALICE, {"tokens": {"access_token": "at-1"}})
    path = tmp_path / "t.json"
    with pytest.raises(TokenStoreError, match=f"{TOKEN_KEY_ENV} \\(another key"):
        TokenStore.from_env(_env(tmp_path, B)).entries()  # rotated without saying so: unreadable
    rotated = TokenStore.from_env(_env(tmp_path, B, A))
    assert rotated.find("oauth:alice", ALICE.resource)["tokens"] == {"access_token": "at-1"}  # type: ignore[index]
    assert _opens_with(path, A)  # reading changes nothing
    # The next write is under B (whatever it changes).
    rotated.update(ALICE, {"tokens": {"access_token": "at-2"}})
    assert _opens_with(path, B)
    assert not _opens_with(path, A)
    assert TokenStore(path, key=B).find("oauth:alice", ALICE.resource)["tokens"] == {"access_token": "at-2"}  # type: ignore[index]


def test_at_start_the_pool_moves_the_token_file_to_the_current_key(tmp_path: Path) -> None:
    TokenStore.from_env(_env(tmp_path, A)).update(ALICE, {"tokens": {"access_token": "at-1"}})
    path = tmp_path / "t.json"
    assert RemoteAuth(_env(tmp_path, B, f"{C},{A}")).renew_store()
    assert _opens_with(path, B)
    assert not _opens_with(path, A)
    assert TokenStore(path, key=B).find("oauth:alice", ALICE.resource)["tokens"] == {"access_token": "at-1"}  # type: ignore[index]
    # Already under the current key, missing, or unreadable: left as it is.
    assert not RemoteAuth(_env(tmp_path, B, A)).renew_store()
    assert not RemoteAuth(_env(tmp_path / "none", B, A)).renew_store()
    assert not RemoteAuth(_env(tmp_path, C, A)).renew_store()
    assert _opens_with(path, B)


async def test_a_pool_with_servers_that_authorize_renews_the_token_file_as_it_starts(tmp_path: Path) -> None:
    TokenStore.from_env(_env(tmp_path, A)).update(ALICE, {"tokens": {"access_token": "at-1"}})
    # The server is never reached (nothing listens there); the file is renewed before any connects.
    config = parse_config(
        {"servers": {"gh": {"url": f"http://127.0.0.1:{free_port()}/mcp", "auth": "oauth"}}},
        base_dir=tmp_path,
    )
    pool = McpPool(config, environ=_env(tmp_path, B, A))
    try:
        await pool.start()
    finally:
        await pool.stop()
    assert _opens_with(tmp_path / "t.json", B)


def test_a_previous_key_that_is_not_a_fernet_key_is_named_and_not_shown(tmp_path: Path) -> None:
    with pytest.raises(TokenStoreError, match=TOKEN_KEY_PREVIOUS_ENV) as caught:
        TokenStore.from_env(_env(tmp_path, B, "not-a-key-but-a-secret"))
    assert "not-a-key-but-a-secret" not in str(caught.value)


def test_login_links_and_sign_in_state_made_under_a_previous_key_open_until_it_is_dropped(
    tmp_path: Path,
) -> None:
    before = UserLogin(CONFIG, _env(tmp_path, A))
    assert before._sealer is not None
    fields = ["oauth:alice", "gh", "v" * 43, "http://gw.example/oauth/callback"]
    state = before._sealer.encrypt(json.dumps(fields).encode()).decode()
    ticket = before.ticket("oauth:alice", "gh")

    during = UserLogin(CONFIG, _env(tmp_path, B, A))
    opened = during._unseal(state)
    assert opened is not None
    assert (opened.principal, opened.server, opened.code_verifier) == tuple(fields[:3])
    assert during.principal_of(ticket, "gh") == "oauth:alice"
    # What the rotated replica makes is under B: a replica that only knows A refuses it.
    assert during._sealer is not None
    new_state = during._sealer.encrypt(json.dumps(fields).encode()).decode()
    assert before._unseal(new_state) is None
    assert before.principal_of(during.ticket("oauth:alice", "gh"), "gh") is None

    after = UserLogin(CONFIG, _env(tmp_path, B))
    assert after._unseal(state) is None
    assert after.principal_of(ticket, "gh") is None
    assert after._unseal(new_state) is not None


def test_an_input_round_sealed_under_a_previous_key_resumes_until_it_is_dropped(tmp_path: Path) -> None:
    state = InputRounds(_env(tmp_path, A)).wrap(RoundOf.TOOL, "greet", "rounds", ASKED).request_state
    assert state is not None
    during = InputRounds(_env(tmp_path, B, A))
    assert during.resume(RoundOf.TOOL, "greet", HostRound(None, state), server="rounds").request_state == "s"
    renewed = during.wrap(RoundOf.TOOL, "greet", "rounds", ASKED).request_state
    assert renewed is not None
    with pytest.raises(MCPError):
        InputRounds(_env(tmp_path, A)).resume(
            RoundOf.TOOL, "greet", HostRound(None, renewed), server="rounds"
        )
    after = InputRounds(_env(tmp_path, B))
    with pytest.raises(MCPError) as caught:
        after.resume(RoundOf.TOOL, "greet", HostRound(None, state), server="rounds")
    assert caught.value.code == -32602
    assert after.resume(RoundOf.TOOL, "greet", HostRound(None, renewed), server="rounds").request_state == "s"


def test_toolscout_auth_rekey_moves_a_token_file_to_the_current_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    TokenStore.from_env(_env(tmp_path, A)).update(ALICE, {"tokens": {"access_token": "at-1"}})
    for name, value in _env(tmp_path, B, A).items():
        monkeypatch.setenv(name, value)
    assert main(["auth", "rekey"]) == 0
    assert "rewritten under TOOLSCOUT_TOKEN_KEY" in capsys.readouterr().out
    assert _opens_with(tmp_path / "t.json", B)
    assert main(["auth", "rekey"]) == 0
    assert "already under" in capsys.readouterr().out
    monkeypatch.setenv(TOKEN_KEY_ENV, C)
    assert main(["auth", "rekey"]) != 0
    assert "does not decrypt" in capsys.readouterr().err
