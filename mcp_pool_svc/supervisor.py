"""Supervision of one MCP server: connect, watch, restart with backoff, never give up.

One :class:`Supervisor` per configured server runs :meth:`Supervisor.run` as its own task. It keeps
one negotiated session open, has its :class:`~mcp_pool_svc.listing.ServerListing` keep the
server's tools current in the catalog (on change notifications, on the TTL, after calls),
checks health to find a hung server (:func:`~mcp_pool_svc.liveness.probe`: ``ping``, or a
``server/discover`` probe at 2026-07-28, at once when a change stream drops), stops an idle stdio
server when ``idle_timeout`` is set, and reconnects after any loss with exponential backoff and
jitter, for as long as the server is configured:

* a stdio server that fails to start more than ``crash_loop_restarts`` times within
  ``crash_loop_window`` is FAILED, and probed again with the backoff growing up to
  ``failed_retry_interval`` (the first probe that works makes it READY again);
* a server that was READY in between starts the count again, so a call that crashes its server
  cannot park it; a remote server that cannot be reached is RECONNECTING, never FAILED;
* a lost session is marked not ready *before* it is torn down, so no new call is routed to it.

Leaving a connection always goes through the transport's own shutdown, which kills the stdio
server's whole process tree. What a server lists (tools, and any new kind of catalog entry) is
followed in :mod:`mcp_pool_svc.listing`, not here.
"""

from __future__ import annotations

import asyncio
import enum
import random
import time
from collections import deque
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Literal

import anyio
import mcp_types
from mcp.shared.exceptions import MCPError
from toolscout.client import ServerStatus

from mcp_pool_svc.catalog import Catalog
from mcp_pool_svc.errors import ServerUnavailableError
from mcp_pool_svc.features import FeatureCatalog
from mcp_pool_svc.listing import ServerListing
from mcp_pool_svc.liveness import SessionLostError, describe_error, first_cause, probe
from mcp_pool_svc.metrics import PoolMetrics
from mcp_pool_svc.per_user import is_per_user
from mcp_pool_svc.probes import Probes
from mcp_pool_svc.relay import HostSession
from mcp_pool_svc.session import Connection, ConnectionEvent, Connector, transport_name
from toolscout_kit.config import PoolSettings, RemoteServerConfig, StdioServerConfig
from toolscout_kit.logging import get_logger

__all__ = ["ServerState", "Supervisor", "backoff_delay", "describe_error"]

log = get_logger(__name__)

HEALTH_PREFIX = "toolscout.mcp_pool.v1.server."


class ServerState(enum.StrEnum):
    """Lifecycle of one server's connection; the value is :attr:`ServerStatus.state`'s string."""

    STARTING = "starting"
    READY = "ready"
    RECONNECTING = "reconnecting"
    FAILED = "failed"
    IDLE = "idle"
    STOPPED = "stopped"


def _quiet(kind: ConnectionEvent, detail: str) -> None:
    """A probe's session coming and going says nothing of its server's state."""


def backoff_delay(attempt: int, initial: float, maximum: float, rng: random.Random) -> float:
    """Exponential backoff with "equal jitter": between half and all of the capped delay."""
    capped = min(maximum, initial * (2 ** min(attempt, 30)))
    return float(capped / 2 + rng.uniform(0, capped / 2))


_Exit = Literal["stop", "idle"]
# A session that lasted this long was healthy: the next restart starts the backoff again.
_STABLE_SECONDS = 10.0
# Seconds a ready remote session has, once asked to stop, to close politely: the transport ends the
# session at the server (streamable HTTP: its DELETE), so the server need not keep it until its own
# timeout. Past this, the close is cancelled as any other.
_POLITE_CLOSE = 2.0


class Supervisor:
    """Keeps one server connected and reports its state."""

    def __init__(
        self,
        name: str,
        config: StdioServerConfig | RemoteServerConfig,
        settings: PoolSettings,
        *,
        connector: Connector,
        catalog: Catalog,
        metrics: PoolMetrics,
        on_change: Callable[[str], None],
        rng: random.Random,
        probes: Probes | None = None,
        features: FeatureCatalog | None = None,
    ) -> None:
        """``probes``: the pool's shared probe and connection budget (a budget of its own if None);
        ``features``: where the server's resources, templates and prompts are listed (none without)."""
        self.name = name
        self.config = config
        self._settings = settings
        # Opens this server's connections (its own one, and those opened for one host's call).
        self.connector = connector
        self._catalog = catalog
        self._metrics = metrics
        self._on_change = on_change
        self._rng = rng
        self._probes = probes or Probes(settings, rng)
        self.listing = ServerListing(
            name,
            config,
            settings,
            catalog=catalog,
            metrics=metrics,
            on_change=on_change,
            features=features,
            handshake=self.handshake_capabilities,
        )
        # What the server offers a handshake-era session: probed once (see handshake_capabilities).
        self._handshake_probed = False
        self._handshake_caps: mcp_types.ServerCapabilities | None = None
        self._protocol_version = ""
        self._check_now = False
        self._state = ServerState.STARTING
        self._state_since = time.time()
        self._changed = asyncio.Event()
        self._poke = asyncio.Event()
        self._stop = asyncio.Event()
        self._wake = asyncio.Event()
        self._conn: Connection | None = None
        self._restarts = 0
        self._last_error = ""
        self._stream_error = ""
        self._reported_incomplete = False
        self._exit_detail = ""
        self._server_info = ""
        self._next_retry = 0.0
        self._inflight = 0
        self._calls_idle = asyncio.Event()
        self._calls_idle.set()
        self._lost_during_call = False
        self._session_was_stable = False
        self._last_activity = time.monotonic()
        self._attempt: anyio.CancelScope | None = None
        self.semaphore = asyncio.Semaphore(config.max_concurrency)
        # Calls to tools not annotated read-only take this first (see serialize_writes).
        self.write_lock: asyncio.Lock | None = asyncio.Lock() if config.serialize_writes else None

    # --- what the pool reads --------------------------------------------------------------

    @property
    def state(self) -> ServerState:
        return self._state

    @property
    def is_remote(self) -> bool:
        return isinstance(self.config, RemoteServerConfig)

    def status(self) -> ServerStatus:
        writes, unannotated = self._catalog.write_counts(self.name)
        return ServerStatus(
            name=self.name,
            transport=transport_name(self.config),
            state=self._state,
            tool_count=self._catalog.tool_count(self.name),
            restarts=self._restarts,
            last_error=self._last_error,
            state_since_unix=self._state_since,
            defer_loading=self.config.defer_loading,
            health_service=HEALTH_PREFIX + self.name,
            server_info=self._server_info,
            next_retry_unix=self._next_retry,
            protocol_version=self._protocol_version,
            tool_cache_ttl_seconds=self.listing.ttl,
            change_notifications=self._conn is not None and self._conn.change_notifications,
            serialize_writes=self.write_lock is not None,
            serialized_tools=writes if self.write_lock is not None else 0,
            unannotated_tools=unannotated,
        )

    async def handshake_capabilities(self) -> mcp_types.ServerCapabilities | None:
        """What this remote server offers a handshake-era session (``initialize`` at the SDK's
        latest handshake revision), probed once on a session opened for it, then cached: a server
        the pool speaks 2026-07-28 with may offer there what that revision does otherwise or not at
        all (resource subscriptions). None for a stdio or ``per_user`` server (one more session is
        not the server's own), and when the probe failed (logged, not tried again; the next session
        of a restarted pool probes afresh)."""
        if not isinstance(self.config, RemoteServerConfig) or is_per_user(self.config):
            return None
        if not self._handshake_probed:
            opening = self.connector(
                self.name, self.config, _quiet, HostSession(mcp_types.ClientCapabilities())
            )
            try:
                async with opening as conn:
                    self._handshake_caps = conn.session.server_capabilities
            except Exception as err:
                log.info("mcp_server_handshake_probe_failed", server=self.name, error=type(err).__name__)
            # Only once it ended: a probe cancelled with its listing is tried on the next one.
            self._handshake_probed = True
        return self._handshake_caps

    def unavailable_message(self) -> str:
        """Why a call cannot be sent now, written for the caller (and the LLM): no internals."""
        text = f"MCP server {self.name!r} is {self._state.value}; the call was not sent"
        if self._next_retry:
            text += f" (next connection attempt in {max(self._next_retry - time.time(), 0):.0f}s)"
        return text

    async def connection_for_call(
        self, *, wait_for_restart: bool = False, not_this: Connection | None = None
    ) -> Connection:
        """The live connection, starting an idle server and waiting out a first start.

        With ``wait_for_restart`` a server that is reconnecting is waited for too (the caller
        bounds the wait), and ``not_this`` (a connection that was just lost) is never returned.

        Raises:
            ServerUnavailableError: the server is reconnecting, failed or stopped.
        """
        while True:
            conn = self._conn
            if (
                self._state is ServerState.READY
                and conn is not None
                and conn is not not_this
                and not conn.closed.is_set()
            ):
                return conn
            if self._state is ServerState.IDLE:
                self._wake.set()
            elif self._state in (ServerState.STARTING, ServerState.READY) or (
                wait_for_restart and self._state is ServerState.RECONNECTING
            ):
                # READY here means its connection was lost a moment ago: the supervisor is about to
                # take it out of service.
                pass
            else:
                raise ServerUnavailableError(self.unavailable_message())
            changed = self._changed
            await changed.wait()

    def connection_refused(self) -> None:
        """A request could not reach the server: check the session now (a health check that is
        refused too ends it), rather than at the next ping."""
        self._check_now = True
        self._poke.set()

    def call_started(self) -> None:
        self._inflight += 1
        self._calls_idle.clear()
        self._last_activity = time.monotonic()

    def call_finished(self) -> None:
        self._inflight -= 1
        self._last_activity = time.monotonic()
        if self._inflight == 0:
            self._calls_idle.set()
            if self._idle_timeout is not None:
                self._poke.set()

    async def wait_idle(self) -> None:
        """Returns once no call is in flight on this server (the caller bounds the wait)."""
        await self._calls_idle.wait()

    @property
    def stop_requested(self) -> bool:
        return self._stop.is_set()

    def request_stop(self) -> None:
        self._stop.set()
        self._poke.set()
        self._wake.set()
        attempt = self._attempt
        if attempt is None:
            return
        if self._conn is not None and isinstance(self.config, RemoteServerConfig):
            # Ready: its monitor returns at the poke and the connection closes as usual, bounded.
            attempt.deadline = min(attempt.deadline, anyio.current_time() + _POLITE_CLOSE)
        else:
            # Starting (it may be stuck in initialize), or a process: its own teardown is shielded.
            attempt.cancel()

    @property
    def _idle_timeout(self) -> float | None:
        return self.config.idle_timeout if isinstance(self.config, StdioServerConfig) else None

    # --- state ---------------------------------------------------------------------------

    def _set_state(self, state: ServerState) -> None:
        if state is self._state:
            return
        log.info("mcp_server_state", server=self.name, state=state.value, previous=self._state.value)
        self._state = state
        self._state_since = time.time()
        self._metrics.server_up(self.name, state is ServerState.READY)
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()
        self._on_change(self.name)

    def call_may_have_changed_tools(self) -> None:
        """A call of a tool not annotated read-only was answered: list the tools again soon
        (coalesced, see :meth:`ServerListing.call_may_have_changed_tools`)."""
        if self.listing.call_may_have_changed_tools():
            self._poke.set()

    def _on_event(self, event: ConnectionEvent, detail: str) -> None:
        if event == "resource_updated":
            self.listing.resource_updated(detail)
            return
        if event == "features_changed":
            self.listing.features_notice()
        elif event == "tools_changed":
            self.listing.notice()
        elif event == "exited":
            self._exit_detail = detail
        elif event == "stream_error":
            self._stream_error = detail
            self._last_error = detail
        elif event == "listen_lost":
            # Often the first sign that a stateless (2026-07-28) HTTP server went away: check now.
            self._check_now = True
        elif event == "lenient_result":
            # Once per server (each connection reports it once); the result itself is passed on.
            if not self._reported_incomplete:
                self._reported_incomplete = True
                log.warning("mcp_server_result_incomplete", server=self.name, detail=detail)
            return
        self._poke.set()

    # --- the loop ------------------------------------------------------------------------

    async def run(self) -> None:
        attempt = 0
        failed_starts: deque[float] = deque()
        self._probes.add_server()
        try:
            while not self._stop.is_set():
                outcome = await self._connect_and_watch()
                if self._stop.is_set() or outcome == "stop":
                    break
                if outcome == "idle":
                    await self._idle_until_needed()
                    continue
                if outcome == "ready_then_lost":
                    # It was READY in between: whatever ended the session (often a call that
                    # crashed it), this is not a crash loop.
                    failed_starts.clear()
                    if self._lost_during_call or self._session_was_stable:
                        attempt = 0
                elif not self.is_remote:
                    # Only a process that cannot start counts; an unreachable remote is just down.
                    now = time.monotonic()
                    failed_starts.append(now)
                    while failed_starts and now - failed_starts[0] > self._settings.crash_loop_window:
                        failed_starts.popleft()
                crash_looping = len(failed_starts) > self._settings.crash_loop_restarts
                attempt = await self._wait_before_restart(attempt, crash_looping)
                if self._stop.is_set():
                    break
                self._restarts += 1
                self._metrics.server_restarted(self.name)
        finally:
            self._probes.remove_server()
            self.listing.stop()
            self._next_retry = 0.0
            self._set_state(ServerState.STOPPED)

    async def _connect_and_watch(self) -> _Exit | Literal["lost", "ready_then_lost"]:
        """One connection, from spawn/dial to loss (or to stop / idle)."""
        self._exit_detail = ""
        self._lost_during_call = False
        self._session_was_stable = False
        was_ready = False
        try:
            # Stop cancels this scope, so a server stuck in initialize does not hold up
            # shutdown; the transport's own teardown is shielded and still runs.
            with anyio.CancelScope() as self._attempt:
                async with AsyncExitStack() as stack:
                    # Opening (spawn or dial, handshake, first listing) waits its turn in the pool.
                    async with self._probes.connecting():
                        conn = await stack.enter_async_context(
                            self.connector(self.name, self.config, self._on_event)
                        )
                        await self._became_ready(conn)
                    was_ready = True
                    ready_at = time.monotonic()
                    try:
                        exit_reason = await self._monitor(conn)
                    except BaseException:
                        self._session_was_stable = time.monotonic() - ready_at >= _STABLE_SECONDS
                        self._leave_ready(ServerState.RECONNECTING)
                        raise
                    self._leave_ready(ServerState.IDLE if exit_reason == "idle" else None)
                    return exit_reason
        except Exception as err:
            self._last_error = self._explain(err, starting=not was_ready)
            log.warning("mcp_server_lost", server=self.name, error=self._last_error)
            self._on_change(self.name)
        finally:
            self._conn = None
            self._attempt = None
        if self._stop.is_set():
            return "stop"
        return "ready_then_lost" if was_ready else "lost"

    def _leave_ready(self, state: ServerState | None) -> None:
        """Takes the session out of service before it is torn down (teardown can take seconds)."""
        self._lost_during_call = self._inflight > 0
        self._conn = None
        if state is ServerState.IDLE:
            # Cleared before the state says IDLE: a call arriving during teardown sets it again.
            self._wake.clear()
        if state is not None and not self._stop.is_set():
            self._set_state(state)

    async def _idle_until_needed(self) -> None:
        # Its tools stay in the catalog: the next call starts it again.
        self._set_state(ServerState.IDLE)
        await self._wake.wait()
        if not self._stop.is_set():
            self._set_state(ServerState.STARTING)

    async def _wait_before_restart(self, attempt: int, crash_looping: bool) -> int:
        """Backs off (longer when crash-looping, in FAILED); returns the next attempt number."""
        self._metrics.server_up(self.name, False)
        self.listing.went_down()
        s = self._settings
        cap = s.failed_retry_interval if crash_looping else s.max_backoff
        delay = backoff_delay(attempt, s.initial_backoff, cap, self._rng)
        self._next_retry = time.time() + delay
        self._set_state(ServerState.FAILED if crash_looping else ServerState.RECONNECTING)
        try:
            await self._sleep(delay)
        finally:
            self._next_retry = 0.0
        return attempt + 1

    def _explain(self, err: BaseException, *, starting: bool) -> str:
        cause = first_cause(err)
        text = describe_error(err)
        if starting and isinstance(cause, TimeoutError):
            text = f"no answer to initialize within {self.config.connect_timeout:g}s"
        elif starting and isinstance(cause, MCPError) and cause.code == mcp_types.CONNECTION_CLOSED:
            text = "the server closed the connection while starting"
        if self._exit_detail and self._exit_detail not in text:
            text = f"{text}: {self._exit_detail}"
        if self._stream_error and self._stream_error not in text:
            text = f"{text} ({self._stream_error})"
        return text

    async def _sleep(self, seconds: float) -> None:
        with anyio.move_on_after(seconds):
            await self._stop.wait()

    async def _became_ready(self, conn: Connection) -> None:
        tools = await self.listing.first_listing(conn)
        self._protocol_version = conn.protocol_version
        self._check_now = False
        self._server_info = conn.server_info
        self._stream_error = ""
        self._last_error = ""
        self._last_activity = time.monotonic()
        self.listing.connected(conn, tools)
        self._conn = conn
        self._set_state(ServerState.READY)
        self.listing.explain_serialized_writes(tools)

    async def _monitor(self, conn: Connection) -> _Exit:
        """Returns when asked to stop or to go idle; raises when the connection is lost."""
        next_ping = time.monotonic() + self._probes.first_delay()
        self.listing.follow()
        while True:
            self._poke.clear()
            if self._stop.is_set():
                return "stop"
            if conn.closed.is_set():
                raise SessionLostError("the connection was closed by the server")
            now = time.monotonic()
            next_list = await self.listing.run_due(conn, now)
            idle_at = float("inf")
            if self._idle_timeout is not None and self._inflight == 0:
                idle_at = self._last_activity + self._idle_timeout
                if now >= idle_at:
                    return "idle"
            if now >= next_ping or self._check_now:
                self._check_now = False
                await probe(conn, self._probes, self._settings.ping_timeout)
                next_ping = time.monotonic() + self._probes.next_delay()
            wait = min(next_ping, next_list, idle_at) - time.monotonic()
            if wait > 0 and not self._poke.is_set():
                with anyio.move_on_after(wait):
                    await self._poke.wait()
