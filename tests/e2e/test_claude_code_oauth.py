"""Claude Code (npm ``@anthropic-ai/claude-code``) against the gateway as an OAuth 2.1 resource
server, offline: ``claude mcp add --transport http`` then ``claude mcp list`` reports that the server
needs authentication; ``claude mcp login`` reads the gateway's protected resource metadata, the
authorization server's metadata, registers itself and sends the user to the authorization server
with PKCE and the gateway as ``resource``; following that URL (the test authorization server approves
without a person) brings its code back to Claude Code's own loopback listener, and ``claude mcp list``
then connects with the token it got. Real ``toolscout up`` behind npm ``oidc-provider``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest

from tests.support.claude_code import ClaudeCode, claude_code_bin
from tests.support.oauth_servers import (
    AuthServer,
    OAuthGatewayStack,
    running_authorization_server,
    running_oauth_gateway,
)

pytestmark = [pytest.mark.e2e]


@pytest.fixture(scope="module")
def auth_server() -> Iterator[AuthServer]:
    with running_authorization_server(account="carol") as server:
        yield server


@pytest.fixture(scope="module")
def stack(auth_server: AuthServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OAuthGatewayStack]:
    tmp = tmp_path_factory.mktemp("gateway-claude")
    with running_oauth_gateway(auth_server.issuer, tmp, {"TOOLSCOUT_RUNTIME_DIR": str(tmp / "run")}) as stack:
        yield stack


def test_claude_code_finds_the_gateways_metadata_authorizes_and_connects(
    stack: OAuthGatewayStack, auth_server: AuthServer, tmp_path: Path
) -> None:
    gateway = stack.url
    claude = ClaudeCode(claude_code_bin(), tmp_path / "home")
    added = claude.run("mcp", "add", "--transport", "http", "toolscout", gateway)
    assert added.returncode == 0, added.stderr
    listed = claude.run("mcp", "list")
    assert f"toolscout: {gateway} (HTTP) - ! Needs authentication" in listed.stdout, listed.stdout
    codes = auth_server.grants("authorization_code")
    login = claude.on_terminal("mcp", "login", "toolscout", "--no-browser")
    try:
        shown = login.wait_for(lambda text: "paste the redirect url" in text.lower(), 60)
        url = next(word for word in shown.split() if word.startswith(f"{auth_server.issuer}/auth?"))
        asked = parse_qs(urlsplit(url).query)
        # What Claude Code learned from the gateway's 401 and metadata, and the issuer's metadata.
        assert asked["resource"] == [gateway]
        assert asked["code_challenge_method"] == ["S256"]
        assert "mcp:tools" in asked["scope"][0].split()
        assert asked["client_id"][0]  # registered dynamically at the authorization server
        assert urlsplit(asked["redirect_uri"][0]).hostname in ("localhost", "127.0.0.1")
        # The person at the browser: the test authorization server approves, and redirects to
        # Claude Code's own listener with the code.
        approved = httpx2.get(url, follow_redirects=True, timeout=30)
        assert approved.status_code == 200
        assert approved.url.path == urlsplit(asked["redirect_uri"][0]).path
        login.wait_for(lambda text: 'Authenticated with "toolscout"' in text, 60)
    finally:
        login.close()
    assert auth_server.grants("authorization_code") == codes + 1
    connected = claude.run("mcp", "list")
    assert f"toolscout: {gateway} (HTTP) - ✔ Connected" in connected.stdout, connected.stdout
    # The token Claude Code keeps: in no log line of the stack, nor in what Claude Code printed.
    [stored] = re.findall(
        r'"accessToken":\s*"([^"]+)"', (claude.home / ".claude" / ".credentials.json").read_text()
    )
    printed = login.text + listed.stdout + connected.stdout + connected.stderr
    assert '"event": "gateway started"' in stack.up.stderr  # the stack's log lines (INFO) are read
    assert stored not in stack.up.stderr + printed
