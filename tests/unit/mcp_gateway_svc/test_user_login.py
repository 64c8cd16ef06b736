"""Login tickets of per_user servers: signed, bound to one principal and one server, expiring."""

from __future__ import annotations

import json
import time
from pathlib import Path

from cryptography.fernet import Fernet

from mcp_gateway_svc.user_login import (
    LOGIN_PREFIX,
    TICKET_SECONDS,
    UserLogin,
    has_per_user_servers,
    sign_in_instructions,
)
from toolscout_kit.config import parse_config

CONFIG = parse_config(
    {
        "servers": {
            "gh": {"url": "https://mcp.example/mcp", "auth": {"type": "oauth", "per_user": True}},
            "shared": {"url": "https://other.example/mcp", "auth": "oauth"},
        }
    }
)


def _login(key: str | None = None) -> UserLogin:
    return UserLogin(CONFIG, {"TOOLSCOUT_TOKEN_KEY": key or Fernet.generate_key().decode()})


def test_a_ticket_names_its_principal_for_its_server_only() -> None:
    login = _login()
    ticket = login.ticket("oauth:alice", "gh")
    assert login.principal_of(ticket, "gh") == "oauth:alice"
    assert login.principal_of(ticket, "shared") is None
    body, _, signature = ticket.partition(".")
    forged = login.ticket("oauth:mallory", "gh").partition(".")[0] + "." + signature
    assert login.principal_of(forged, "gh") is None
    assert login.principal_of(body, "gh") is None
    assert login.principal_of("", "gh") is None


def test_a_ticket_expires_and_another_key_does_not_accept_it() -> None:
    key = Fernet.generate_key().decode()
    login = _login(key)
    old = login.ticket("oauth:alice", "gh", now=time.time() - TICKET_SECONDS - 1)
    assert login.principal_of(old, "gh") is None
    # Replicas sharing the key accept each other's tickets; another key does not.
    ticket = login.ticket("oauth:alice", "gh")
    assert _login(key).principal_of(ticket, "gh") == "oauth:alice"
    assert _login().principal_of(ticket, "gh") is None


def test_links_point_at_the_login_route_and_need_the_key() -> None:
    link = _login().link("http://gw.example:8080/", "oauth:alice", "gh")
    assert link.startswith(f"http://gw.example:8080{LOGIN_PREFIX}gh?ticket=")
    assert "alice" not in link.split("ticket=")[0]
    assert UserLogin(CONFIG, {}).link("http://gw.example", "oauth:alice", "gh") == ""
    assert [name for name in CONFIG.servers if _login().per_user(name)] == ["gh"]
    assert has_per_user_servers(CONFIG)


def test_a_sealed_sign_in_state_opens_on_any_replica_with_the_key_and_hides_the_verifier() -> None:
    key = Fernet.generate_key().decode()
    here, there = _login(key), _login(key)
    assert here._sealer is not None
    fields = ["oauth:alice", "gh", "verifier-" + "v" * 40, "http://gw.example/oauth/callback"]
    state = here._sealer.encrypt(json.dumps(fields).encode()).decode()
    assert "verifier" not in state
    assert "alice" not in state
    opened = there._unseal(state)
    assert opened is not None
    assert (opened.principal, opened.server, opened.code_verifier) == tuple(fields[:3])
    assert _login()._unseal(state) is None  # another key
    assert there._unseal(state[:-4] + "AAAA") is None  # edited
    assert there._unseal("") is None
    assert UserLogin(CONFIG, {})._unseal(state) is None  # no key: no per-user sign-in at all


async def test_a_callback_whose_sign_in_left_nothing_in_the_token_store_asks_to_start_again(
    tmp_path: Path,
) -> None:
    key = Fernet.generate_key().decode()
    login = UserLogin(CONFIG, {"TOOLSCOUT_TOKEN_KEY": key, "TOOLSCOUT_TOKEN_FILE": str(tmp_path / "t.json")})
    assert login._sealer is not None
    fields = ["oauth:alice", "gh", "v" * 43, "http://gw.example/oauth/callback"]
    state = login._sealer.encrypt(json.dumps(fields).encode()).decode()
    scope = {"type": "http", "method": "GET", "path": "/oauth/callback"}
    answer = await login._answer({**scope, "query_string": f"code=abc&state={state}".encode()})
    assert answer[0] == 502
    assert "start again" in answer[1]
    # Refused at the authorization server: said so, nothing else happens.
    refused = await login._answer({**scope, "query_string": f"error=access_denied&state={state}".encode()})
    assert refused[:2] == (403, "sign-in refused by the authorization server (access_denied)\n")
    # A state for a server without per-user sign-in is not finished.
    other = login._sealer.encrypt(json.dumps(["oauth:alice", "shared", "v" * 43, "x"]).encode()).decode()
    assert (await login._answer({**scope, "query_string": f"code=abc&state={other}".encode()}))[0] == 400


def test_sign_in_instructions_name_each_server_with_its_link_within_the_hosts_limit() -> None:
    text = sign_in_instructions([("notes", "https://gw/oauth/login/notes?ticket=t1"), ("mail", "")])
    assert "- notes: sign in at https://gw/oauth/login/notes?ticket=t1\n- mail\n" in text
    many = [(f"server{i}", f"https://gw/oauth/login/server{i}?ticket={'t' * 150}") for i in range(30)]
    capped = sign_in_instructions(many)
    assert len(capped.encode()) <= 2048
    assert "- server0: sign in at https://gw/oauth/login/server0?ticket=" in capped
    assert "server29 (a call of one of their tools answers with its link)" in capped
