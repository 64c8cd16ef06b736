"""The pool facade: every server of this shard supervised, one catalog, tool calls.

:class:`McpPool` is what the servicer talks to. It starts one :class:`Supervisor` per server placed
on its shard (in parallel, so a slow or broken server delays nobody; an unsharded pool is shard
0 of 1 and runs them all), answers catalog queries from memory, and runs tool calls through its
:class:`~mcp_pool_svc.calls.CallRunner` (checks, at most one send unless safe to repeat, the
result within the size cap: see :mod:`mcp_pool_svc.calls`). What it returns is the shared
vocabulary of the client library: :class:`~toolscout.client.ServerStatus`,
:class:`~toolscout.client.ToolCatalog`, :class:`~toolscout.client.CatalogSnapshot`,
:class:`~toolscout.client.CallToolResult`.

A call for a configured server that another shard runs is refused before anything is sent
(:class:`NotOwnerError`, naming the owners). :meth:`McpPool.reshard` applies a new shard count:
only the servers whose owner changed are started or stopped (a server leaving this shard first
finishes the calls it has, while new ones are refused and go to its new owner).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import random
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from toolscout.client import (
    CallRequest,
    CallToolResult,
    CatalogSnapshot,
    ReadRequest,
    ResultRead,
    ServerStatus,
    ShardInfo,
    ToolCatalog,
    json_object_text,
)

from mcp_pool_svc.calls import CallRunner, ProgressFn, check_call, require_json_object
from mcp_pool_svc.catalog import Catalog
from mcp_pool_svc.errors import (
    InvalidToolArgumentsError,
    NotOwnerError,
    ServerUnavailableError,
    UnknownServerError,
    UnknownToolError,
)
from mcp_pool_svc.handles import ResultKeeper
from mcp_pool_svc.metrics import PoolMetrics
from mcp_pool_svc.naming import server_named_by
from mcp_pool_svc.per_user import UserSessions
from mcp_pool_svc.placement import ShardIdentity, resolve_identity
from mcp_pool_svc.probes import Probes
from mcp_pool_svc.reaper import Reaper, become_subreaper
from mcp_pool_svc.relay import HostRelay
from mcp_pool_svc.server_logs import StderrLog
from mcp_pool_svc.session import Connector, HttpClients, make_connector
from mcp_pool_svc.supervisor import ServerState, Supervisor
from toolscout_kit.config import ToolscoutConfig
from toolscout_kit.logging import get_logger
from toolscout_kit.names import unknown_name
from toolscout_kit.oauth_client import RemoteAuth
from toolscout_kit.shards import placement_for
from toolscout_kit.tracing import NO_TRACING, Tracing

__all__ = ["McpPool", "ReshardResult", "reply_line_limit"]

log = get_logger(__name__)

# Time a stopping supervisor gets to close its session (the stdio shutdown itself is bounded).
_STOP_TIMEOUT = 15.0


def reply_line_limit(max_result_bytes: int) -> int:
    """Longest stdio reply line read: room for JSON escaping (up to ~4x) plus the envelope."""
    return 4 * max_result_bytes + (1 << 20)


def _json_text(value: str | Mapping[str, Any] | None, what: str) -> str:
    """The wire text of a mapping (checked for depth first: a deep one would not serialise)."""
    if value is None or isinstance(value, str):
        return value or ""
    return json_object_text(require_json_object(value, what))


@dataclass(frozen=True)
class ReshardResult:
    """What a reshard changed on this shard: the servers it started and the ones it handed over."""

    shard: ShardIdentity | None
    started: tuple[str, ...]
    stopped: tuple[str, ...]


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
        self.catalog = Catalog(namespaced=config.namespaced)
        self._listeners: list[Callable[[str], None]] = []
        self._changed = asyncio.Event()
        self._results = ResultKeeper(
            config.toolscout.results, lambda: self._index, self._server_result_budget
        )
        # Per server: result tokens returned, delivered, and results kept (ListServers reports them).
        self._result_totals: dict[str, list[int]] = {}
        self._started = False
        self._shard: ShardIdentity | None = shard or resolve_identity(self._settings.shards)
        # Kept when a reshard leaves this shard out (its index beyond the new count).
        self._index = self._shard.index
        self._placement = placement_for(config, self._shard.count)
        self._http = HttpClients()
        self._reaper = Reaper()
        self._reaping: asyncio.Task[None] | None = None
        env = os.environ if environ is None else environ
        stderr_sink = StderrLog(config, env)

        def connector_for(remote_auth: RemoteAuth) -> Connector:
            return make_connector(
                base_dir=Path(config.base_dir),
                stderr_sink=stderr_sink,
                max_line_bytes=reply_line_limit(
                    max(self._settings.max_result_bytes, config.toolscout.results.max_kept_bytes)
                ),
                http_clients=self._http,
                reaper=self._reaper,
                remote_auth=remote_auth,
            )

        remote_auth = RemoteAuth(env)
        self._connect = connector or connector_for(remote_auth)
        # per_user servers: a session per (server, principal), see mcp_pool_svc.per_user.
        self._users = UserSessions(
            remote_auth,
            connector_for,
            max_sessions=self._settings.per_user_sessions,
            idle_seconds=self._settings.per_user_idle,
        )
        self._runner = CallRunner(self._settings, self.catalog, self._metrics, tracing, self._users)
        self._rng = rng or random.Random()  # noqa: S311 - jitter, not cryptography
        self._probes = Probes(self._settings, self._rng)
        self._supervisors = {name: self._new_supervisor(name) for name in self._owned()}
        # Servers handed to another shard, finishing their calls before they stop.
        self._leaving: dict[str, Supervisor] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._metrics.shard(self._shard.index, self._shard.count)

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
            probes=self._probes,
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
        await self._runner.drain(within)

    async def stop(self) -> None:
        """Aborts calls still in flight, stops every server and waits for their processes to be gone."""
        await self.drain(0)
        await self._users.aclose()
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
        # A connection stops its process in a shielded scope, which may outlast its supervisor's
        # task (a start cancelled by the stop, a session being replaced): wait for every one of them
        # (bounded), so that no process transport outlives the pool.
        with anyio.move_on_after(_STOP_TIMEOUT):
            while self._reaper.serving:  # noqa: ASYNC110 - the transports signal nothing when done
                await anyio.sleep(0.05)
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
        self._placement = placement_for(self._config, count)
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
        returned, delivered, kept = self._result_totals.get(sup.name, (0, 0, 0))
        return dataclasses.replace(
            sup.status(),
            shards=self._placement.owners(sup.name),
            placement=rule.placement,
            result_tokens_returned=returned,
            result_tokens_delivered=delivered,
            results_kept=kept,
        )

    def shard_info(self) -> ShardInfo:
        """The shard that answers (after a reshard that left it out: its old index of the new count)."""
        return ShardInfo(index=self._index, count=self._placement.count)

    def list_tools(
        self, servers: list[str] | None = None, *, include_unavailable: bool = False
    ) -> ToolCatalog:
        """The catalog of this shard (optionally of some servers only).

        Raises:
            UnknownServerError: a name in ``servers`` is not configured.
            NotOwnerError: another shard runs a server in ``servers``.
        """
        for name in servers or ():
            self._supervisor(name)
        snapshot = self.catalog.snapshot(include_unavailable=include_unavailable, servers=servers or None)
        return dataclasses.replace(snapshot, shard=self.shard_info())

    async def watch_catalog(self, known_version: str = "") -> AsyncGenerator[CatalogSnapshot, None]:
        """The catalog now (unless still ``known_version``), then again on every change."""
        async with contextlib.aclosing(self.catalog.watch(known_version)) as updates:
            async for update in updates:
                yield dataclasses.replace(update, shard=self.shard_info())

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
                # Only to explain, never to resolve: a tool of a server that has been down since
                # start is not "unknown", its server is. The catalog has no names of such a server
                # (nor of one another shard runs), so the naming rule says whose the name would be.
                namespaced = {n: c for n, c in self._config.servers.items() if self._config.namespaced(n)}
                guess = server_named_by(llm_name, namespaced)
                if guess is not None and guess not in self._supervisors:
                    # Most likely a tool of a server another shard runs: let the caller route it.
                    raise self._not_owner(guess)
                sup = self._supervisors.get(guess) if guess is not None else None
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

    async def call(
        self,
        request: CallRequest,
        *,
        deadline: float | None = None,
        progress: ProgressFn | None = None,
        relay: HostRelay | None = None,
    ) -> CallToolResult:
        """Runs one tool call (:mod:`mcp_pool_svc.calls`); a tool's own failure comes back as
        ``is_error`` with its text. ``deadline``: the seconds the caller has left; ``progress``:
        called with each progress notification of the server for this call; ``relay``: where the
        server's requests and log messages during the call go (:mod:`mcp_pool_svc.relay`).

        Raises:
            InvalidToolArgumentsError: arguments or meta are not a JSON object (or nest too deeply),
                or ``timeout_seconds`` is negative, infinite or NaN.
            UnknownServerError, UnknownToolError: nothing by that name.
            NotOwnerError: another shard runs the server (not sent).
            ServerUnavailableError: the call was not sent (server down or starting, pool stopping).
            ToolOutcomeUnknownError: the call was sent and its server went away (or the pool
                stopped) before it answered; the tool may have run.
            ToolCallTimeoutError: no result within the timeout (the server was sent a cancel).
            ResultTooLargeError: the result is over the cap and the pool is set to reject.
        """
        name = request.llm_name or request.tool
        with self._tracing.span("call_tool", attributes=self._call_attributes(name)) as span:
            checked = check_call(request)
            self._results.check(request)
            server, tool = self.resolve(server=request.server, tool=request.tool, llm_name=request.llm_name)
            span.set_attributes({"toolscout.mcp.server": server, "gen_ai.tool.name": tool})
            self._tracing.content(span, "gen_ai.tool.call.arguments", checked.arguments)
            # Shaped results are kept whole (up to results.max_kept_bytes) so the answer past the
            # first max_result_bytes stays readable behind the handle.
            cap = self._config.toolscout.results.max_kept_bytes if request.result_budget_tokens > 0 else None
            result = await self._runner.run(
                self._supervisors[server], tool, checked, deadline, span, progress, cap, relay
            )
            if request.result_budget_tokens <= 0:
                return result
            listed = self.catalog.lookup(server, tool)
            shaped = await self._results.shape(request, result, bool(listed and listed.output_schema_json))
            kept = shaped.result_handle != ""
            self._metrics.result_tokens(server, shaped.tokens_returned, shaped.tokens_delivered, kept)
            totals = self._result_totals.setdefault(server, [0, 0, 0])
            totals[0] += shaped.tokens_returned
            totals[1] += shaped.tokens_delivered
            totals[2] += int(kept)
            return shaped

    async def read_result(self, request: ReadRequest) -> ResultRead:
        """A page, grep or JMESPath projection of a result this pool kept behind a handle
        (:mod:`mcp_pool_svc.handles`).

        Raises:
            ResultHandleNotFoundError: no such handle for the request's principal and conversation.
            ResultHandleExpiredError: it expired or was dropped (the message says what to run again).
            InvalidArgumentError: a bad offset, pattern, context_lines, path, budget or encoding.
        """
        return await self._results.read(request)

    def _server_result_budget(self, name: str) -> int | None:
        server = self._config.servers.get(name)
        return server.result_budget if server is not None else None

    def _call_attributes(self, name: str) -> dict[str, Any]:
        shard = self._shard
        return {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "toolscout.pool.shard": f"{self._index}/{shard.count if shard else self.shard_count}",
        }

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
    ) -> CallToolResult:
        """:meth:`call` for in-process callers (tests, benchmarks), with mappings or JSON texts.

        Raises:
            as :meth:`call`.
        """
        request = CallRequest(
            llm_name=llm_name,
            server=server,
            tool=tool,
            arguments_json=_json_text(arguments, "arguments"),
            meta_json=_json_text(meta, "_meta"),
            timeout_seconds=timeout_seconds,
        )
        return await self.call(request, deadline=deadline)
