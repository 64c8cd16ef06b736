"""The pool facade: every configured server supervised, one catalog, tool calls.

:class:`McpPool` is what the servicer talks to. It starts one :class:`Supervisor` per server (in
parallel, so a slow or broken server delays nobody), answers catalog queries from memory, and
runs tool calls on the server's persistent session under a per-server concurrency limit and a
per-call timeout. On timeout or caller cancellation the MCP SDK sends ``notifications/cancelled``
to the server for the abandoned request.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from pathlib import Path
from typing import Any, TextIO, cast

import anyio
import mcp_types
from mcp.shared.exceptions import MCPError

from mcp_pool_svc.catalog import Catalog, CatalogSnapshot, CatalogUpdate
from mcp_pool_svc.errors import (
    InvalidToolArgumentsError,
    ServerUnavailableError,
    ToolCallTimeoutError,
    UnknownServerError,
    UnknownToolError,
)
from mcp_pool_svc.metrics import Outcome, PoolMetrics
from mcp_pool_svc.results import (
    ToolResult,
    apply_size_cap,
    content_from_mcp,
    error_result_content,
)
from mcp_pool_svc.session import Connector, make_connector
from mcp_pool_svc.supervisor import ServerState, ServerStatus, Supervisor
from toolscout_kit.config import ToolscoutConfig
from toolscout_kit.logging import get_logger, redact

__all__ = ["McpPool", "require_json_object"]

log = get_logger(__name__)

# Time a stopping supervisor gets to close its session (the stdio shutdown itself is bounded).
_STOP_TIMEOUT = 15.0


def require_json_object(text: str | Mapping[str, Any] | None, what: str) -> dict[str, Any]:
    """A JSON object from a string (empty = ``{}``).

    Raises:
        InvalidToolArgumentsError: not valid JSON, or valid JSON that is not an object.
    """
    if text is None or (isinstance(text, str) and not text.strip()):
        return {}
    if isinstance(text, Mapping):
        return dict(text)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise InvalidToolArgumentsError(f"{what} must be a JSON object: invalid JSON ({err.msg})") from None
    if not isinstance(value, dict):
        raise InvalidToolArgumentsError(f"{what} must be a JSON object, got {type(value).__name__}")
    return value


class McpPool:
    """Supervised sessions to every configured MCP server, one catalog, tool calls."""

    def __init__(
        self,
        config: ToolscoutConfig,
        *,
        metrics: PoolMetrics | None = None,
        connector: Connector | None = None,
        rng: random.Random | None = None,
        errlog: TextIO | None = None,
    ) -> None:
        self._settings = config.toolscout.pool
        self._metrics = metrics or PoolMetrics()
        self.catalog = Catalog()
        self._listeners: list[Callable[[str], None]] = []
        self._changed = asyncio.Event()
        connect = connector or make_connector(base_dir=Path(config.base_dir), errlog=errlog)
        shared_rng = rng or random.Random()  # noqa: S311 - jitter, not cryptography
        self._supervisors = {
            name: Supervisor(
                name,
                server,
                self._settings,
                connector=connect,
                catalog=self.catalog,
                metrics=self._metrics,
                on_change=self._notify,
                rng=shared_rng,
            )
            for name, server in sorted(config.servers.items())
        }
        self._tasks: list[asyncio.Task[None]] = []

    # --- lifecycle -----------------------------------------------------------------------

    async def start(self, *, wait: float | None = None) -> None:
        """Starts every server in parallel; with ``wait``, waits (bounded) until none is STARTING."""
        for sup in self._supervisors.values():
            self._metrics.server_up(sup.name, False)
            self._tasks.append(asyncio.create_task(sup.run(), name=f"supervisor-{sup.name}"))
        if wait:
            await self.wait_until(
                lambda: all(s.state is not ServerState.STARTING for s in self._supervisors.values()), wait
            )

    async def stop(self) -> None:
        """Stops every server and waits for their processes to be gone."""
        for sup in self._supervisors.values():
            sup.request_stop()
        if self._tasks:
            _done, pending = await asyncio.wait(self._tasks, timeout=_STOP_TIMEOUT)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=_STOP_TIMEOUT)
        self._tasks.clear()

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
        return self._supervisor(server).state in (ServerState.READY, ServerState.IDLE)

    def list_servers(self) -> list[ServerStatus]:
        return [sup.status() for sup in self._supervisors.values()]

    def server_status(self, server: str) -> ServerStatus:
        """Raises UnknownServerError for a server that is not configured."""
        return self._supervisor(server).status()

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
        sup = self._supervisors.get(server)
        if sup is None:
            known = ", ".join(self._supervisors) or "none configured"
            raise UnknownServerError(f"unknown MCP server {server!r} (servers: {known})")
        return sup

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
                raise UnknownToolError(f"unknown tool {llm_name!r}: no tool in the catalog has this name")
            return found.server, found.name
        if not server or not tool:
            raise InvalidToolArgumentsError("name the tool with llm_name, or with both server and tool")
        sup = self._supervisor(server)
        if self.catalog.lookup(server, tool) is None:
            if not self.catalog.has_listing(server):
                raise ServerUnavailableError(
                    f"MCP server {server!r} is {sup.state.value} and has not listed its tools"
                    + (f": {sup.status().last_error}" if sup.status().last_error else "")
                )
            raise UnknownToolError(f"MCP server {server!r} has no tool {tool!r}")
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
            InvalidToolArgumentsError: arguments or meta are not a JSON object.
            UnknownServerError, UnknownToolError: nothing by that name.
            ServerUnavailableError: the server is down or lost the connection during the call.
            ToolCallTimeoutError: no result within the timeout (the server was sent a cancel).
            ResultTooLargeError: the result is over the cap and the pool is set to reject.
        """
        args = require_json_object(arguments, "arguments")
        meta_obj = require_json_object(meta, "_meta")
        server, tool = self.resolve(server=server, tool=tool, llm_name=llm_name)
        sup = self._supervisors[server]
        limit = timeout_seconds if timeout_seconds > 0 else sup.config.call_timeout
        if deadline is not None:
            limit = min(limit, deadline)
        started = time.perf_counter()
        outcome: Outcome = "error"
        sup.call_started()
        try:
            try:
                with anyio.fail_after(limit):
                    async with sup.semaphore:
                        conn = await sup.connection_for_call()
                        raw = await conn.session.call_tool(
                            tool,
                            args,
                            meta=cast(mcp_types.RequestParamsMeta, meta_obj) if meta_obj else None,
                        )
            except TimeoutError:
                outcome = "timeout"
                raise ToolCallTimeoutError(
                    f"tool {tool!r} on MCP server {server!r} did not answer within {limit:g}s; the call was cancelled"
                ) from None
            except MCPError as err:
                if err.code == mcp_types.CONNECTION_CLOSED:
                    outcome = "unavailable"
                    raise ServerUnavailableError(
                        f"MCP server {server!r} closed the connection during the call of {tool!r}"
                    ) from None
                # A protocol-level refusal (bad params, unknown tool) is something the LLM can fix.
                outcome = "tool_error"
                return self._finish(
                    server, tool, error_result_content(redact(err.message)), "", True, started
                )
            except ServerUnavailableError:
                outcome = "unavailable"
                raise
            except asyncio.CancelledError:
                outcome = "cancelled"
                raise
            except Exception as err:
                log.exception("tool_call_failed", server=server, tool=tool)
                outcome = "error"
                message = f"the MCP server returned an invalid result: {type(err).__name__}"
                return self._finish(server, tool, error_result_content(message), "", True, started)
            result = self._convert(server, tool, raw, started)
            outcome = "tool_error" if result.is_error else "ok"
            return result
        finally:
            sup.call_finished()
            self._metrics.tool_call(server, outcome, time.perf_counter() - started)

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
