"""The pool facade: every server of this shard supervised, one catalog, tool calls.

:class:`McpPool` is what the servicer talks to. Its pieces, one responsibility each:

* :class:`~mcp_pool_svc.shard_servers.ShardServers`: which servers this shard runs, one
  :class:`~mcp_pool_svc.supervisor.Supervisor` each (started in parallel, so a slow or broken
  server delays nobody), stopping them, and resharding (:meth:`McpPool.reshard`: only the servers
  whose owner changed are started or stopped; a call for a server another shard runs is refused
  before anything is sent, :class:`NotOwnerError` naming the owners);
* :class:`~mcp_pool_svc.catalog.Catalog`, kept current by each supervisor's
  :class:`~mcp_pool_svc.listing.ServerListing`: the pool answers catalog queries from memory;
* :class:`~mcp_pool_svc.calls.CallRunner`: running tool calls (checks, at most one send unless
  safe to repeat, the result within the size cap), and
  :class:`~mcp_pool_svc.handles.ResultKeeper`: results shaped and kept behind handles.

A new kind of catalog entry (resources, prompts) is listed by ``ServerListing``, kept in a
catalog for its kind beside ``Catalog`` and answered by a query like :meth:`McpPool.list_tools`;
a request sent to a server on a caller's behalf (reading a resource, getting a prompt) finds its
supervisor through ``ShardServers`` (``NotOwnerError`` included), like :meth:`McpPool.call`.
Kinds with several requests of their own belong in a component the pool holds (as
``CallRunner`` holds the calls), so that this facade stays a list of entry points. What the pool returns is the shared vocabulary of the
client library: :class:`~toolscout.client.ServerStatus`, :class:`~toolscout.client.ToolCatalog`,
:class:`~toolscout.client.CatalogSnapshot`, :class:`~toolscout.client.CallToolResult`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import os
import random
from collections.abc import AsyncGenerator, Callable, Mapping
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
    UnknownToolError,
)
from mcp_pool_svc.feature_calls import FeatureCalls
from mcp_pool_svc.features import FeatureCatalog
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
from mcp_pool_svc.shard_servers import ReshardResult, ShardServers
from mcp_pool_svc.supervisor import ServerState, Supervisor
from mcp_pool_svc.user_tools import UserToolLists
from toolscout_kit.config import ToolscoutConfig
from toolscout_kit.logging import get_logger
from toolscout_kit.names import unknown_name
from toolscout_kit.oauth_client import RemoteAuth
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


def _call_attributes(name: str, servers: ShardServers) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "toolscout.pool.shard": f"{servers.index}/{servers.count}",
    }


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
        self._settings = config.toolscout.pool
        self._metrics = metrics or PoolMetrics()
        self._tracing = tracing
        self.catalog = Catalog(namespaced=config.namespaced)
        self.feature_catalog = FeatureCatalog(namespaced=config.namespaced)
        self._listeners: list[Callable[[str], None]] = []
        self._changed = asyncio.Event()
        # Per server: result tokens returned, delivered, and results kept (ListServers reports them).
        self._result_totals: dict[str, list[int]] = {}
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

        self._remote_auth = remote_auth = RemoteAuth(env)
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
        new_supervisor = functools.partial(
            Supervisor,
            settings=self._settings,
            connector=self._connect,
            catalog=self.catalog,
            probes=Probes(self._settings, self._rng),
            metrics=self._metrics,
            on_change=self._notify,
            rng=self._rng,
            features=self.feature_catalog,
        )
        self._servers = ShardServers(
            config,
            shard or resolve_identity(self._settings.shards),
            new_supervisor=new_supervisor,
            catalog=self.catalog,
            metrics=self._metrics,
            notify=self._notify,
            stop_timeout=_STOP_TIMEOUT,
        )
        self._results = ResultKeeper(
            config.toolscout.results, lambda: self._servers.index, self._servers.result_budget
        )

    @functools.cached_property
    def user_tools(self) -> UserToolLists:
        """The tools ``per_user`` servers list to each principal (:mod:`mcp_pool_svc.user_tools`)."""
        # Late-bound: a reshard replaces the running supervisors.
        running = lambda: self._servers.running.values()  # noqa: E731, PLW0108
        return UserToolLists(self.catalog, self._servers.supervisor, running, self._users)

    @functools.cached_property
    def features(self) -> FeatureCalls:
        """Requests for the servers' resources, prompts, completion and logging (routed through
        :attr:`feature_catalog`, which the supervisors keep current; see :mod:`mcp_pool_svc.features`)."""
        return FeatureCalls(
            self.feature_catalog,
            self._servers.supervisor,
            self._users,
            unsharded=lambda: self._servers.count == 1,
            ping_interval=self._settings.ping_interval,
        )

    @property
    def shard(self) -> ShardIdentity | None:
        """This pool's shard; None once a reshard left it out (its index is beyond the new count)."""
        return self._servers.shard

    @property
    def shard_count(self) -> int:
        return self._servers.count

    @property
    def shard_index(self) -> int:
        """This shard's index (kept when a reshard leaves it out, so that callers can still tell)."""
        return self._servers.index

    def owners(self, server: str) -> tuple[int, ...]:
        """The shards that run ``server`` under the current count."""
        return self._servers.owners(server)

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
        if any(getattr(c, "auth", None) for c in self._servers.config.servers.values()):
            # A token file under a previous key (a key rotation) moves to the current one.
            await anyio.to_thread.run_sync(self._remote_auth.renew_store)
        self._servers.start()
        if wait:
            try:
                await self.wait_until(lambda: self._servers.starting() == 0, wait)
            except TimeoutError:
                starting = self._servers.starting()
                log.info("pool_serving_while_servers_start", starting=starting, waited_seconds=wait)

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
        await self._servers.stop()
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
        """Applies the shard count and placement of ``config``
        (:meth:`~mcp_pool_svc.shard_servers.ShardServers.reshard`)."""
        return await self._servers.reshard(config)

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
        return list(self._servers.running)

    def is_serving(self, server: str) -> bool:
        """Whether this shard runs ``server`` and it can take calls."""
        sup = self._servers.running.get(server)
        return sup is not None and sup.state in (ServerState.READY, ServerState.IDLE)

    def list_servers(self) -> list[ServerStatus]:
        return [self._status_of(sup) for sup in sorted(self._servers.running.values(), key=lambda s: s.name)]

    def server_status(self, server: str) -> ServerStatus:
        """The status of a server this shard runs (or is handing over).

        Raises:
            UnknownServerError: the server is not configured.
            NotOwnerError: another shard runs it.
        """
        return self._status_of(self._servers.supervisor(server, leaving=True))

    def _status_of(self, sup: Supervisor) -> ServerStatus:
        returned, delivered, kept = self._result_totals.get(sup.name, (0, 0, 0))
        return dataclasses.replace(
            self._servers.status(sup),
            result_tokens_returned=returned,
            result_tokens_delivered=delivered,
            results_kept=kept,
        )

    def shard_info(self) -> ShardInfo:
        """The shard that answers (after a reshard that left it out: its old index of the new count)."""
        return self._servers.info()

    def list_tools(
        self, servers: list[str] | None = None, *, include_unavailable: bool = False
    ) -> ToolCatalog:
        """The catalog of this shard (optionally of some servers only).

        Raises:
            UnknownServerError: a name in ``servers`` is not configured.
            NotOwnerError: another shard runs a server in ``servers``.
        """
        for name in servers or ():
            self._servers.supervisor(name)
        snapshot = self.catalog.snapshot(include_unavailable=include_unavailable, servers=servers or None)
        return dataclasses.replace(snapshot, shard=self.shard_info())

    async def list_tools_as(
        self, principal: str, servers: list[str] | None = None, *, include_unavailable: bool = False
    ) -> ToolCatalog:
        """:meth:`list_tools` as ``principal`` sees it: each ``per_user`` server's tools are those
        it lists on their own session (:meth:`UserToolLists.catalog_as_seen_by`).

        Raises:
            UnknownServerError / NotOwnerError: as :meth:`list_tools`.
            UserAuthorizationRequiredError: the principal has no usable token for a ``per_user``
                server of the listing.
            ServerUnavailableError: a session of theirs could not be opened.
        """
        catalog = self.list_tools(servers, include_unavailable=include_unavailable)
        if not principal:
            return catalog
        return await self.user_tools.catalog_as_seen_by(catalog, principal, servers or ())

    async def watch_catalog(self, known_version: str = "") -> AsyncGenerator[CatalogSnapshot, None]:
        """The catalog now (unless still ``known_version``), then again on every change."""
        async with contextlib.aclosing(self.catalog.watch(known_version)) as updates:
            async for update in updates:
                yield dataclasses.replace(update, shard=self.shard_info())

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
                config = self._servers.config
                namespaced = {n: c for n, c in config.servers.items() if config.namespaced(n)}
                guess = server_named_by(llm_name, namespaced)
                if guess is not None and guess not in self._servers.running:
                    # Most likely a tool of a server another shard runs: let the caller route it.
                    raise self._servers.not_owner(guess)
                sup = self._servers.running.get(guess) if guess is not None else None
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
        sup = self._servers.supervisor(server)
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

    async def _resolve_as(self, request: CallRequest, principal: str) -> tuple[str, str]:
        """:meth:`resolve`, and else a tool a ``per_user`` server lists to ``principal`` only.

        Raises:
            As :meth:`resolve`; UserAuthorizationRequiredError: a name of a ``per_user`` server's
            tool the principal cannot list (no sign-in of theirs).
        """
        try:
            return self.resolve(server=request.server, tool=request.tool, llm_name=request.llm_name)
        except (UnknownToolError, ServerUnavailableError) as err:
            if isinstance(err, NotOwnerError) or not principal:
                raise
            found = await self.user_tools.resolve(
                server=request.server, tool=request.tool, llm_name=request.llm_name, principal=principal
            )
            if found is None:
                raise
            return found

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
        attributes = _call_attributes(name, self._servers) if self._tracing.enabled else None
        with self._tracing.span("call_tool", attributes=attributes) as span:
            checked = check_call(request)
            self._results.check(request)
            server, tool = await self._resolve_as(request, checked.principal)
            if span.is_recording():
                span.set_attributes({"toolscout.mcp.server": server, "gen_ai.tool.name": tool})
                self._tracing.content(span, "gen_ai.tool.call.arguments", checked.arguments)
            # Shaped results are kept whole (up to results.max_kept_bytes) so the answer past the
            # first max_result_bytes stays readable behind the handle.
            cap = (
                self._servers.config.toolscout.results.max_kept_bytes
                if request.result_budget_tokens > 0
                else None
            )
            result = await self._runner.run(
                self._servers.running[server], tool, checked, deadline, span, progress, cap, relay
            )
            if request.result_budget_tokens <= 0:
                return result
            listed = self.catalog.lookup(server, tool)
            has_schema = bool(listed and listed.output_schema_json)
            return await self._results.shape(
                request, result, has_schema, functools.partial(self._counted, server)
            )

    def _counted(self, server: str, returned: int, delivered: int, kept: bool) -> None:
        """One result shaped to a budget, in the metrics and the server's status totals."""
        self._metrics.result_tokens(server, returned, delivered, kept)
        totals = self._result_totals.setdefault(server, [0, 0, 0])
        totals[0] += returned
        totals[1] += delivered
        totals[2] += int(kept)

    async def read_result(self, request: ReadRequest) -> ResultRead:
        """A page, grep or JMESPath projection of a result this pool kept behind a handle
        (:mod:`mcp_pool_svc.handles`).

        Raises:
            ResultHandleNotFoundError: no such handle for the request's principal and conversation.
            ResultHandleExpiredError: it expired or was dropped (the message says what to run again).
            InvalidArgumentError: a bad offset, pattern, context_lines, path, budget or encoding.
        """
        return await self._results.read(request)

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
