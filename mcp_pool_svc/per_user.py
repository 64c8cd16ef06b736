"""Per-user upstream credentials: a session per (server, principal) for ``auth.per_user`` servers.

A server configured with ``auth: {type: oauth, per_user: true}`` is called with the caller's own
token, never another principal's and never the stack's. Its supervisor keeps the shared session
(the stack's authorization) for the tool catalog and health; every call runs on a session of the
calling principal, opened on demand with an OAuth provider bound to that principal's entry in the
token store (:mod:`toolscout_kit.token_store`, keyed by (principal, issuer, resource)). What the
server lists to a principal (tools, resources, templates, prompts) is listed on that session too
and kept with it briefly (:meth:`UserSessions.listed`).

Why a session per (server, principal) and not a per-request ``Authorization`` on the shared
session: the SDK's streamable-HTTP transport sends every request of a session from one writer task
with one ``httpx2`` client and one ``Auth`` (the caller's context does not reach it), and the MCP
specification tells servers to bind a session to the user it was opened for — a server may well
refuse or mis-attribute a request whose token names another user than its session did. A
session of its own per principal is the one arrangement in which the server sees each user
consistently, and refreshes and step-ups of one user cannot touch another's.

Bounded and idle-evicted: at most ``pool.per_user_sessions`` sessions (the least recently used
goes first) and a session unused for ``pool.per_user_idle`` seconds is closed. Measured with 200
principals on the test resource server (``bench/per_user_sessions.py``): ~1.0 MB of RSS per open
principal session, of which 0.15 MB are Python objects (tracemalloc); the rest is mostly the
session's own ``httpx2`` client (a server with ``auth`` gets a client of its own, see
:func:`mcp_pool_svc.session._remote_transport`). Opening one takes ~0.2 s (the handshake); a
call on it after that ~5 ms.

A principal without a token (or whose token can no longer be refreshed: revoked, expired refresh
token) gets :class:`~mcp_pool_svc.errors.UserAuthorizationRequiredError`: the session is closed, and
the gateway answers with its login route for that server. Nobody approves on a user's behalf here:
``auth.headless`` is ignored for per-user sessions.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar, cast

import anyio
from mcp.shared.auth_utils import resource_url_from_server_url

from mcp_pool_svc.errors import ServerUnavailableError, UserAuthorizationRequiredError
from mcp_pool_svc.session import Connection, ConnectionEvent, Connector
from toolscout_kit.config import OAuthConfig, RemoteServerConfig, StdioServerConfig
from toolscout_kit.logging import get_logger
from toolscout_kit.oauth_approval import AuthorizationError, NoApprover
from toolscout_kit.oauth_client import RemoteAuth
from toolscout_kit.token_store import STACK_PRINCIPAL, TOKEN_KEY_ENV, TokenStore, TokenStoreError

__all__ = ["USER_LISTING_FRESH", "Listing", "UserSessions", "is_per_user"]

log = get_logger(__name__)

T = TypeVar("T")

# Seconds what a server listed to one principal is reused (it goes with their session).
USER_LISTING_FRESH = 10.0


class Listing(StrEnum):
    """What a principal's session listed and keeps (:meth:`UserSessions.listed`)."""

    TOOLS = "tools"
    FEATURES = "features"  # resources, resource templates, prompts


def is_per_user(config: StdioServerConfig | RemoteServerConfig) -> bool:
    """Whether calls of this server run with each caller's own token."""
    return isinstance(config, RemoteServerConfig) and config.auth is not None and config.auth.per_user


# Makes the connector of one principal (its own OAuth provider per connection).
ConnectorFor = Callable[[RemoteAuth], Connector]


@dataclass(eq=False)
class _UserSession:
    server: str
    principal: str
    opened: asyncio.Event = field(default_factory=asyncio.Event)
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    conn: Connection | None = None
    error: BaseException | None = None
    task: asyncio.Task[None] | None = None
    last_used: float = field(default_factory=time.monotonic)
    busy: int = 0
    # What this principal's session listed: (monotonic time, value); see UserSessions.listed.
    listings: dict[Listing, tuple[float, Any]] = field(default_factory=dict)


def _authorization_failed(err: BaseException | None) -> bool:
    """Whether ``err`` (or one in its group: the transport's task group wraps it) is an AuthorizationError."""
    if isinstance(err, AuthorizationError):
        return True
    if isinstance(err, BaseExceptionGroup):
        return any(_authorization_failed(inner) for inner in err.exceptions)
    return False


def _login_needed(server: str) -> UserAuthorizationRequiredError:
    return UserAuthorizationRequiredError(
        f"MCP server {server!r} needs your own authorization: sign in at the gateway's login route "
        f"for it (/oauth/login/{server}); the call was not sent",
        server=server,
    )


class UserSessions:
    """The per-principal sessions of ``per_user`` servers (see the module docstring)."""

    def __init__(
        self,
        remote_auth: RemoteAuth,
        connector_for: ConnectorFor,
        *,
        max_sessions: int = 256,
        idle_seconds: float = 300.0,
        connect_timeout: Callable[[RemoteServerConfig], float] = lambda c: c.connect_timeout,
    ) -> None:
        self._auth = remote_auth
        self._connector_for = connector_for
        self._max = max_sessions
        self._idle = idle_seconds
        self._timeout = connect_timeout
        self._sessions: OrderedDict[tuple[str, str], _UserSession] = OrderedDict()
        self._sweeper: asyncio.Task[None] | None = None
        # Set (and replaced) whenever a session leaves: see wait_until.
        self._left = asyncio.Event()

    def __len__(self) -> int:
        return len(self._sessions)

    async def wait_until(self, predicate: Callable[[], bool], within: float) -> None:
        """Waits until ``predicate()`` holds after sessions left (event-driven, bounded).

        Raises:
            TimeoutError: it did not hold within ``within`` seconds.
        """
        with anyio.fail_after(within):
            while not predicate():
                await self._left.wait()

    def _forget(self, entry: _UserSession) -> None:
        if self._sessions.get((entry.server, entry.principal)) is entry:
            del self._sessions[(entry.server, entry.principal)]
            left, self._left = self._left, asyncio.Event()
            left.set()

    def _connector(self, principal: str) -> Connector:
        def nobody(name: str, _auth: OAuthConfig) -> NoApprover:
            return NoApprover(name)

        return self._connector_for(dataclasses.replace(self._auth, principal=principal, approver=nobody))

    @contextlib.asynccontextmanager
    async def session(
        self, name: str, config: RemoteServerConfig, principal: str
    ) -> AsyncIterator[Connection]:
        """The live session of ``principal`` for server ``name`` (opened on demand), in use until exit.

        Raises:
            UserAuthorizationRequiredError: no principal, or the principal has no usable token.
            ServerUnavailableError: the session could not be opened (not sent).
        """
        if not principal or principal == STACK_PRINCIPAL:
            raise UserAuthorizationRequiredError(
                f"MCP server {name!r} is called with each user's own authorization, and this call "
                "names no user (an authenticated caller is needed); the call was not sent",
                server=name,
            )
        live = self._sessions.get((name, principal))
        if (live is None or live.conn is None) and not await self._has_token(config, principal):
            raise _login_needed(name)
        entry = await self._open(name, config, principal)
        entry.busy += 1
        try:
            assert entry.conn is not None
            yield entry.conn
        finally:
            entry.busy -= 1
            entry.last_used = time.monotonic()

    async def listed(
        self,
        name: str,
        config: RemoteServerConfig,
        principal: str,
        fetch: Callable[[Connection], Awaitable[T]],
        fresh_for: float = USER_LISTING_FRESH,
        *,
        what: Listing = Listing.FEATURES,
    ) -> T:
        """``fetch(conn)`` on the principal's own session (what the server lists to them), kept
        with that session as ``what`` (its tools, its features) for ``fresh_for`` seconds: it goes
        when the session does.

        Raises:
            UserAuthorizationRequiredError: no principal, no usable token, or the server refused
                the principal's authorization meanwhile (the session is closed).
            ServerUnavailableError: the session could not be opened.
        """
        async with self.session(name, config, principal) as conn:
            entry = self._sessions.get((name, principal))
            kept = entry.listings.get(what) if entry is not None else None
            if kept is not None:
                at, value = kept
                if time.monotonic() - at < fresh_for:
                    return cast(T, value)
            try:
                value = await fetch(conn)
            except Exception:
                refused = self.authorization_failed(name, principal)
                if refused is not None:
                    raise refused from None
                raise
            if entry is not None:
                entry.listings[what] = (time.monotonic(), value)
            return value

    def authorization_failed(self, name: str, principal: str) -> UserAuthorizationRequiredError | None:
        """After a request failed on a user session: whether its authorization did (then it is closed)."""
        entry = self._sessions.get((name, principal))
        if entry is None or entry.conn is None:
            return None
        if entry.conn.auth is not None and entry.conn.auth.failure is not None:
            self._close(entry)
            return _login_needed(name)
        return None

    async def _has_token(self, config: RemoteServerConfig, principal: str) -> bool:
        if self._auth.store is None:
            self._auth.store = TokenStore.from_env(self._auth.environ)
        store = self._auth.store
        if not store.encrypted:
            raise TokenStoreError(
                f"server {config.url!r} keeps each user's token (auth.per_user): set {TOKEN_KEY_ENV} "
                "so that the token file is encrypted"
            )
        entry = await anyio.to_thread.run_sync(
            store.find, principal, resource_url_from_server_url(config.url)
        )
        return bool(entry and entry.get("tokens"))

    async def _open(self, name: str, config: RemoteServerConfig, principal: str) -> _UserSession:
        key = (name, principal)
        entry = self._sessions.get(key)
        if entry is not None and entry.conn is not None and entry.conn.closed.is_set():
            self._close(entry)
            entry = None
        if entry is None:
            entry = _UserSession(name, principal)
            self._sessions[key] = entry
            entry.task = asyncio.create_task(self._hold(entry, config), name=f"user-session-{name}")
            self._evict()
            self._ensure_sweeper()
        self._sessions.move_to_end(key)
        with anyio.move_on_after(self._timeout(config) + 1.0):
            await entry.opened.wait()
        if entry.conn is not None:
            return entry
        self._close(entry)
        if _authorization_failed(entry.error):
            raise _login_needed(name)
        raise ServerUnavailableError(
            f"MCP server {name!r} could not be reached with your authorization; the call was not sent"
        )

    async def _hold(self, entry: _UserSession, config: RemoteServerConfig) -> None:
        def on_event(kind: ConnectionEvent, detail: str) -> None:
            pass  # a lost session is noticed at its next use (conn.closed) and opened again

        try:
            async with self._connector(entry.principal)(entry.server, config, on_event) as conn:
                entry.conn = conn
                # Counted as used from now: the caller waiting on it resumes next.
                entry.last_used = time.monotonic()
                entry.opened.set()
                stopping = asyncio.ensure_future(entry.stop.wait())
                closed = asyncio.ensure_future(conn.closed.wait())
                try:
                    await asyncio.wait({stopping, closed}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    stopping.cancel()
                    closed.cancel()
        except Exception as err:  # reported to the waiting call, by type
            entry.error = err
            if not _authorization_failed(err):
                log.info("user_session_failed", server=entry.server, error=type(err).__name__)
        finally:
            entry.opened.set()
            self._forget(entry)

    def _close(self, entry: _UserSession) -> None:
        self._forget(entry)
        entry.stop.set()

    def _evict(self) -> None:
        while len(self._sessions) > self._max:
            victim = next((e for e in self._sessions.values() if e.busy == 0), None)
            if victim is None:
                return
            self._close(victim)

    def _ensure_sweeper(self) -> None:
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = asyncio.create_task(self._sweep(), name="user-session-sweeper")

    async def _sweep(self) -> None:
        while self._sessions:
            await asyncio.sleep(max(min(self._idle / 4, 30.0), 0.05))
            now = time.monotonic()
            for entry in list(self._sessions.values()):
                # One still opening is about to be used (its opening may outlast a short idle).
                if entry.busy == 0 and entry.conn is not None and now - entry.last_used > self._idle:
                    self._close(entry)

    async def aclose(self) -> None:
        """Closes every session (the pool is stopping)."""
        entries = list(self._sessions.values())
        for entry in entries:
            self._close(entry)
        tasks = [e.task for e in entries if e.task is not None]
        if self._sweeper is not None:
            self._sweeper.cancel()
            tasks.append(self._sweeper)
        if tasks:
            with anyio.move_on_after(10.0):
                await asyncio.gather(*tasks, return_exceptions=True)
