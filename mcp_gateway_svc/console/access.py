"""Who is looking at the console, what they may see, and whether a form really came from it.

A browser cannot put the gateway's bearer token on a page load, so the console signs people in
once: the login form takes the same token an MCP host sends (checked by the gateway's own
:class:`~mcp_gateway_svc.front.Tenants`), and a random session id in an ``HttpOnly``,
``SameSite=Strict`` cookie then stands for it. Without configured tokens every visitor is the one
local user (the console is only served on loopback then, unless ``gateway.console`` is ``on``).
A request that carries ``Authorization: Bearer`` is taken as that token's tenant, as at ``/mcp``.

Each session has its own CSRF token; a POST must send it back (form field or ``X-CSRF-Token``)
and, when the browser says where it comes from (``Origin``, ``Sec-Fetch-Site``), come from the
console's own origin. Sessions live in this replica's memory: several replicas behind one address
need sticky sessions for the console.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request

from mcp_gateway_svc.front import Tenant, Tenants
from toolscout_kit.config import ToolSetConfig

__all__ = ["COOKIE", "Access", "ConsoleSession", "Sessions", "Viewer"]

COOKIE = "toolscout_console"
_LOCAL = Tenant("", frozenset({"*"}))
_MAX_SESSIONS = 2000
_IDLE_SECONDS = 12 * 3600.0


@dataclass
class ConsoleSession:
    """One browser's session: its CSRF token, who signed in, and its chat so far."""

    sid: str
    csrf: str
    tenant: Tenant | None = None
    seen: float = field(default_factory=time.monotonic)
    # The chat page's conversation (toolscout.client ChatMessages), its model, toolset and loaded tools.
    chat: dict[str, Any] = field(default_factory=dict)


class Sessions:
    """Sessions by id, the least recently used dropped past a bound, idle ones after 12 h."""

    def __init__(self, max_sessions: int = _MAX_SESSIONS, idle_seconds: float = _IDLE_SECONDS) -> None:
        self._by_id: OrderedDict[str, ConsoleSession] = OrderedDict()
        self._max = max_sessions
        self._idle = idle_seconds

    def get(self, sid: str | None) -> ConsoleSession | None:
        session = self._by_id.get(sid) if sid else None
        if session is None:
            return None
        now = time.monotonic()
        if now - session.seen > self._idle:
            del self._by_id[session.sid]
            return None
        session.seen = now
        self._by_id.move_to_end(session.sid)
        return session

    def new(self, tenant: Tenant | None = None) -> ConsoleSession:
        session = ConsoleSession(secrets.token_urlsafe(32), secrets.token_urlsafe(32), tenant)
        self._by_id[session.sid] = session
        while len(self._by_id) > self._max:
            self._by_id.popitem(last=False)
        return session

    def drop(self, session: ConsoleSession) -> None:
        self._by_id.pop(session.sid, None)


@dataclass(frozen=True)
class Viewer:
    """Who a request is, and what of the stack they may see."""

    tenant: Tenant
    # The toolsets shown ("" = every tool, only for a token allowed all toolsets).
    toolsets: tuple[str, ...]
    # The servers shown; None = all of them.
    servers: frozenset[str] | None
    may_chat: bool
    signed_in: bool

    def may_see_server(self, server: str) -> bool:
        return self.servers is None or server in self.servers

    def may_use_toolset(self, toolset: str) -> bool:
        return toolset in self.toolsets


class Access:
    """The console's access rules over the gateway's tokens and the configured toolsets."""

    def __init__(self, tenants: Tenants, tool_sets: Mapping[str, ToolSetConfig], chat: Sequence[str]) -> None:
        self.tenants = tenants
        self.sessions = Sessions()
        self._tool_sets = dict(tool_sets)
        self._chat = frozenset(chat)

    @property
    def needs_sign_in(self) -> bool:
        return self.tenants.enabled

    def viewer(self, request: Request, session: ConsoleSession | None) -> Viewer | None:
        """The viewer of ``request``; None when tokens are configured and none was given."""
        if not self.tenants.enabled:
            return self._viewer(_LOCAL, signed_in=False)
        bearer = request.headers.get("authorization")
        tenant = self.tenants.authenticate(bearer) if bearer else None
        if tenant is None and session is not None:
            tenant = session.tenant
        return self._viewer(tenant, signed_in=True) if tenant is not None else None

    def _viewer(self, tenant: Tenant, *, signed_in: bool) -> Viewer:
        configured = sorted(self._tool_sets)
        if "*" in tenant.toolsets:
            toolsets: tuple[str, ...] = ("", *configured)
            servers: frozenset[str] | None = None
        else:
            toolsets = tuple(name for name in configured if name in tenant.toolsets)
            servers = frozenset(s for name in toolsets for s in self._tool_sets[name].servers)
        may_chat = "*" in self._chat or (bool(tenant.principal) and tenant.principal in self._chat)
        return Viewer(tenant, toolsets, servers, may_chat and bool(toolsets), signed_in)

    def sign_in(self, token: str) -> Tenant | None:
        return self.tenants.authenticate(f"Bearer {token}") if token else None


def csrf_ok(session: ConsoleSession | None, given: str | None) -> bool:
    return session is not None and bool(given) and hmac.compare_digest(session.csrf, given or "")


def same_origin(request: Request) -> bool:
    """False when the browser says the request comes from another site or origin."""
    site = request.headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return False
    origin = request.headers.get("origin")
    if origin is None:
        return True
    host = request.headers.get("host", "")
    # Either scheme: behind a proxy that ends TLS the console sees http, the browser says https.
    return bool(host) and origin in (f"http://{host}", f"https://{host}")
