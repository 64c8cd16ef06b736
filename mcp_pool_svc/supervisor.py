"""Supervision of one MCP server: connect, watch, restart with backoff, never give up.

One :class:`Supervisor` per configured server runs :meth:`Supervisor.run` as its own task. It keeps
one negotiated session open, re-lists tools on change notifications and on the TTL (the server's
own ``ttlMs`` hint when it gives one), checks health to find a hung server (``ping``, or a
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
server's whole process tree.
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

from mcp_pool_svc.catalog import Catalog, ListedTool
from mcp_pool_svc.errors import ServerUnavailableError
from mcp_pool_svc.metrics import ListingReason, PoolMetrics
from mcp_pool_svc.probes import Probes
from mcp_pool_svc.session import Connection, ConnectionEvent, Connector, transport_name
from toolscout_kit.config import PoolSettings, RemoteServerConfig, StdioServerConfig
from toolscout_kit.logging import get_logger, redact

__all__ = ["ServerState", "Supervisor", "backoff_delay", "describe_error"]

log = get_logger(__name__)

HEALTH_PREFIX = "toolscout.mcp_pool.v1.server."
# Re-listing after calls that may change a server's tools: the gap between two such listings
# while they find nothing new doubles from the first value up to the second (seconds).
_AFTER_CALL_GAP = 1.0
_AFTER_CALL_MAX_GAP = 60.0


class ServerState(enum.StrEnum):
    """Lifecycle of one server's connection; the value is :attr:`ServerStatus.state`'s string."""

    STARTING = "starting"
    READY = "ready"
    RECONNECTING = "reconnecting"
    FAILED = "failed"
    IDLE = "idle"
    STOPPED = "stopped"


def backoff_delay(attempt: int, initial: float, maximum: float, rng: random.Random) -> float:
    """Exponential backoff with "equal jitter": between half and all of the capped delay."""
    capped = min(maximum, initial * (2 ** min(attempt, 30)))
    return float(capped / 2 + rng.uniform(0, capped / 2))


def _first_cause(err: BaseException) -> BaseException:
    """The error itself, or the first error inside (nested) exception groups (anyio task groups)."""
    while isinstance(err, BaseExceptionGroup) and err.exceptions:
        err = err.exceptions[0]
    return err


def describe_error(err: BaseException) -> str:
    """A one-line, secret-free description of why a connection failed."""
    err = _first_cause(err)
    if isinstance(err, _SessionLost):
        return redact(str(err))[:500]
    if isinstance(err, TimeoutError) and not str(err):
        return "timed out"
    text = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return redact(f"{type(err).__name__}: {text}" if text else type(err).__name__)[:500]


class _SessionLost(Exception):
    """The live session ended (closed by the server, or it stopped answering pings)."""


_Exit = Literal["stop", "idle"]
# A session that lasted this long was healthy: the next restart starts the backoff again.
_STABLE_SECONDS = 10.0


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
    ) -> None:
        """``probes``: the pool's shared probe and connection budget (a budget of its own if None)."""
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
        grace = settings.unavailable_grace
        self._blip_grace = settings.blip_grace if grace is None else min(settings.blip_grace, grace)
        self._default_ttl = settings.effective_tool_cache_ttl
        self._ttl = self._default_ttl
        self._protocol_version = ""
        self._check_now = False
        self._state = ServerState.STARTING
        self._state_since = time.time()
        self._changed = asyncio.Event()
        self._poke = asyncio.Event()
        self._stop = asyncio.Event()
        self._wake = asyncio.Event()
        # Why the next listing is due before its interval (None: it is not).
        self._refresh: ListingReason | None = None
        # Re-listing after calls that may change the tools (see call_may_have_changed_tools): one
        # is pending; not before this time (monotonic); the gap after the next one.
        self._after_call = False
        self._after_call_at = 0.0
        self._after_call_gap = _AFTER_CALL_GAP
        # The server's change notices reach this connection (one arrived): no re-list after calls.
        self._notices_heard = False
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
        self._grace_task: asyncio.Task[None] | None = None
        self._attempt: anyio.CancelScope | None = None
        self._serialization_explained = False
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
            tool_cache_ttl_seconds=self._ttl,
            change_notifications=self._conn is not None and self._conn.change_notifications,
            serialize_writes=self.write_lock is not None,
            serialized_tools=writes if self.write_lock is not None else 0,
            unannotated_tools=unannotated,
        )

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
        if self._attempt is not None:
            self._attempt.cancel()

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

    def _catalog_changed(self) -> None:
        self._metrics.catalog_tools(self.name, self._catalog.tool_count(self.name))
        self._on_change(self.name)

    def call_may_have_changed_tools(self) -> None:
        """A call of a tool not annotated read-only was answered: list the tools again soon.

        A change is announced differently at each MCP revision, and SDK 2.3.0 drops an
        announcement made the other era's way (a server calling ``send_tool_list_changed()`` is
        never heard by a 2026-07-28 client; a bus publish reaches no handshake-era client):
        re-listing after such calls catches the changes they make however they are announced.
        It runs in the supervisor's task after the answer went back, never on a call's path, and
        is coalesced per server: the first call's listing runs at once, later ones wait out a gap
        that doubles (1 s up to 60 s) while listings find nothing new and starts again at 1 s
        when one does. Once a change notice has arrived on this connection, notices are known to
        reach it and calls trigger no listing at all.
        """
        if self._notices_heard or self._after_call:
            return
        self._after_call = True
        self._poke.set()

    def _on_event(self, event: ConnectionEvent, detail: str) -> None:
        if event == "tools_changed":
            self._refresh = "notification"
            self._notices_heard = True
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
            if self._grace_task is not None:
                self._grace_task.cancel()
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
        self._went_down()
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
        cause = _first_cause(err)
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

    def _ttl_from(self, conn: Connection) -> float:
        """The server's cache hint, floored and capped, else the configured TTL."""
        hint = conn.tools_ttl
        if hint is None or hint <= 0:
            return self._default_ttl
        s = self._settings
        return min(max(hint, s.tool_cache_ttl_floor), s.tool_cache_ttl_cap)

    async def _became_ready(self, conn: Connection) -> None:
        with anyio.fail_after(self.config.connect_timeout):
            tools = await conn.list_tools()
        if self._grace_task is not None:
            self._grace_task.cancel()
            self._grace_task = None
        self._ttl = self._ttl_from(conn)
        self._protocol_version = conn.protocol_version
        self._check_now = False
        self._server_info = conn.server_info
        self._stream_error = ""
        self._last_error = ""
        self._last_activity = time.monotonic()
        self._refresh = None
        self._after_call = self._notices_heard = False
        self._after_call_at, self._after_call_gap = 0.0, _AFTER_CALL_GAP
        self._metrics.tools_listed(self.name, "connect")
        if self._catalog.set_tools(self.name, tools) | self._catalog.set_available(self.name, True):
            self._catalog_changed()
        self._conn = conn
        self._set_state(ServerState.READY)
        self._explain_serialized_writes(tools)

    def _explain_serialized_writes(self, tools: list[ListedTool]) -> None:
        """Once per server: which of its tools run one at a time, why, and how to opt out."""
        if self._serialization_explained or self.write_lock is None:
            return
        self._serialization_explained = True
        serialized = sorted(t.name for t in tools if not t.read_only)
        if not serialized:
            return
        log.info(
            "mcp_server_writes_serialized",
            server=self.name,
            serialized_tools=len(serialized),
            unannotated_tools=sum(not t.annotations_json for t in tools),
            tools=serialized[:20],
            reason="not annotated readOnlyHint: true",
            opt_out=f"servers.{self.name}.serialize_writes: false, if the server is safe under concurrent writes",
        )

    def _went_down(self) -> None:
        self._metrics.server_up(self.name, False)
        if self._grace_task is None and self._catalog.has_listing(self.name):
            self._grace_task = asyncio.create_task(self._grace(), name=f"grace-{self.name}")

    async def _grace(self) -> None:
        # A blip shorter than blip_grace changes nothing in the catalog; after it the tools stay,
        # marked unavailable, so callers learn the server is down rather than that they are gone.
        await anyio.sleep(self._blip_grace)
        if self._catalog.set_available(self.name, False):
            self._catalog_changed()
        drop_after = self._settings.unavailable_grace
        if drop_after is not None:
            await anyio.sleep(max(drop_after - self._blip_grace, 0.0))
            if self._catalog.drop(self.name):
                self._catalog_changed()
        self._grace_task = None

    async def _relist(self, conn: Connection, reason: ListingReason) -> bool:
        """Lists the tools again; whether they changed."""
        self._metrics.tools_listed(self.name, reason)
        try:
            with anyio.fail_after(self.config.call_timeout):
                tools = await conn.list_tools()
        except MCPError as err:
            if err.code == mcp_types.CONNECTION_CLOSED:
                raise
            # The server refused this listing but is otherwise alive: keep the last one.
            log.warning("mcp_server_list_failed", server=self.name, error=describe_error(err))
            return False
        self._ttl = self._ttl_from(conn)
        if not self._catalog.set_tools(self.name, tools):
            return False
        log.info("mcp_server_tools_changed", server=self.name, tools=len(tools))
        self._catalog_changed()
        return True

    async def _relist_after_calls(self, conn: Connection) -> None:
        """The coalesced listing after calls (see :meth:`call_may_have_changed_tools`)."""
        self._after_call = False
        changed = await self._relist(conn, "after_call")
        self._after_call_gap = (
            _AFTER_CALL_GAP if changed else min(2 * self._after_call_gap, _AFTER_CALL_MAX_GAP)
        )
        self._after_call_at = time.monotonic() + self._after_call_gap

    async def _probe(self, conn: Connection) -> None:
        """One liveness probe, in its turn (:mod:`mcp_pool_svc.probes`); raises when the server
        did not answer (twice in a row while the pool's probes are slow)."""
        timeout = self._settings.ping_timeout
        lenient = self._probes.under_load  # before this probe's own outcome counts
        for attempt in (1, 2):
            async with self._probes.probing():
                started = time.monotonic()
                try:
                    with anyio.fail_after(timeout):
                        await conn.ping()
                except TimeoutError:
                    self._probes.answered(None)
                    if attempt == 1 and lenient:
                        continue
                    raise _SessionLost(f"no answer to ping within {timeout:g}s") from None
                self._probes.answered(time.monotonic() - started)
                return

    async def _monitor(self, conn: Connection) -> _Exit:
        """Returns when asked to stop or to go idle; raises when the connection is lost."""
        next_ping = time.monotonic() + self._probes.first_delay()
        next_list = time.monotonic() + self._ttl if self._ttl > 0 else float("inf")
        while True:
            self._poke.clear()
            if self._stop.is_set():
                return "stop"
            if conn.closed.is_set():
                raise _SessionLost("the connection was closed by the server")
            now = time.monotonic()
            if self._refresh is not None or now >= next_list:
                reason, self._refresh = self._refresh or "ttl", None
                await self._relist(conn, reason)
                # After the listing: its cache hint sets when the next one is due.
                next_list = time.monotonic() + self._ttl if self._ttl > 0 else float("inf")
            after_call = self._after_call_at if self._after_call else float("inf")
            if now >= after_call:
                await self._relist_after_calls(conn)
                after_call = float("inf")
            idle_at = float("inf")
            if self._idle_timeout is not None and self._inflight == 0:
                idle_at = self._last_activity + self._idle_timeout
                if now >= idle_at:
                    return "idle"
            if now >= next_ping or self._check_now:
                self._check_now = False
                await self._probe(conn)
                next_ping = time.monotonic() + self._probes.next_delay()
            wait = min(next_ping, next_list, idle_at, after_call) - time.monotonic()
            if wait > 0 and not self._poke.is_set():
                with anyio.move_on_after(wait):
                    await self._poke.wait()
