"""OAuth 2.1 for tests: a real authorization server (npm ``oidc-provider``) and an MCP server that
validates its tokens (the ``mcp`` SDK's resource-server side).

Node >= 22 and npm come from :mod:`tests.support.node` (the conformance suite itself:
:mod:`tests.support.conformance`). Processes listen on 127.0.0.1 only and print JSON lines on stdout,
which :class:`_Lines` collects so that a test can wait (bounded) for an event.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.support.mcp_servers import NPM_PREFIX, REPO_ROOT
from tests.support.node import node_bin_dir, node_env, npm_install

if TYPE_CHECKING:
    from mcp.shared.auth import AuthorizationCodeResult

    from tests.support.cli_stack import UpProcess
    from toolscout_kit.token_store import TokenStore

__all__ = [
    "OIDC_PROVIDER_PACKAGE",
    "OIDC_PROVIDER_VERSION",
    "AuthServer",
    "IntrospectionClient",
    "LoginHint",
    "OAuthGatewayStack",
    "ProtectedServer",
    "login_as",
    "oidc_provider_module",
    "running_authorization_server",
    "running_oauth_gateway",
    "running_protected_server",
]

OIDC_PROVIDER_PACKAGE = "oidc-provider"
OIDC_PROVIDER_VERSION = "9.13.3"
_SUPPORT = REPO_ROOT / "tests" / "support"


def oidc_provider_module(timeout: float = 300.0) -> Path:
    """``oidc-provider``'s entry file, installed at the pinned version on first use."""
    return npm_install(OIDC_PROVIDER_PACKAGE, OIDC_PROVIDER_VERSION, NPM_PREFIX, timeout) / "lib" / "index.js"


@dataclass
class _Lines:
    """The JSON lines a process prints, collected by a thread; waits are bounded."""

    process: subprocess.Popen[str]
    items: list[dict[str, Any]] = field(default_factory=list)
    _changed: threading.Condition = field(default_factory=threading.Condition)
    _reader: threading.Thread | None = None

    def start(self) -> None:
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def stop(self) -> None:
        """Ends the process and closes its output once read."""
        _stop(self.process)
        if self._reader is not None:
            self._reader.join(10)
        if self.process.stdout is not None:
            self.process.stdout.close()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                item = json.loads(line)
            except ValueError:
                continue
            with self._changed:
                self.items.append(item)
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], within: float = 60.0) -> dict[str, Any]:
        """The first line matching ``predicate``.

        Raises:
            RuntimeError: none within ``within`` seconds, or the process ended first.
        """
        with self._changed:
            found = self._changed.wait_for(
                lambda: any(predicate(i) for i in self.items) or self.process.poll() is not None, within
            )
            match = next((i for i in self.items if predicate(i)), None)
        if not found or match is None:
            raise RuntimeError(f"no such line within {within:g}s (process exit: {self.process.poll()})")
        return match

    def matching(self, predicate: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
        with self._changed:
            return [i for i in self.items if predicate(i)]

    def settled(self, base_url: str, predicate: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
        """:meth:`matching`, once every line the process printed so far has been read.

        The process prints a line before it answers the request the line is about, but a thread
        reads what it prints: a line printed just now may not be read yet. So the process is asked
        to print a mark (``GET <base_url>/_mark``); once the mark is read, so is every line before it.
        """
        mark = secrets.token_hex(8)
        with urllib.request.urlopen(f"{base_url}/_mark?n={mark}", timeout=10) as reply:  # noqa: S310 - a local URL
            assert reply.status == 204
        self.wait_for(lambda i: i.get("event") == "mark" and i.get("n") == mark, within=10)
        return self.matching(predicate)


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@dataclass(frozen=True)
class IntrospectionClient:
    """A resource server's client at the authorization server: it may introspect any token,
    authenticating by ``method`` (``client_secret_basic``, ``client_secret_post``, ``none``)."""

    client_id: str
    secret: str | None = None
    method: str = "client_secret_basic"

    def registered(self) -> dict[str, str]:
        """Its registration as ``oidc-provider`` reads it."""
        client = {"client_id": self.client_id, "token_endpoint_auth_method": self.method}
        if self.secret is not None:
            client["client_secret"] = self.secret
        return client


@dataclass
class AuthServer:
    issuer: str
    lines: _Lines

    def introspections(self) -> int:
        """How many introspection requests came so far."""
        return self._count(lambda i: i.get("event") == "introspection")

    def grants(self, grant_type: str) -> int:
        """How many tokens were issued with ``grant_type`` so far."""
        return self._count(lambda i: i.get("event") == "grant" and i.get("grant_type") == grant_type)

    def _count(self, predicate: Callable[[dict[str, Any]], bool]) -> int:
        return len(self.lines.settled(self.issuer, predicate))


@contextmanager
def running_authorization_server(
    *,
    account: str = "alice",
    access_token_ttl: int = 600,
    access_token_format: str = "jwt",  # noqa: S107 - a format name
    introspection_clients: Sequence[IntrospectionClient] = (),
    timeout: float = 60.0,
) -> Iterator[AuthServer]:
    """``oidc-provider`` on a free port of 127.0.0.1 that approves ``account`` without a person.

    ``access_token_format`` ``opaque`` hands out tokens only introspection can check;
    ``introspection_clients`` are resource servers' clients that may introspect."""
    module = oidc_provider_module()
    env = {**node_env(), "OIDC_PROVIDER_MODULE": str(module), "OIDC_ACCOUNT": account}
    env["ACCESS_TOKEN_TTL"] = str(access_token_ttl)
    env["ACCESS_TOKEN_FORMAT"] = access_token_format
    env["INTROSPECTION_CLIENTS"] = json.dumps([client.registered() for client in introspection_clients])
    process = subprocess.Popen(
        [str(node_bin_dir() / "node"), str(_SUPPORT / "oidc_provider.mjs")],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    lines = _Lines(process)
    lines.start()
    try:
        issuer = str(lines.wait_for(lambda i: "issuer" in i, timeout)["issuer"])
        yield AuthServer(issuer, lines)
    finally:
        lines.stop()


@dataclass
class ProtectedServer:
    url: str
    lines: _Lines

    def subjects(self) -> list[str | None]:
        """The subject of each ``whoami`` call so far, in order."""
        return [i.get("subject") for i in self.lines.settled(self._base, lambda i: i.get("call") == "whoami")]

    @property
    def _base(self) -> str:
        return self.url.removesuffix("/mcp")

    def wait_subjects(self, count: int, within: float = 30.0) -> list[str | None]:
        """The subjects once at least ``count`` calls were printed (bounded: then as many as came)."""
        with self.lines._changed:
            self.lines._changed.wait_for(lambda: len(self.subjects_unlocked()) >= count, within)
        return self.subjects()

    def subjects_unlocked(self) -> list[str | None]:
        return [i.get("subject") for i in self.lines.items if i.get("call") == "whoami"]

    def requests(self) -> list[tuple[str, str | None]]:
        """(kind, subject) of every request answered so far, in order: ``whoami`` (the tool),
        ``resource``, ``prompt`` or ``complete``."""
        return [
            (str(i["call"]), i.get("subject")) for i in self.lines.settled(self._base, lambda i: "call" in i)
        ]

    def wait_requests(self, count: int, within: float = 30.0) -> list[tuple[str, str | None]]:
        """:meth:`requests` once at least ``count`` were printed (bounded: then as many as came)."""
        with self.lines._changed:
            self.lines._changed.wait_for(lambda: sum("call" in i for i in self.lines.items) >= count, within)
        return self.requests()


@contextmanager
def running_protected_server(
    issuer: str, timeout: float = 60.0, *, per_subject_tools: bool = False
) -> Iterator[ProtectedServer]:
    """:mod:`tests.support.protected_mcp_server` for tokens of ``issuer``, on a free port
    (``per_subject_tools``: it lists a tool ``notebook_<subject>`` to each subject only)."""
    process = subprocess.Popen(
        [
            sys.executable,
            str(_SUPPORT / "protected_mcp_server.py"),
            issuer,
            *(["--per-subject-tools"] if per_subject_tools else []),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    lines = _Lines(process)
    lines.start()
    try:
        url = str(lines.wait_for(lambda i: "url" in i, timeout)["url"])
        yield ProtectedServer(url, lines)
    finally:
        lines.stop()


class LoginHint:
    """Headless approval as one user of the test authorization server (its ``login_hint``)."""

    def __init__(self, user: str) -> None:
        from toolscout_kit.oauth_approval import HeadlessApprover

        self._inner = HeadlessApprover()
        self.redirect_uri = self._inner.redirect_uri
        self._user = user

    async def __call__(self, authorization_url: str) -> AuthorizationCodeResult:
        return await self._inner(f"{authorization_url}&login_hint={self._user}")


async def login_as(url: str, store: TokenStore, principal: str, user: str) -> None:
    """Runs the authorization code flow for ``principal`` as ``user`` (stored in ``store``)."""
    import httpx2

    from toolscout_kit.config import OAuthConfig
    from toolscout_kit.oauth_client import build_provider

    provider = build_provider(
        url, OAuthConfig(), store=store, approver=LoginHint(user), environ={}, principal=principal
    )
    async with httpx2.AsyncClient(auth=provider, timeout=30) as client:
        body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        await client.post(url, json=body, headers={"accept": "application/json, text/event-stream"})
    if provider.failure is not None:
        raise RuntimeError(f"login as {user} failed: {provider.failure}")


@dataclass
class OAuthGatewayStack:
    """A running ``toolscout up`` whose gateway is behind an authorization server."""

    endpoints: dict[str, str]
    up: UpProcess

    @property
    def url(self) -> str:
        """The gateway's ``/mcp`` URL."""
        return self.endpoints["gateway"]

    @property
    def metrics(self) -> dict[str, str]:
        """Each service's /metrics URL (empty unless started with ``metrics=True``)."""
        ready = next(e for e in self.up.seen if e.get("event") == "ready")
        return dict(ready.get("metrics") or {})


@contextmanager
def running_oauth_gateway(
    issuer: str,
    folder: Path,
    env: dict[str, str],
    *,
    timeout: float = 180.0,
    metrics: bool = False,
    log_level: str = "INFO",
) -> Iterator[OAuthGatewayStack]:
    """``toolscout up`` (the example servers of :func:`tests.support.cli_stack.stack_config`) with
    its gateway behind ``issuer`` (``gateway.oauth``, scope ``mcp:tools``); its services' log lines
    are ``.up.stderr`` (at ``log_level``); ``metrics``: each service serves /metrics on a free port.

    The audience names the gateway's port, so it is picked before the start; another process may
    take a free port in between (a loaded machine): a start refused for that is tried on another.
    """
    from tests.support.cli_stack import UpProcess, stack_config
    from tests.support.mcp_servers import free_port

    for attempt in range(3):
        port = free_port()
        config = stack_config(
            folder / f"config{attempt}.json", gateway_port=port, metrics_port=0 if metrics else -1
        )
        document = json.loads(config.read_text())
        document["toolscout"]["gateway"]["oauth"] = {
            "issuer": issuer,
            "audience": f"http://127.0.0.1:{port}",
            "required_scopes": ["mcp:tools"],
        }
        config.write_text(json.dumps(document))
        # The services' log lines onto stderr: they are there to be checked for secrets.
        up = UpProcess(config, "--log-level", log_level, env=env)
        try:
            endpoints = up.wait_ready(timeout=timeout)
            break
        except RuntimeError as err:
            up.stop()
            if "Address already in use" not in str(err) or attempt == 2:
                raise
    try:
        yield OAuthGatewayStack(endpoints, up)
    finally:
        up.stop()
