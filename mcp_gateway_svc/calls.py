"""Running one tool for an MCP client: check the arguments, call the pool, hand the result back.

The pool's contracts travel through unchanged: a tool's own failure is a result with ``isError``
(every content block, ``structuredContent``, ``isError`` and ``_meta`` as the MCP server sent
them), and a JSON-RPC error the MCP server answered with stays that error (its code); a call
that was sent and lost (``OutcomeUnknownError``) says the tool may or may not have run and is never
retried; a call that was not sent (server down) names the server and its state. Arguments that do
not fit the tool's input schema never reach the pool: the answer shows the expected shape, as
``toolscout describe`` prints it, so the model can correct itself (the check and its sentence are
:mod:`toolscout_kit.call_tool`'s, as for the orchestrator). Cancelling the MCP request
cancels the CallTool RPC (and the pool sends ``notifications/cancelled`` to the MCP server).

With a result budget (:class:`~mcp_gateway_svc.results.ResultOwner`) the pool shapes the result
for the host (the text copy of a duplicated structured result: hosts read ``content``); one over
the budget is a preview followed by a ``resource_link`` to the whole (:mod:`mcp_gateway_svc.results`).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError
from toolscout.client import (
    AsyncShardedPoolClient,
    CallRelay,
    CallRequest,
    CallToolResult,
    GatewayMode,
    StructuredCopy,
    Tool,
    ToolscoutClientError,
    authorization_required,
)
from toolscout.client.aio import ProgressCallback
from toolscout.client.types import json_object_text

from mcp_gateway_svc.input_rounds import HostRound, InputRounds, Resumed, RoundOf
from mcp_gateway_svc.metrics import GatewayMetrics
from mcp_gateway_svc.results import ResultOwner, result_link
from toolscout_kit.call_tool import check_arguments
from toolscout_kit.errors import (
    CancelledError,
    DeadlineExceededError,
    InvalidArgumentError,
    NotFoundError,
    OutcomeUnknownError,
    ResourceExhaustedError,
    UnavailableError,
)
from toolscout_kit.inflight import InFlight
from toolscout_kit.logging import get_logger
from toolscout_kit.status import (
    PeerUnavailableError,
    error_from_client,
    outcome_unknown_text,
    without_internals,
)

if TYPE_CHECKING:
    from mcp_gateway_svc.user_login import UserLogin

__all__ = [
    "TIMEOUT_META_KEY",
    "LoginAsker",
    "ToolCaller",
    "error_result",
    "mcp_result",
    "rpc",
    "text_result",
]

T = TypeVar("T")

_log = get_logger(__name__)

# ``_meta`` key of a tools/call request: seconds the caller will wait. It becomes the pool's
# per-call timeout and (with a margin) the CallTool RPC's deadline. MCP has no timeout field of its
# own: a client that gives up cancels the request instead, which cancels the RPC too.
TIMEOUT_META_KEY = "toolscout/timeoutSeconds"
# What a caller is told of a call that end_calls() ended.
_ENDED_AT_STOP = "the gateway stopped before the tool answered, and the call was cancelled."
# Reserved by the protocol for its own use (protocol version, client info, progress tokens): not
# the MCP server's business, so not passed on with the call.
_RESERVED_META = re.compile(r"^(?:io\.modelcontextprotocol/|toolscout/)|^progress(?:Token|_token)$")


async def rpc(awaitable: Awaitable[T]) -> T:
    """Awaits a gRPC call in an MCP request handler, so that cancelling the request ends only it.

    The SDK cancels a request (``notifications/cancelled``, a closed stream) through an anyio cancel
    scope, which absorbs only its own cancellation. ``grpc.aio`` turns it into a ``CancelledError``
    of its own, which the scope would pass on and which ends the whole session (its serve loop);
    the scope's own cancellation is raised instead.

    Raises:
        asyncio.CancelledError: the request was cancelled.
    """
    try:
        return await awaitable
    except asyncio.CancelledError:
        await anyio.lowlevel.checkpoint_if_cancelled()
        raise


def text_result(text: str, *, is_error: bool = False, structured: Any = None) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=structured, is_error=is_error
    )


def error_result(text: str) -> types.CallToolResult:
    return text_result(text if text.startswith("Error") else f"Error: {text}", is_error=True)


def mcp_result(result: CallToolResult) -> types.CallToolResult:
    """The pool's result as the MCP server sent it."""
    structured = result.structured_content if result.structured_content_json else None
    content: list[Any] = []
    for block in result.content:
        raw = block.to_mcp()
        if raw.keys() == {"type", "text"} and raw["type"] == "text":
            # The common block, plain text: built directly (validating a whole result per block
            # was a tenth of a millisecond of a call).
            content.append(types.TextContent(type="text", text=block.text))
            continue
        try:
            content.append(types.CallToolResult.model_validate({"content": [raw]}).content[0])
        except ValidationError:
            # A block of a protocol revision this SDK does not know: its text, at least.
            content.append(types.TextContent(type="text", text=block.text or json.dumps(raw)))
    if result.result_handle:
        content.append(result_link(result.result_handle, f"{result.server}/{result.tool}"))
    meta = json.loads(result.meta_json) if result.meta_json else None
    return types.CallToolResult(
        content=content, structured_content=structured, is_error=result.is_error, _meta=meta
    )


def call_meta(meta: Mapping[str, Any] | None) -> tuple[dict[str, Any], float]:
    """The ``_meta`` to pass on to the MCP server, and the caller's timeout (0 = none given).

    Raises:
        MCPError: ``INVALID_PARAMS``, the timeout given is not a number of seconds above 0 (refused
            rather than ignored: the caller expects its bound to hold).
    """
    if not meta:
        return {}, 0.0
    timeout = 0.0
    if TIMEOUT_META_KEY in meta:
        raw = meta[TIMEOUT_META_KEY]
        if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw) or raw <= 0:
            shown = json.dumps(raw)[:40]
            raise MCPError(
                types.INVALID_PARAMS,
                f"_meta {TIMEOUT_META_KEY} must be a number of seconds above 0, got {shown}",
            )
        timeout = float(raw)
    return {k: v for k, v in meta.items() if not _RESERVED_META.search(k)}, timeout


@dataclass(frozen=True, slots=True)
class _Relayed:
    """What a call hands to its host while it runs: progress only, or everything (``relay``)."""

    progress: ProgressCallback | None
    relay: CallRelay | None
    # The host asked for the server's log messages at or above this level ("": none asked).
    log_level: str = ""


@dataclass(frozen=True, slots=True)
class LoginAsker:
    """How to point a caller at a login link: the gateway's base URL as the caller reached it, and
    a URL-mode elicitation when the host can show one (None: the result's text only)."""

    base_url: str
    elicit: Callable[[str, str, str], Awaitable[None]] | None = None


class ToolCaller:
    """Calls tools through the (sharded) pool client on behalf of MCP clients."""

    def __init__(
        self,
        pool: AsyncShardedPoolClient,
        metrics: GatewayMetrics,
        user_login: UserLogin | None = None,
        rounds: InputRounds | None = None,
    ) -> None:
        """``user_login``: the login links of ``per_user`` servers (:mod:`mcp_gateway_svc.user_login`);
        ``rounds``: how ``input_required`` states are sealed (:mod:`mcp_gateway_svc.input_rounds`)."""
        self._pool = pool
        self._metrics = metrics
        self._login = user_login
        self._rounds = rounds if rounds is not None else InputRounds()
        # The calls waiting for the pool's answer.
        self._calls = InFlight()

    def end_calls(self) -> int:
        """Ends every call still waiting for the pool (the gateway is stopping and its grace is
        over); returns how many. Each one's RPC is cancelled, which cancels it at the MCP server,
        and its caller is answered that the outcome is unknown: the tool may have run."""
        return self._calls.end_all()

    async def call(
        self,
        tool: Tool,
        arguments: Mapping[str, Any] | None,
        *,
        mode: GatewayMode,
        meta: Mapping[str, Any] | None = None,
        owner: ResultOwner | None = None,
        protocol_errors: bool = True,
        progress: ProgressCallback | None = None,
        relay: CallRelay | None = None,
        log_level: str = "",
        principal: str = "",
        asker: LoginAsker | None = None,
        host_round: HostRound | None = None,
    ) -> types.CallToolResult | types.InputRequiredResult | CallToolResult:
        """Runs ``tool`` as ``principal`` (the caller: a ``per_user`` server runs it with that
        principal's own token); every outcome but cancellation is a result the model can read, except
        that with ``protocol_errors`` a JSON-RPC error of the MCP server stays one. ``owner``: the
        host's result budget and who may read a kept result (None: no shaping). ``progress`` (only
        when the host asked for progress: the call then streams from the pool) is awaited with each
        progress notification of the MCP server. ``relay`` (a host that can answer the server's
        requests: :mod:`mcp_gateway_svc.relay`) takes the call onto the pool's relay stream, and
        then carries its progress too; ``log_level`` (the host asked for log messages, which
        ``relay`` carries) goes on to the server as ``_meta`` ``io.modelcontextprotocol/logLevel``,
        how a 2026-07-28 server is asked to log. A caller who must sign in first gets the login link
        (``asker``: where else it goes). ``host_round`` (a 2026-07-28 host: its answers and state,
        if any): a server asking for input comes back as an ``InputRequiredResult`` whose state is
        sealed with the routing (:mod:`mcp_gateway_svc.input_rounds`). A result of the MCP server
        is handed back as the pool answered it (:func:`mcp_result` is its MCP form; the lean path
        writes its wire form in one pass, :func:`mcp_gateway_svc.lean_rules.pool_result_wire`).

        Raises:
            MCPError: the caller's ``_meta`` timeout is not a number of seconds (INVALID_PARAMS), or
                the MCP server answered with a JSON-RPC error (its code and message), with
                ``protocol_errors``.
        """
        started = time.perf_counter()
        outcome = "error"
        try:
            try:
                passed_meta, timeout = call_meta(meta)
                resumed = (
                    self._rounds.resume(
                        RoundOf.TOOL, tool.llm_name, host_round, server=tool.server, principal=principal
                    )
                    if host_round is not None
                    else None
                )
            except MCPError:
                outcome = "invalid_arguments"
                raise
            try:
                result, outcome = await self._call(
                    tool,
                    dict(arguments or {}),
                    passed_meta,
                    timeout,
                    owner,
                    _Relayed(progress, relay, log_level),
                    principal,
                    asker,
                    resumed,
                )
            except MCPError as err:
                outcome = "tool_error"
                if protocol_errors:
                    raise
                return error_result(err.message)
            return result
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        finally:
            self._metrics.tool_call(mode, outcome, time.perf_counter() - started)

    async def _call(
        self,
        tool: Tool,
        arguments: dict[str, Any],
        passed_meta: dict[str, Any],
        timeout_seconds: float,
        owner: ResultOwner | None,
        relayed: _Relayed,
        principal: str,
        asker: LoginAsker | None,
        resumed: Resumed | None,
    ) -> tuple[types.CallToolResult | types.InputRequiredResult | CallToolResult, str]:
        misfit = check_arguments(tool, arguments)
        if misfit is not None:
            return error_result(misfit.text), "invalid_arguments"
        if relayed.log_level:
            passed_meta = {**passed_meta, types.LOG_LEVEL_META_KEY: relayed.log_level}
        # The caller: a per_user server runs the call with this principal's own token.
        fields: dict[str, Any] = {"principal": principal} if principal else {}
        if owner is not None and owner.budget:
            fields.update(
                result_budget_tokens=owner.budget,
                # (hosts are not told a result's tokens: the pool counts one that fits after answering)
                defer_token_counts=True,
                structured_copy=StructuredCopy.TEXT,
                principal=owner.principal,
                conversation=owner.conversation,
            )
        if resumed is not None:
            fields.update(resumed.fields())
        # Built once with every field set (a copy per group was a measurable part of a call).
        request = CallRequest(
            llm_name=tool.llm_name,
            arguments_json=json_object_text(arguments),
            meta_json=json_object_text(passed_meta or None),
            timeout_seconds=timeout_seconds,
            **fields,
        )
        try:
            result = await self._sent(request, tool.server, relayed)
        except ToolscoutClientError as err:
            server = authorization_required(err)
            if server is not None:
                return await self._sign_in_first(tool, server, principal, asker), "authorization_required"
            return self._failed(tool, error_from_client(err, "pool"))
        if result is None:
            return error_result(outcome_unknown_text(tool.llm_name, _ENDED_AT_STOP)), "unknown"
        if result.jsonrpc_error_code:
            raise MCPError(result.jsonrpc_error_code, result.text)
        if result.input_required_json:
            asked = self._rounds.wrap(
                RoundOf.TOOL, tool.llm_name, tool.server, result.input_required_json, principal=principal
            )
            return asked, "input_required"
        return result, "tool_error" if result.is_error else "ok"

    async def _sent(self, request: CallRequest, server: str, relayed: _Relayed) -> CallToolResult | None:
        """The pool's answer to ``request``; None when :meth:`end_calls` ended the call."""
        with self._calls.track():
            return await rpc(
                self._pool.call(
                    request,
                    server_hint=server,
                    # The pool bounds a call by the server's call_timeout; the caller's own timeout,
                    # when it gave one, bounds the RPC (the client adds a margin for the answer).
                    deadline=None,
                    progress=relayed.progress if relayed.relay is None else None,
                    relay=relayed.relay,
                )
            )
        return None  # (the block absorbed end_calls' cancellation)

    async def _sign_in_first(
        self, tool: Tool, server: str, principal: str, asker: LoginAsker | None
    ) -> types.CallToolResult:
        """The answer to a caller who must authorize ``server`` for themself: the login link, as a
        URL-mode elicitation when the host can show one, and in the result's text."""
        name = tool.llm_name
        link = (
            self._login.link(asker.base_url, principal, server) if self._login and asker and principal else ""
        )
        if not link:
            return error_result(
                f"'{name}' was not run: MCP server {server!r} is called with each user's own "
                "authorization, and this caller has none (an authenticated caller signs in at the gateway)"
            )
        message = f"Sign in to {server!r} so that toolscout can call it as you."
        if asker is not None and asker.elicit is not None:
            try:
                await asker.elicit(message, link, secrets.token_urlsafe(12))
            except (MCPError, RuntimeError) as err:
                _log.info("login elicitation not answered", server=server, error=type(err).__name__)
        return error_result(f"'{name}' was not run: {message} Open {link} , then call the tool again.")

    def _failed(self, tool: Tool, err: Exception) -> tuple[types.CallToolResult, str]:
        name = tool.llm_name
        message = getattr(err, "message", str(err))
        if isinstance(err, OutcomeUnknownError):
            # The one sentence the orchestrator writes too (the pool's own text says the same again).
            return error_result(outcome_unknown_text(name)), "unknown"
        if isinstance(err, CancelledError):
            raise asyncio.CancelledError
        if isinstance(err, UnavailableError):
            # Not sent: the pool names the server and its state (reconnecting, failed, ...).
            detail = without_internals(err.detail if isinstance(err, PeerUnavailableError) else message)
            return error_result(f"'{name}' was not run: {detail}"), "unavailable"
        if isinstance(err, DeadlineExceededError):
            return error_result(f"'{name}' did not answer in time: {without_internals(message)}"), "timeout"
        if isinstance(err, InvalidArgumentError | NotFoundError | ResourceExhaustedError):
            outcome = "unknown_tool" if isinstance(err, NotFoundError) else "error"
            return error_result(without_internals(message)), outcome
        _log.warning("tool call failed", tool=name, error=message)
        return error_result(
            f"'{name}' could not be run: the pool failed ({without_internals(message)})"
        ), "error"
