"""The pool facade: every server of this shard supervised, one catalog, tool calls.

:class:`McpPool` is what the servicer talks to. It starts one :class:`Supervisor` per server placed
on its shard (in parallel, so a slow or broken server delays nobody; an unsharded pool is shard
0 of 1 and runs them all), answers catalog queries from memory, and
runs tool calls on the server's persistent session under a per-server concurrency limit and a
per-call timeout. On timeout or caller cancellation the MCP SDK sends ``notifications/cancelled``
to the server for the abandoned request.

A call runs at most once unless it is safe to repeat. A call that could not be sent (server down,
starting, pool stopping) is :class:`ServerUnavailableError`, safe to retry. A call that was sent
and then lost its answer (the server died, the pool stopped) is :class:`ToolOutcomeUnknownError`:
the tool may have run, and nothing retries it, except that a tool annotated ``readOnlyHint`` or
``idempotentHint`` is sent once more after its server restarts, within the call's timeout. Calls
to tools not annotated ``readOnlyHint`` run one at a time per server (``serialize_writes``).

A call for a configured server that another shard runs is refused before anything is sent
(:class:`NotOwnerError`, naming the owners). :meth:`McpPool.reshard` applies a new shard count:
only the servers whose owner changed are started or stopped (a server leaving this shard first
finishes the calls it has, while new ones are refused and go to its new owner).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

import anyio
import mcp_types
from mcp.shared.exceptions import MCPError

from mcp_pool_svc.catalog import Catalog, CatalogSnapshot, CatalogUpdate
from mcp_pool_svc.errors import (
    InvalidToolArgumentsError,
    NotOwnerError,
    ResultTooLargeError,
    ServerUnavailableError,
    ToolCallTimeoutError,
    ToolOutcomeUnknownError,
    UnknownServerError,
    UnknownToolError,
)
from mcp_pool_svc.metrics import Outcome, PoolMetrics
from mcp_pool_svc.placement import Placement, ServerRule, ShardIdentity, resolve_identity
from mcp_pool_svc.reaper import Reaper, become_subreaper
from mcp_pool_svc.results import (
    ToolResult,
    apply_size_cap,
    content_from_mcp,
    error_result_content,
)
from mcp_pool_svc.server_logs import StderrLog
from mcp_pool_svc.session import Connection, Connector, HttpClients, make_connector
from mcp_pool_svc.stdio import OVERSIZED_REPLY
from mcp_pool_svc.supervisor import ServerState, ServerStatus, Supervisor
from toolscout_kit.config import ToolscoutConfig
from toolscout_kit.json_text import MAX_JSON_DEPTH, JsonTextError, nested_deeper_than, parse_json_object
from toolscout_kit.logging import get_logger, redact
from toolscout_kit.names import unknown_name
from toolscout_kit.tracing import NO_TRACING, SpanKind, Tracing, add_event, set_attributes

__all__ = ["MAX_ARGUMENT_DEPTH", "McpPool", "ReshardResult", "reply_line_limit", "require_json_object"]

log = get_logger(__name__)

# Time a stopping supervisor gets to close its session (the stdio shutdown itself is bounded).
_STOP_TIMEOUT = 15.0
# Tool arguments nested deeper than this are refused: no tool schema needs it, and the JSON
# and pydantic code between here and the server recurses per level.
MAX_ARGUMENT_DEPTH = MAX_JSON_DEPTH


def reply_line_limit(max_result_bytes: int) -> int:
    """Longest stdio reply line read: room for JSON escaping (up to ~4x) plus the envelope."""
    return 4 * max_result_bytes + (1 << 20)


def require_json_object(text: str | Mapping[str, Any] | None, what: str) -> dict[str, Any]:
    """A JSON object from a string (empty = ``{}``), nested at most ``MAX_ARGUMENT_DEPTH`` deep.

    Raises:
        InvalidToolArgumentsError: not valid JSON, valid JSON that is not an object, too deep, or
            not valid Unicode (see :mod:`toolscout_kit.json_text`).
    """
    if text is None:
        return {}
    if isinstance(text, Mapping):
        value = dict(text)
        if nested_deeper_than(value, MAX_ARGUMENT_DEPTH):
            raise InvalidToolArgumentsError(f"{what}: nested deeper than {MAX_ARGUMENT_DEPTH} levels")
        return value
    try:
        return parse_json_object(text, what, max_depth=MAX_ARGUMENT_DEPTH)
    except JsonTextError as err:
        raise InvalidToolArgumentsError(err.message) from None


def _check_timeout(seconds: float) -> None:
    """Raises InvalidToolArgumentsError unless ``seconds`` is finite and not negative."""
    if not math.isfinite(seconds) or seconds < 0:
        raise InvalidToolArgumentsError(
            f"timeout_seconds must be a finite number of seconds, 0 or more (0 = the server's call_timeout); got {seconds!r}"
        )


def _outcome_of(exc: BaseException) -> Outcome:
    if isinstance(exc, ToolCallTimeoutError):
        return "timeout"
    if isinstance(exc, ToolOutcomeUnknownError):
        return "unknown"
    if isinstance(exc, ServerUnavailableError):
        return "unavailable"
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    return "error"


def _mcp_attributes(sup: Supervisor, conn: Connection, tool: str) -> dict[str, Any]:
    """An MCP request's span attributes (OpenTelemetry's MCP conventions)."""
    attributes: dict[str, Any] = {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": tool,
        "mcp.protocol.version": conn.protocol_version,
    }
    url = getattr(sup.config, "url", None)
    if url:
        where = urlsplit(url)
        attributes.update({"network.transport": "tcp", "server.address": where.hostname or ""})
        if where.port:
            attributes["server.port"] = where.port
    else:
        attributes["network.transport"] = "pipe"
    return attributes


class _SentThenLost(Exception):
    """The request went to the server, then the connection was lost before its answer."""

    def __init__(self, retried: bool) -> None:
        super().__init__("lost after sending")
        self.retried = retried


@dataclass(frozen=True)
class ReshardResult:
    """What a reshard changed on this shard: the servers it started and the ones it handed over."""

    shard: ShardIdentity | None
    started: tuple[str, ...]
    stopped: tuple[str, ...]


@dataclass(eq=False)
class _Call:
    """One call in flight: the scope the pool cancels at shutdown, and whether it was sent."""

    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    sent: bool = False


class McpPool:
    """Supervised sessions to every configured MCP server, one catalog, tool calls."""

    def __init__(
        self,
        config: ToolscoutConfig,
        *,
        shard: ShardIdentity | None = None,
        metrics: PoolMetrics | None = None,
        connector: Connector | None = None,
        rng: random.Random | None = None,
        environ: Mapping[str, str] | None = None,
        tracing: Tracing = NO_TRACING,
    ) -> None:
        """Supervisors for the servers placed on ``shard`` (default: 0 of 1 when the config is unsharded).

        ``environ`` (default: the process environment) tells which API keys to mask in servers' stderr.
        ``tracing``: a ``call_tool`` span per call, and an MCP client span per request sent.

        Raises:
            ConfigError: the config is sharded and no shard is given.
        """
        self._config = config
        self._settings = config.toolscout.pool
        self._metrics = metrics or PoolMetrics()
        self._tracing = tracing
        self.catalog = Catalog()
        self._listeners: list[Callable[[str], None]] = []
        self._changed = asyncio.Event()
        self._calls: set[_Call] = set()
        self._calls_done = asyncio.Event()
        self._calls_done.set()
        self._stopping = False
        self._started = False
        self._shard: ShardIdentity | None = shard or resolve_identity(self._settings.shards)
        # Kept when a reshard leaves this shard out (its index beyond the new count).
        self._index = self._shard.index
        self._placement = self._placement_for(config, self._shard.count)
        self._http = HttpClients()
        self._reaper = Reaper()
        self._reaping: asyncio.Task[None] | None = None
        self._connect = connector or make_connector(
            base_dir=Path(config.base_dir),
            stderr_sink=StderrLog(config, os.environ if environ is None else environ),
            max_line_bytes=reply_line_limit(self._settings.max_result_bytes),
            http_clients=self._http,
            reaper=self._reaper,
        )
        self._rng = rng or random.Random()  # noqa: S311 - jitter, not cryptography
        self._supervisors = {name: self._new_supervisor(name) for name in self._owned()}
        # Servers handed to another shard, finishing their calls before they stop.
        self._leaving: dict[str, Supervisor] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._metrics.shard(self._shard.index, self._shard.count)

    @staticmethod
    def _placement_for(config: ToolscoutConfig, count: int) -> Placement:
        rules = {
            name: ServerRule(
                placement=server.placement,
                # A pin beyond a shrunk count cannot apply; the config check reports it on reload.
                shard=server.shard if server.shard is not None and server.shard < count else None,
            )
            for name, server in config.servers.items()
        }
        return Placement(count, rules)

    def _owned(self) -> list[str]:
        if self._shard is None:
            return []
        return self._placement.servers_for(self._shard.index)

    def _new_supervisor(self, name: str) -> Supervisor:
        return Supervisor(
            name,
            self._config.servers[name],
            self._settings,
            connector=self._connect,
            catalog=self.catalog,
            metrics=self._metrics,
            on_change=self._notify,
            rng=self._rng,
        )

    @property
    def shard(self) -> ShardIdentity | None:
        """This pool's shard; None once a reshard left it out (its index is beyond the new count)."""
        return self._shard

    @property
    def shard_count(self) -> int:
        return self._placement.count

    @property
    def shard_index(self) -> int:
        """This shard's index (kept when a reshard leaves it out, so that callers can still tell)."""
        return self._index

    def owners(self, server: str) -> tuple[int, ...]:
        """The shards that run ``server`` under the current count."""
        return self._placement.owners(server)

    # --- lifecycle -----------------------------------------------------------------------

    async def start(self, *, wait: float | None = None) -> None:
        """Starts every server in parallel; with ``wait``, waits up to that long until none is STARTING.

        Servers still starting when the wait ends keep starting (a thousand remote servers take
        longer than a few seconds); the pool serves meanwhile. On Linux the process becomes a child
        subreaper first, so that processes a server detaches stay in the pool's tree, and reaps
        each of them that exits (see :mod:`mcp_pool_svc.reaper`).
        """
        if become_subreaper() and self._reaping is None:
            self._reaping = asyncio.create_task(self._reaper.run(), name="reaper")
        self._started = True
        for sup in self._supervisors.values():
            self._launch(sup)
        if wait:
            try:
                await self.wait_until(
                    lambda: all(s.state is not ServerState.STARTING for s in self._supervisors.values()), wait
                )
            except TimeoutError:
                starting = sum(s.state is ServerState.STARTING for s in self._supervisors.values())
                log.info("pool_serving_while_servers_start", starting=starting, waited_seconds=wait)

    def _launch(self, sup: Supervisor) -> None:
        self._metrics.server_up(sup.name, False)
        self._tasks[sup.name] = asyncio.create_task(sup.run(), name=f"supervisor-{sup.name}")

    async def drain(self, within: float) -> None:
        """Stops taking calls, gives those in flight ``within`` seconds, then aborts the rest.

        New calls get ServerUnavailableError (not sent); an aborted call gets
        ToolOutcomeUnknownError if it had been sent, ServerUnavailableError otherwise.
        """
        self._stopping = True
        if self._calls:
            with anyio.move_on_after(within):
                await self._calls_done.wait()
        for call in list(self._calls):
            call.scope.cancel()

    async def stop(self) -> None:
        """Aborts calls still in flight, stops every server and waits for their processes to be gone."""
        await self.drain(0)
        for sup in [*self._supervisors.values(), *self._leaving.values()]:
            sup.request_stop()
        tasks = list(self._tasks.values())
        if tasks:
            _done, pending = await asyncio.wait(tasks, timeout=_STOP_TIMEOUT)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=_STOP_TIMEOUT)
        self._tasks.clear()
        if self._reaping is not None:
            self._reaping.cancel()
            self._reaping = None
        self._reaper.sweep()
        await self._http.aclose()

    async def reshard(self, config: ToolscoutConfig) -> ReshardResult:
        """Applies the shard count and placement of ``config`` to the servers this pool started with.

        Starts the servers newly placed here and hands over those placed elsewhere now: a call for
        one of them is refused from this moment (:class:`NotOwnerError`, not sent), the calls it
        already has run to their end (each bounded by its ``call_timeout``), then it stops and its
        tools leave this shard's catalog. Servers whose owner did not change are not touched. A
        shard whose index is beyond the new count hands over everything.
        """
        count = config.toolscout.pool.shards.count
        index = self._index
        known = {name: server for name, server in config.servers.items() if name in self._config.servers}
        self._config = self._config.model_copy(update={"servers": {**self._config.servers, **known}})
        before = set(self._supervisors)
        self._placement = self._placement_for(self._config, count)
        self._shard = ShardIdentity(index, count) if index < count else None
        after = set(self._owned())
        self._metrics.shard(index, count)
        started = sorted(after - before)
        stopped = sorted(before - after)
        log.info("pool_reshard", shard=index, count=count, starting=started, handing_over=stopped)
        for name in stopped:
            self._leaving[name] = self._supervisors.pop(name)
        for name in started:
            # A server handed over and back before it was stopped keeps its running supervisor.
            sup = self._leaving.pop(name, None)
            if sup is None or sup.stop_requested:
                sup = self._new_supervisor(name)
                self._supervisors[name] = sup
                if self._started:
                    self._launch(sup)
            else:
                self._supervisors[name] = sup
        self._metrics.servers_moved(len(started), len(stopped))
        for name in started:
            self._notify(name)
        await asyncio.gather(*(self._hand_over(name) for name in stopped))
        return ReshardResult(self._shard, tuple(started), tuple(stopped))

    async def _hand_over(self, name: str) -> None:
        sup = self._leaving.get(name)
        if sup is None:
            return
        with anyio.move_on_after(sup.config.call_timeout):
            await sup.wait_idle()
        if self._leaving.get(name) is not sup:
            return  # placed here again meanwhile
        sup.request_stop()
        task = self._tasks.get(name)
        if task is not None:
            await asyncio.wait({task}, timeout=_STOP_TIMEOUT)
            if not task.done():
                task.cancel()
        if self._leaving.get(name) is sup:
            del self._leaving[name]
            self._tasks.pop(name, None)
            if self.catalog.drop(name):
                self._metrics.catalog_tools(name, 0)
            self._metrics.server_up(name, False)
            self._notify(name)

    def add_listener(self, listener: Callable[[str], None]) -> None:
        """``listener(server_name)`` runs on every state or catalog change of that server."""
        self._listeners.append(listener)

    def _notify(self, server: str) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()
        for listener in self._listeners:
            try:
                listener(server)
            except Exception:
                log.exception("pool_listener_failed", server=server)

    async def wait_until(self, predicate: Callable[[], bool], within: float) -> None:
        """Waits (event-driven) until ``predicate()`` holds after some change.

        Raises:
            TimeoutError: it did not hold within ``within`` seconds.
        """
        with anyio.fail_after(within):
            while not predicate():
                changed = self._changed
                await changed.wait()

    # --- queries -------------------------------------------------------------------------

    @property
    def server_names(self) -> list[str]:
        return list(self._supervisors)

    def is_serving(self, server: str) -> bool:
        """Whether this shard runs ``server`` and it can take calls."""
        sup = self._supervisors.get(server)
        return sup is not None and sup.state in (ServerState.READY, ServerState.IDLE)

    def list_servers(self) -> list[ServerStatus]:
        return [self._status_of(sup) for sup in sorted(self._supervisors.values(), key=lambda s: s.name)]

    def server_status(self, server: str) -> ServerStatus:
        """The status of a server this shard runs (or is handing over).

        Raises:
            UnknownServerError: the server is not configured.
            NotOwnerError: another shard runs it.
        """
        sup = self._supervisors.get(server) or self._leaving.get(server) or self._supervisor(server)
        return self._status_of(sup)

    def _status_of(self, sup: Supervisor) -> ServerStatus:
        rule = self._placement.rule(sup.name)
        return replace(sup.status(), shards=self._placement.owners(sup.name), placement=rule.placement)

    def list_tools(
        self, servers: list[str] | None = None, *, include_unavailable: bool = False
    ) -> CatalogSnapshot:
        """The catalog (optionally of some servers only).

        Raises:
            UnknownServerError: a name in ``servers`` is not configured.
        """
        for name in servers or ():
            self._supervisor(name)
        return self.catalog.snapshot(include_unavailable=include_unavailable, servers=servers or None)

    def watch_catalog(self, known_version: str = "") -> AsyncGenerator[CatalogUpdate, None]:
        return self.catalog.watch(known_version)

    def _supervisor(self, server: str) -> Supervisor:
        """Raises UnknownServerError (not configured) or NotOwnerError (another shard runs it)."""
        sup = self._supervisors.get(server)
        if sup is None:
            if server in self._config.servers:
                raise self._not_owner(server)
            known = ", ".join(sorted(self._config.servers)) or "none configured"
            raise UnknownServerError(f"unknown MCP server {server!r} (servers: {known})")
        return sup

    def _not_owner(self, server: str) -> NotOwnerError:
        owners = self._placement.owners(server)
        count = self._placement.count
        where = f"shard {owners[0]}" if len(owners) == 1 else "shards " + ", ".join(map(str, owners))
        return NotOwnerError(
            f"MCP server {server!r} runs on pool {where} of {count}, not on this shard ({self._index}); "
            "the call was not sent",
            server=server,
            owners=owners,
            count=count,
        )

    # --- calls ---------------------------------------------------------------------------

    def resolve(self, *, server: str = "", tool: str = "", llm_name: str = "") -> tuple[str, str]:
        """The ``(server, tool)`` a call is for.

        Raises:
            UnknownToolError / UnknownServerError: nothing by that name.
            ServerUnavailableError: the server never listed its tools (it has been down since start).
        """
        if llm_name:
            found = self.catalog.resolve(llm_name)
            if found is None:
                # Not splitting names to resolve them, only to explain: a tool of a server that has
                # been down since start is not "unknown", its server is.
                guess = llm_name.split("__", 1)[0]
                if guess in self._config.servers and guess not in self._supervisors:
                    # Most likely a tool of a server another shard runs: let the caller route it.
                    raise self._not_owner(guess)
                sup = self._supervisors.get(guess)
                if sup is not None and not self.catalog.has_listing(sup.name):
                    raise ServerUnavailableError(
                        f"{sup.unavailable_message()}; it has not listed its tools yet"
                    )
                raise UnknownToolError(
                    unknown_name("tool", llm_name, [t.llm_name for t in self.catalog.snapshot().tools])
                )
            return found.server, found.name
        if not server or not tool:
            raise InvalidToolArgumentsError("name the tool with llm_name, or with both server and tool")
        sup = self._supervisor(server)
        if self.catalog.lookup(server, tool) is None:
            if not self.catalog.has_listing(server):
                raise ServerUnavailableError(f"{sup.unavailable_message()}; it has not listed its tools yet")
            raise UnknownToolError(
                unknown_name(
                    "tool",
                    tool,
                    [t.name for t in self.catalog.snapshot(servers=[server]).tools],
                    where=f" on server '{server}'",
                )
            )
        return server, tool

    async def call_tool(
        self,
        *,
        server: str = "",
        tool: str = "",
        llm_name: str = "",
        arguments: str | Mapping[str, Any] | None = None,
        meta: str | Mapping[str, Any] | None = None,
        timeout_seconds: float = 0.0,
        deadline: float | None = None,
    ) -> ToolResult:
        """Calls one tool; a tool's own failure comes back as ``is_error`` with its text.

        ``timeout_seconds`` (0 = the server's ``call_timeout``) is further bounded by ``deadline``, the
        seconds the caller has left.

        Raises:
            InvalidToolArgumentsError: arguments or meta are not a JSON object (or nest too deeply),
                or ``timeout_seconds`` is negative, infinite or NaN.
            UnknownServerError, UnknownToolError: nothing by that name.
            ServerUnavailableError: the call was not sent (server down or starting, pool stopping).
            ToolOutcomeUnknownError: the call was sent and its server went away (or the pool
                stopped) before it answered; the tool may have run.
            ToolCallTimeoutError: no result within the timeout (the server was sent a cancel).
            ResultTooLargeError: the result is over the cap and the pool is set to reject, or its
                reply line is over the reading limit.
        """
        with self._tracing.span("call_tool", attributes=self._call_attributes(llm_name or tool)) as span:
            _check_timeout(timeout_seconds)
            args = require_json_object(arguments, "arguments")
            meta_obj = require_json_object(meta, "_meta")
            server, tool = self.resolve(server=server, tool=tool, llm_name=llm_name)
            span.set_attributes({"toolscout.mcp.server": server, "gen_ai.tool.name": tool})
            self._tracing.content(span, "gen_ai.tool.call.arguments", args)
            sup = self._supervisors[server]
            if self._stopping:
                raise ServerUnavailableError("the MCP pool is shutting down; the call was not sent")
            limit = timeout_seconds if timeout_seconds > 0 else sup.config.call_timeout
            if deadline is not None:
                limit = min(limit, deadline)
            started = time.perf_counter()
            outcome: Outcome = "error"
            call = _Call()
            self._calls.add(call)
            self._calls_done.clear()
            sup.call_started()
            try:
                result, outcome = await self._attempt(sup, tool, args, meta_obj, limit, call, started)
                if span.is_recording():
                    size = sum(c.size for c in result.content) + len(result.structured_content_json.encode())
                    span.set_attribute("toolscout.call.result_bytes", size)
                    self._tracing.content(span, "gen_ai.tool.call.result", [c.text for c in result.content])
                return result
            except BaseException as exc:
                outcome = _outcome_of(exc)
                raise
            finally:
                sup.call_finished()
                self._calls.discard(call)
                if not self._calls:
                    self._calls_done.set()
                span.set_attribute("toolscout.call.outcome", outcome)
                self._metrics.tool_call(server, outcome, time.perf_counter() - started)

    def _call_attributes(self, name: str) -> dict[str, Any]:
        shard = self._shard
        return {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "toolscout.pool.shard": f"{self._index}/{shard.count if shard else self.shard_count}",
        }

    async def _attempt(
        self,
        sup: Supervisor,
        tool: str,
        args: dict[str, Any],
        meta: dict[str, Any],
        limit: float,
        call: _Call,
        started: float,
    ) -> tuple[ToolResult, Outcome]:
        """Runs the call and turns what can go wrong into a domain error or an error result."""
        server = sup.name
        try:
            with anyio.fail_after(limit):
                with call.scope:
                    raw = await self._send(sup, tool, args, meta, call)
                if call.scope.cancelled_caught:
                    if call.sent:
                        raise _SentThenLost(retried=False)
                    raise ServerUnavailableError("the MCP pool is shutting down; the call was not sent")
        except TimeoutError:
            raise ToolCallTimeoutError(
                f"tool {tool!r} on MCP server {server!r} did not answer within {limit:g}s; the call was cancelled"
            ) from None
        except _SentThenLost as lost:
            why = "the MCP pool is shutting down" if self._stopping else "its connection closed"
            retry = (
                "; it was retried once after the restart, which did not complete either"
                if lost.retried
                else ""
            )
            raise ToolOutcomeUnknownError(
                f"the call of tool {tool!r} was sent to MCP server {server!r}, which went away before "
                f"answering ({why}){retry}: the tool may or may not have run. It was not run again."
            ) from None
        except MCPError as err:
            if err.code == OVERSIZED_REPLY:
                raise ResultTooLargeError(
                    f"the result of {server}/{tool} was refused: {err.message} (max_result_bytes)"
                ) from None
            # A protocol-level refusal (bad params, unknown tool) is something the LLM can fix.
            content = error_result_content(redact(err.message))
            return self._finish(server, tool, content, "", True, started), "tool_error"
        except (ServerUnavailableError, asyncio.CancelledError):
            raise
        except Exception:
            log.exception("tool_call_failed", server=server, tool=tool)
            content = error_result_content(
                "the MCP server returned a reply that is not a valid MCP tool result"
            )
            return self._finish(server, tool, content, "", True, started), "error"
        result = self._convert(server, tool, raw, started)
        return result, "tool_error" if result.is_error else "ok"

    async def _send(
        self,
        sup: Supervisor,
        tool: str,
        args: dict[str, Any],
        meta: dict[str, Any],
        call: _Call,
    ) -> Any:
        """Sends the call once (twice for a repeatable tool whose server died mid-call).

        Raises:
            ServerUnavailableError: not sent.
            _SentThenLost: sent, and the connection was lost before the answer.
            MCPError: the server answered with an error.
        """
        listed = self.catalog.lookup(sup.name, tool)
        read_only = listed is not None and listed.tool.read_only
        repeatable = listed is not None and (listed.tool.read_only or listed.tool.idempotent)
        async with self._write_turn(sup, read_only), sup.semaphore:
            lost: Connection | None = None
            while True:
                try:
                    conn = await sup.connection_for_call(wait_for_restart=lost is not None, not_this=lost)
                except ServerUnavailableError:
                    if lost is not None:
                        raise _SentThenLost(retried=True) from None
                    raise
                call.sent = True
                try:
                    # The SDK writes this span's traceparent into the request's _meta.
                    with self._tracing.span(
                        f"tools/call {tool}",
                        kind=SpanKind.CLIENT,
                        attributes=_mcp_attributes(sup, conn, tool),
                    ):
                        answer = await conn.session.call_tool(
                            tool, args, meta=cast(mcp_types.RequestParamsMeta, meta) if meta else None
                        )
                except MCPError as err:
                    if err.code != mcp_types.CONNECTION_CLOSED:
                        raise
                    if not repeatable or lost is not None:
                        raise _SentThenLost(retried=lost is not None) from None
                    log.info("tool_call_retry_after_restart", server=sup.name, tool=tool)
                    add_event("retry", {"reason": "connection closed; sent again after the restart"})
                    lost = conn
                    continue
                if not read_only:
                    sup.call_may_have_changed_tools()
                return answer

    def _write_turn(self, sup: Supervisor, read_only: bool) -> AbstractAsyncContextManager[Any]:
        """The server's write lock for a call that is not read-only (``serialize_writes``), timed."""
        if sup.write_lock is None or read_only:
            return nullcontext()
        return self._locked(sup.name, sup.write_lock)

    @asynccontextmanager
    async def _locked(self, server: str, lock: asyncio.Lock) -> AsyncIterator[None]:
        waiting = time.perf_counter()
        async with lock:
            waited = time.perf_counter() - waiting
            self._metrics.write_lock_waited(server, waited)
            set_attributes({"toolscout.call.write_wait_seconds": waited})
            yield

    def _convert(self, server: str, tool: str, raw: Any, started: float) -> ToolResult:
        content = tuple(content_from_mcp(block) for block in raw.content)
        structured = raw.structured_content
        structured_json = (
            json.dumps(structured, ensure_ascii=False, separators=(",", ":"))
            if structured is not None
            else ""
        )
        return self._finish(server, tool, content, structured_json, bool(raw.is_error), started)

    def _finish(
        self,
        server: str,
        tool: str,
        content: tuple[Any, ...],
        structured_json: str,
        is_error: bool,
        started: float,
    ) -> ToolResult:
        content, structured_json, truncated = apply_size_cap(
            content,
            structured_json,
            max_bytes=self._settings.max_result_bytes,
            mode=self._settings.result_overflow,
            what=f"{server}/{tool}",
        )
        return ToolResult(
            server=server,
            tool=tool,
            content=content,
            structured_content_json=structured_json,
            is_error=is_error,
            truncated=truncated,
            duration_seconds=time.perf_counter() - started,
        )
