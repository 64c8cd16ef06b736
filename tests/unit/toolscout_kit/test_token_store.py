"""The OAuth token file: owner-only, optionally encrypted, keyed by (principal, issuer, resource)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from toolscout_kit.config import parse_config
from toolscout_kit.errors import ConfigError
from toolscout_kit.token_store import CredentialKey, TokenStore, TokenStoreError, default_token_file

ALICE = CredentialKey("alice", "https://as.example", "https://mcp.example/mcp")
TOKENS = {"access_token": "at-secret-1", "refresh_token": "rt-secret-1", "token_type": "Bearer"}


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_file_and_its_folder_are_readable_by_the_owner_only(tmp_path: Path) -> None:
    store = TokenStore(tmp_path / "state" / "toolscout" / "oauth-tokens.json")
    store.update(ALICE, {"tokens": TOKENS})
    assert _mode(store.path) == 0o600
    assert _mode(store.path.parent) == 0o700
    assert store.find("alice", ALICE.resource) is not None


def test_a_file_others_can_read_is_refused(tmp_path: Path) -> None:
    store = TokenStore(tmp_path / "t.json")
    store.update(ALICE, {"tokens": TOKENS})
    store.path.chmod(0o644)
    with pytest.raises(TokenStoreError, match="readable by others"):
        store.find("alice", ALICE.resource)


def test_with_a_key_nothing_readable_is_at_rest(tmp_path: Path) -> None:
    key = Fernet.generate_key().decode()
    store = TokenStore(tmp_path / "t.json", key=key)
    store.update(ALICE, {"tokens": TOKENS})
    raw = store.path.read_bytes()
    assert b"at-secret-1" not in raw
    assert b"alice" not in raw
    assert TokenStore(store.path, key=key).find("alice", ALICE.resource)["tokens"] == TOKENS  # type: ignore[index]
    with pytest.raises(TokenStoreError, match="encrypted"):
        TokenStore(store.path).find("alice", ALICE.resource)
    with pytest.raises(TokenStoreError, match="does not decrypt"):
        TokenStore(store.path, key=Fernet.generate_key().decode()).find("alice", ALICE.resource)


def test_a_key_that_is_not_a_fernet_key_is_refused_with_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(TokenStoreError, match="generate_key"):
        TokenStore(tmp_path / "t.json", key="not-a-key")


def test_entries_are_kept_apart_by_principal_issuer_and_resource(tmp_path: Path) -> None:
    store = TokenStore(tmp_path / "t.json")
    bob = CredentialKey("bob", ALICE.issuer, ALICE.resource)
    other_server = CredentialKey("alice", ALICE.issuer, "https://other.example/mcp")
    other_issuer = CredentialKey("alice", "https://as2.example", ALICE.resource)
    for n, key in enumerate((ALICE, bob, other_server, other_issuer)):
        store.update(key, {"tokens": {"access_token": f"t{n}"}})
    assert store.find("bob", ALICE.resource)["tokens"]["access_token"] == "t1"  # type: ignore[index]
    assert store.find("alice", ALICE.resource, ALICE.issuer)["tokens"]["access_token"] == "t0"  # type: ignore[index]
    # Without an issuer, the newest of the principal's entries for the server.
    assert store.find("alice", ALICE.resource)["tokens"]["access_token"] == "t3"  # type: ignore[index]
    assert store.find("carol", ALICE.resource) is None
    assert store.remove("alice", ALICE.resource) == 2
    assert [k for k, _ in store.entries()] == sorted([bob, other_server])


def test_updates_merge_into_the_entry(tmp_path: Path) -> None:
    store = TokenStore(tmp_path / "t.json")
    store.update(ALICE, {"client": {"client_id": "c1"}})
    store.update(ALICE, {"tokens": TOKENS})
    entry = store.find("alice", ALICE.resource)
    assert entry is not None
    assert entry["client"] == {"client_id": "c1"}
    assert entry["tokens"] == TOKENS


def test_something_else_at_the_path_is_reported_not_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"hello": 1}))
    path.chmod(0o600)
    with pytest.raises(TokenStoreError, match="not a toolscout token file"):
        TokenStore(path).update(ALICE, {"tokens": TOKENS})
    assert json.loads(path.read_text()) == {"hello": 1}


def test_the_default_file_is_in_the_users_state_folder(tmp_path: Path) -> None:
    assert (
        default_token_file({"XDG_STATE_HOME": str(tmp_path)}) == tmp_path / "toolscout" / "oauth-tokens.json"
    )
    assert default_token_file({"TOOLSCOUT_TOKEN_FILE": str(tmp_path / "x.json")}) == tmp_path / "x.json"
    assert default_token_file({"HOME": "/home/u"}).parts[-3:] == ("state", "toolscout", "oauth-tokens.json")


def test_auth_oauth_is_shorthand_for_the_defaults() -> None:
    config = parse_config({"servers": {"gh": {"url": "https://mcp.example/mcp", "auth": "oauth"}}})
    auth = config.servers["gh"].auth  # type: ignore[union-attr]
    assert auth is not None
    assert (auth.grant, auth.client_id, auth.scopes, auth.per_user) == (
        "authorization_code",
        None,
        None,
        False,
    )


@pytest.mark.parametrize(
    ("auth", "problem"),
    [
        ({"type": "basic"}, "auth.type"),
        ({"grant": "client_credentials", "client_id": "c"}, "client_credentials needs"),
        ({"client_secret_env": "SECRET"}, "without client_id"),
        ({"client_id": "c", "client_secret_env": "not a var"}, "client_secret_env"),
        (
            {
                "per_user": True,
                "grant": "client_credentials",
                "client_id": "c",
                "client_secret_env": "S",
                "issuer": "https://as.example",
            },
            "per_user needs",
        ),
        ({"client_metadata_url": "http://plain.example/c.json"}, "client_metadata_url"),
        ({"scope": ["a"]}, "scope"),
    ],
)
def test_bad_auth_settings_name_the_key(auth: dict[str, object], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        parse_config(
            {"servers": {"gh": {"url": "https://mcp.example/mcp", "auth": {"type": "oauth", **auth}}}}
        )
