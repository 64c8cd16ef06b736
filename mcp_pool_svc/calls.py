"""Running one tool call on a supervised session: checks, at most one send, the result.

:class:`CallRunner` is :class:`~mcp_pool_svc.pool.McpPool`'s call path. A call is checked first
(its arguments and ``_meta`` JSON objects nested at most :data:`MAX_ARGUMENT_DEPTH` deep, a sane
timeout), then sent on the server's persistent session under the server's concurrency limit and a
per-call timeout; on timeout or caller cancellation the MCP SDK sends ``notifications/cancelled``
to the server for the abandoned request.

A call runs at most once unless it is safe to repeat. A call that could not be sent (server down,
starting, pool stopping) is :class:`ServerUnavailableError`, safe to retry. A call that was sent
and then lost its answer (the server died, the pool stopped) is :class:`ToolOutcomeUnknownError`:
the tool may have run, and nothing retries it, except that a tool annotated ``readOnlyHint`` or
``idempotentHint`` is sent once more after its server restarts, within the call's timeout. Calls
to tools not annotated ``readOnlyHint`` run one at a time per server (``serialize_writes``). The
answer becomes the shared :class:`~toolscout.client.CallToolResult`, within the size cap.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import time
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack, nullcontext
from dataclasses import dataclass, field
from typing import Any, cast
from urllib.parse import urlsplit

import anyio
import mcp_types
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from opentelemetry.trace import Span
from toolscout.client import CallRequest, CallToolResult, ContentBlock

from mcp_pool_svc.catalog import Catalog
from mcp_pool_svc.errors import (
    InvalidToolArgumentsError,
    ResultTooLargeError,
    ServerUnavailableError,
    ToolCallTimeoutError,
    ToolOutcomeUnknownError,
)
from mcp_pool_svc.lean import lean_call
from mcp_pool_svc.metrics import Outcome, PoolMetrics
from mcp_pool_svc.per_user import UserSessions, is_per_user
from mcp_pool_svc.plain_call import plain_call_tool, plain_meta
from mcp_pool_svc.relay import HostRelay, HostSession, InputRound, declaring, wants_host_session
from mcp_pool_svc.results import apply_size_cap, content_from_mcp, error_result_content, payload_size
from mcp_pool_svc.session import Connection, ConnectionEvent, was_not_sent
from mcp_pool_svc.stdio import OVERSIZED_REPLY
from mcp_pool_svc.supervisor import Supervisor
from toolscout_kit.config import PoolSettings, RemoteServerConfig
from toolscout_kit.errors import FailedPreconditionError
from toolscout_kit.json_text import MAX_JSON_DEPTH, JsonTextError, nested_deeper_than, parse_json_object
from toolscout_kit.logging import get_logger, redact
from toolscout_kit.tracing import NO_TRACING, SpanKind, Tracing, add_event, set_attributes

__all__ = [
    "MAX_ARGUMENT_DEPTH",
    "CallRunner",
    "CheckedCall",
    "ProgressFn",
    "check_call",
    "require_json_object",
]

# A call's progress: called with ``(progress, total, message)`` of each notifications/progress of
# its server (the SDK's callback protocol).
ProgressFn = ProgressFnT

log = get_logger(__name__)

# Tool arguments nested deeper than this are refused: no tool schema needs it, and the JSON
# and pydantic code between here and the server recurses per level.
MAX_ARGUMENT_DEPTH = MAX_JSON_DEPTH


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


@dataclass(frozen=True, slots=True)
class CheckedCall:
    """A call whose arguments, ``_meta`` and timeout passed :func:`check_call`."""

    arguments: dict[str, Any]
    meta: dict[str, Any]
    timeout_seconds: float
    # Who calls (a per_user server runs the call with this principal's own token).
    principal: str = ""
    # MCP 2026-07-28 multi-round-trip (see ``CallRequest``): the caller relays input_required
    # results; a retry's host answers and the server's own state.
    accept_input_required: bool = False
    input_responses: mcp_types.InputResponses | None = None
    request_state: str | None = None
    host_capabilities: dict[str, Any] = field(default_factory=dict)


def check_call(request: CallRequest) -> CheckedCall:
    """The parsed arguments and ``_meta`` of ``request``, checked before anything else is done.

    Raises:
        InvalidToolArgumentsError: ``timeout_seconds`` is negative, infinite or NaN, or the arguments
            or ``_meta`` are not a JSON object (or nest too deeply).
    """
    seconds = request.timeout_seconds
    if not math.isfinite(seconds) or seconds < 0:
        raise InvalidToolArgumentsError(
            f"timeout_seconds must be a finite number of seconds, 0 or more (0 = the server's call_timeout); got {seconds!r}"
        )
    arguments = require_json_object(request.arguments_json, "arguments")
    meta = require_json_object(request.meta_json, "_meta")
    asked = InputRound.of(request)
    return CheckedCall(
        arguments,
        meta,
        seconds,
        request.principal,
        asked.accept,
        asked.input_responses,
        asked.request_state,
        dict(asked.host_capabilities),
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


def _ignore_event(kind: ConnectionEvent, detail: str) -> None:
    """A connection opened for one host's call coming and going says nothing of its server's state
    (the server's own connection does)."""


def _raise_if_lost(sup: Supervisor, err: MCPError) -> None:
    """A call's own session refused it unsent, or lost it after sending: the domain error.

    Raises:
        ServerUnavailableError: not sent.
        _SentThenLost: sent, then the session was lost.
    """
    if was_not_sent(err):
        raise ServerUnavailableError(
            f"MCP server {sup.name!r} could not be reached; the call was not sent"
        ) from None
    if err.code == mcp_types.CONNECTION_CLOSED:
        raise _SentThenLost(retried=False) from None


class _SentThenLost(Exception):
    """The request went to the server, then the connection was lost before its answer."""

    def __init__(self, retried: bool) -> None:
        super().__init__("lost after sending")
        self.retried = retried


@dataclass(eq=False)
class _Call:
    """One call in flight: what it calls, the scope the pool cancels at shutdown, and whether it
    was sent."""

    sup: Supervisor
    tool: str
    checked: CheckedCall
    # Called with each progress notification of the server for this call (None: none asked for).
    progress: ProgressFn | None = None
    # Where the server's requests and log messages during this call go (None: its host takes none).
    relay: HostRelay | None = None
    # The most bytes of its result kept (None: max_result_bytes); a caller that has results shaped
    # to a budget gets them whole up to results.max_kept_bytes.
    cap_bytes: int | None = None
    # The call's one cancel scope: its deadline is the call's timeout, and the pool cancels it at
    # shutdown (``drained``).
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    sent: bool = False
    drained: bool = False


class _WriteTurn:
    """Holds a server's write lock, and records how long it was waited for (a class, not a
    generator: entered on every call of a tool that is not read-only)."""

    __slots__ = ("_lock", "_metrics", "_server")

    def __init__(self, metrics: PoolMetrics, server: str, lock: asyncio.Lock) -> None:
        self._metrics = metrics
        self._server = server
        self._lock = lock

    async def __aenter__(self) -> None:
        waiting = time.perf_counter()
        await self._lock.acquire()
        try:
            waited = time.perf_counter() - waiting
            self._metrics.write_lock_waited(self._server, waited)
            set_attributes({"toolscout.call.write_wait_seconds": waited})
        except BaseException:
            self._lock.release()
            raise

    async def __aexit__(self, *exc: object) -> None:
        self._lock.release()


class CallRunner:
    """Runs the pool's tool calls and keeps track of those in flight (for draining)."""

    def __init__(
        self,
        settings: PoolSettings,
        catalog: Catalog,
        metrics: PoolMetrics,
        tracing: Tracing = NO_TRACING,
        users: UserSessions | None = None,
    ) -> None:
        """``tracing``: an MCP client span per request sent; :meth:`run` fills the call's span.
        ``users``: the per-principal sessions of ``per_user`` servers (:mod:`mcp_pool_svc.per_user`)."""
        self._users = users
        self._settings = settings
        self._catalog = catalog
        self._metrics = metrics
        self._tracing = tracing
        self._calls: set[_Call] = set()
        self._calls_done = asyncio.Event()
        self._calls_done.set()
        self.stopping = False

    async def drain(self, within: float) -> None:
        """Stops taking calls, gives those in flight ``within`` seconds, then aborts the rest.

        New calls get ServerUnavailableError (not sent); an aborted call gets
        ToolOutcomeUnknownError if it had been sent, ServerUnavailableError otherwise.
        """
        self.stopping = True
        if self._calls:
            with anyio.move_on_after(within):
                await self._calls_done.wait()
        for call in list(self._calls):
            call.drained = True
            call.scope.cancel()

    async def run(
        self,
        sup: Supervisor,
        tool: str,
        checked: CheckedCall,
        deadline: float | None,
        span: Span,
        progress: ProgressFn | None = None,
        cap_bytes: int | None = None,
        relay: HostRelay | None = None,
    ) -> CallToolResult:
        """Calls ``tool`` on ``sup``'s server; a tool's own failure comes back as ``is_error``.

        The timeout (0 = the server's ``call_timeout``) is further bounded by ``deadline``, the
        seconds the caller has left. ``span`` (the call's) gets the outcome and the result's size.
        ``cap_bytes``: the result is cut (or refused) past this many bytes instead of
        ``max_result_bytes``. ``relay``: the server's requests and log messages during the call go
        there (:mod:`mcp_pool_svc.relay`).

        Raises:
            ServerUnavailableError: the call was not sent (server down or starting, pool stopping).
            ToolOutcomeUnknownError: the call was sent and its server went away (or the pool
                stopped) before it answered; the tool may have run.
            ToolCallTimeoutError: no result within the timeout (the server was sent a cancel).
            ResultTooLargeError: the result is over the cap and the pool is set to reject, or its
                reply line is over the reading limit.
        """
        server = sup.name
        if self.stopping:
            raise ServerUnavailableError("the MCP pool is shutting down; the call was not sent")
        limit = checked.timeout_seconds if checked.timeout_seconds > 0 else sup.config.call_timeout
        if deadline is not None:
            limit = min(limit, deadline)
        started = time.perf_counter()
        outcome: Outcome = "error"
        call = _Call(
            sup,
            tool,
            checked,
            progress,
            relay,
            cap_bytes,
            anyio.CancelScope(deadline=anyio.current_time() + limit),
        )
        self._calls.add(call)
        self._calls_done.clear()
        sup.call_started()
        try:
            result, outcome = await self._attempt(call, limit, started)
            if span.is_recording():
                size = sum(payload_size(c) for c in result.content) + len(
                    result.structured_content_json.encode()
                )
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

    async def _attempt(self, call: _Call, limit: float, started: float) -> tuple[CallToolResult, Outcome]:
        """Runs the call and turns what can go wrong into a domain error or an error result."""
        server, tool = call.sup.name, call.tool
        try:
            # One scope for the timeout and the shutdown (as fail_after around a scope of its own,
            # at half the cost): cancelled by drain(), or past its deadline.
            with call.scope:
                raw = await self._send(call)
            if call.scope.cancelled_caught:
                if not call.drained:
                    raise TimeoutError
                if call.sent:
                    raise _SentThenLost(retried=False)
                raise ServerUnavailableError("the MCP pool is shutting down; the call was not sent")
        except TimeoutError:
            raise ToolCallTimeoutError(
                f"tool {tool!r} on MCP server {server!r} did not answer within {limit:g}s; the call was cancelled"
            ) from None
        except _SentThenLost as lost:
            why = "the MCP pool is shutting down" if self.stopping else "its connection closed"
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
            # A protocol-level refusal (bad params, unknown tool) is something the LLM can fix; its
            # code travels along, so that an MCP front door answers with the same JSON-RPC error.
            content = error_result_content(redact(err.message))
            result = self._finish(call, content, "", True, started)
            return dataclasses.replace(result, jsonrpc_error_code=err.code), "tool_error"
        except (ServerUnavailableError, FailedPreconditionError, asyncio.CancelledError):
            # FailedPrecondition: a per_user caller without a usable token, or no encrypted store.
            raise
        except Exception:
            log.exception("tool_call_failed", server=server, tool=tool)
            content = error_result_content(
                "the MCP server returned a reply that is not a valid MCP tool result"
            )
            return self._finish(call, content, "", True, started), "error"
        result = self._convert(call, raw, started)
        return result, "tool_error" if result.is_error else "ok"

    async def _send(self, call: _Call) -> Any:
        """Sends the call once (twice for a repeatable tool whose server died mid-call).

        Raises:
            ServerUnavailableError: not sent.
            _SentThenLost: sent, and the connection was lost before the answer.
            MCPError: the server answered with an error.
        """
        sup, tool = call.sup, call.tool
        listed = self._catalog.lookup(sup.name, tool)
        read_only = listed is not None and listed.read_only
        repeatable = listed is not None and (listed.read_only or listed.idempotent)
        async with sup.semaphore:
            if is_per_user(sup.config):
                async with self._write_turn(sup, read_only):
                    return await self._send_as_user(call)
            lost: Connection | None = None  # the connection a sent call was lost on
            stale: Connection | None = None  # one that closed while this call waited its turn
            while True:
                try:
                    conn = await sup.connection_for_call(
                        wait_for_restart=lost is not None, not_this=lost or stale
                    )
                except ServerUnavailableError:
                    if lost is not None:
                        raise _SentThenLost(retried=True) from None
                    raise
                host = wants_host_session(call.relay, conn.modern, isinstance(sup.config, RemoteServerConfig))
                if host is not None:
                    async with self._write_turn(sup, read_only):
                        return await self._send_on_host_session(call, host)
                try:
                    # The write lock (a tool not annotated read-only) is held around the request
                    # only: waiting for a connection or a restart holds nothing.
                    async with self._write_turn(sup, read_only):
                        if conn.closed.is_set():
                            stale = conn  # not sent: take the next connection
                            continue
                        call.sent = True
                        # The SDK writes the span's traceparent into the request's _meta.
                        answer = await self._request(call, conn)
                except MCPError as err:
                    if was_not_sent(err):
                        # Refused at once: the server is gone. The supervisor checks it now.
                        sup.connection_refused()
                        if lost is not None:
                            raise _SentThenLost(retried=False) from None
                        raise ServerUnavailableError(
                            f"MCP server {sup.name!r} could not be reached; the call was not sent"
                        ) from None
                    if err.code != mcp_types.CONNECTION_CLOSED:
                        raise
                    if not repeatable or lost is not None:
                        raise _SentThenLost(retried=lost is not None) from None
                    log.info("tool_call_retry_after_restart", server=sup.name, tool=tool)
                    add_event("retry", {"reason": "connection closed; sent again after the restart"})
                    lost = conn
                    continue
                if not read_only:
                    # Re-listing the server's tools, if due, happens in its supervisor's task.
                    sup.call_may_have_changed_tools()
                return answer

    async def _send_as_user(self, call: _Call) -> Any:
        """Sends the call once on the caller's own session of a ``per_user`` server.

        Raises:
            UserAuthorizationRequiredError: the caller has no usable token (not sent, or refused
                for lack of authorization: the server ran nothing).
            ServerUnavailableError: the session could not be opened (not sent).
            _SentThenLost: sent, and the session was lost before the answer.
        """
        sup, principal = call.sup, call.checked.principal
        if self._users is None:
            raise ServerUnavailableError(f"MCP server {sup.name!r} has no per-user sessions here; not sent")
        assert isinstance(sup.config, RemoteServerConfig)  # is_per_user
        async with self._users.session(sup.name, sup.config, principal) as conn:
            call.sent = True
            try:
                return await self._request(call, conn)
            except Exception as err:
                refused = self._users.authorization_failed(sup.name, principal)
                if refused is not None:
                    raise refused from None
                if isinstance(err, MCPError):
                    _raise_if_lost(sup, err)
                raise

    async def _send_on_host_session(self, call: _Call, host: HostSession) -> Any:
        """Sends the call once on a session of the host's era opened for it (see
        :func:`mcp_pool_svc.relay.wants_host_session`), closed after the answer.

        Raises:
            ServerUnavailableError: the session could not be opened (not sent).
            _SentThenLost: sent, and the session was lost before the answer.
            MCPError: the server answered with an error.
        """
        sup = call.sup
        async with AsyncExitStack() as stack:
            try:
                conn = await stack.enter_async_context(
                    sup.connector(sup.name, sup.config, _ignore_event, host)
                )
            except Exception as err:
                log.info("host_session_not_opened", server=sup.name, error=type(err).__name__)
                raise ServerUnavailableError(
                    f"MCP server {sup.name!r} could not open a session in the host's protocol revision; "
                    "the call was not sent"
                ) from None
            call.sent = True
            try:
                return await self._request(call, conn)
            except MCPError as err:
                _raise_if_lost(sup, err)
                raise

    async def _request(self, call: _Call, conn: Connection) -> Any:
        """The ``tools/call`` request itself, in its span, registered with the connection's router.

        Raises:
            MCPError: as ``ClientSession.call_tool``.
        """
        sup, tool, checked = call.sup, call.tool, call.checked
        meta = checked.meta
        # The span's attributes are built only when tracing is on (a dict and a URL parse per call).
        attributes = _mcp_attributes(sup, conn, tool) if self._tracing.enabled else None
        # Nothing but the call itself: the SDK's call_tool without its detours (mcp_pool_svc.lean).
        plain = (
            conn.send_raw is not None
            and call.relay is None
            and call.progress is None
            and checked.input_responses is None
            and checked.request_state is None
            and plain_meta(meta)
        )
        with (
            self._tracing.span(f"tools/call {tool}", kind=SpanKind.CLIENT, attributes=attributes),
            conn.router.calling(call.relay),
            declaring(checked.host_capabilities) if checked.accept_input_required else nullcontext(),
            # Nothing to relay: the request may be one direct POST (mcp_pool_svc.lean).
            lean_call() if call.relay is None else nullcontext(),
        ):
            if plain and conn.send_raw is not None:
                return await plain_call_tool(
                    conn.session,
                    conn.send_raw,
                    tool,
                    checked.arguments,
                    meta,
                    allow_input_required=checked.accept_input_required,
                )
            return await conn.session.call_tool(
                tool,
                checked.arguments,
                progress_callback=call.progress,
                meta=cast(mcp_types.RequestParamsMeta, meta) if meta else None,
                input_responses=checked.input_responses,
                request_state=checked.request_state,
                allow_input_required=checked.accept_input_required,
            )

    def _write_turn(self, sup: Supervisor, read_only: bool) -> AbstractAsyncContextManager[Any]:
        """The server's write lock for a call that is not read-only (``serialize_writes``), timed."""
        if sup.write_lock is None or read_only:
            return nullcontext()
        return _WriteTurn(self._metrics, sup.name, sup.write_lock)

    def _convert(self, call: _Call, raw: Any, started: float) -> CallToolResult:
        if isinstance(raw, mcp_types.InputRequiredResult):
            # The server asks for input (2026-07-28): passed on whole, for the caller to relay.
            asked = raw.model_dump(by_alias=True, mode="json", exclude_none=True)
            result = self._finish(call, (), "", False, started)
            return dataclasses.replace(
                result, input_required_json=json.dumps(asked, ensure_ascii=False, separators=(",", ":"))
            )
        content = tuple(content_from_mcp(block) for block in raw.content)
        structured = raw.structured_content
        structured_json = (
            json.dumps(structured, ensure_ascii=False, separators=(",", ":"))
            if structured is not None
            else ""
        )
        result = self._finish(call, content, structured_json, bool(raw.is_error), started)
        if raw.meta:
            result = dataclasses.replace(
                result, meta_json=json.dumps(raw.meta, ensure_ascii=False, separators=(",", ":"))
            )
        return result

    def _finish(
        self,
        call: _Call,
        content: tuple[ContentBlock, ...],
        structured_json: str,
        is_error: bool,
        started: float,
    ) -> CallToolResult:
        server, tool = call.sup.name, call.tool
        content, structured_json, truncated = apply_size_cap(
            content,
            structured_json,
            max_bytes=call.cap_bytes if call.cap_bytes is not None else self._settings.max_result_bytes,
            mode=self._settings.result_overflow,
            what=f"{server}/{tool}",
        )
        return CallToolResult(
            content=content,
            structured_content_json=structured_json,
            is_error=is_error,
            truncated=truncated,
            server=server,
            tool=tool,
            duration_seconds=time.perf_counter() - started,
        )
