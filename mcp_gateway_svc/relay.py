"""What an MCP server asks during a call, put to the host that made the call.

A ``tools/call`` of a host that declared sampling, elicitation or roots runs on the pool's
``CallToolRelay`` stream (:class:`~toolscout.client.CallRelay`): each ``sampling/createMessage``,
``elicitation/create`` (form and URL mode) and ``roots/list`` the MCP server sends during the
call is sent to the host on that request's own stream (``related_request_id``), and the host's
answer (or JSON-RPC error) goes back to the server; the server's log messages during the call
(``notifications/message``) and its progress (when the host asked with a ``progressToken``)
reach the host on the same stream. A host that asked for log messages (a handshake-era session
that called ``logging/setLevel``; a 2026-07-28 request whose ``_meta`` carries
``io.modelcontextprotocol/logLevel``) takes the same stream for them, declaring nothing, and gets
the messages at or above its level only (:func:`asked_log_level`; the level goes on to the server
with the call, as 2026-07-28 wants). A host that declared none of the three and asked for no log
messages, or that has no channel for requests (a stateless 2026-07-28 request), calls through
the unary ``CallTool`` (or ``CallToolWithProgress``) and pays for no relay stream. The pool
answers the server itself for what the host did not declare (:mod:`mcp_pool_svc.relay`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, get_args

import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, TypeAdapter, ValidationError
from toolscout.client import CallProgress, CallRelay, RelayAnswer, RelayedLog, RelayedRequest

from mcp_gateway_svc.input_rounds import HostRound
from toolscout_kit.logging import get_logger

__all__ = ["asked_log_level", "declared_capabilities", "declared_of", "host_relay", "host_round"]

_log = get_logger(__name__)

_RELAYED = ("sampling", "elicitation", "roots")
_ELICIT_PARAMS: TypeAdapter[types.ElicitRequestParams] = TypeAdapter(types.ElicitRequestParams)
# Least to most severe (the spec's order).
_LEVEL_ORDER: tuple[str, ...] = get_args(types.LoggingLevel)
_LEVELS = frozenset(_LEVEL_ORDER)


def declared_of(caps: types.ClientCapabilities | None) -> dict[str, Any]:
    """What of sampling, elicitation and roots ``caps`` declare (MCP wire form; empty: none)."""
    if caps is None or (caps.sampling is None and caps.elicitation is None and caps.roots is None):
        return {}
    dumped = caps.model_dump(by_alias=True, mode="json", exclude_none=True)
    return {key: dumped[key] for key in _RELAYED if key in dumped}


def _declared(ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
    """What of sampling, elicitation and roots the host declared (MCP wire form)."""
    return declared_of(ctx.session.client_capabilities)


def declared_capabilities(ctx: ServerRequestContext[Any, Any]) -> str:
    """The sampling, elicitation and roots capabilities the host declared, as JSON object text."""
    return json.dumps(_declared(ctx), separators=(",", ":"))


def host_round(
    ctx: ServerRequestContext[Any, Any], params: types.InputResponseRequestParams
) -> HostRound | None:
    """A 2026-07-28 host's part in an ``input_required`` round of its ``tools/call``,
    ``resources/read`` or ``prompts/get`` (:mod:`mcp_gateway_svc.input_rounds`): its answers, the
    state it got and the capabilities it declared; None for a handshake-era host (rounds are not
    of its revision)."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return None
    return HostRound(params.input_responses, params.request_state, declared_capabilities(ctx))


def asked_log_level(
    ctx: ServerRequestContext[Any, Any], meta: Mapping[str, Any] | None, session_level: str
) -> str:
    """The least severe log level the host of a request wants the server's messages at, or "" for
    none: a 2026-07-28 request's ``_meta`` ``io.modelcontextprotocol/logLevel``, a handshake-era
    session's ``logging/setLevel`` (``session_level``)."""
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        level = (meta or {}).get(types.LOG_LEVEL_META_KEY)
        return level if isinstance(level, str) and level in _LEVELS else ""
    return session_level if session_level in _LEVELS else ""


def host_relay(
    ctx: ServerRequestContext[Any, Any], *, progress: bool, log_level: str = ""
) -> CallRelay | None:
    """The relay of a host's call, or None when it has nothing to relay to (then the call does
    not pay for the stream). ``progress``: the host asked for progress (a ``progressToken``);
    ``log_level``: the host asked for log messages at or above it (:func:`asked_log_level`)."""
    if ctx.request_id is None:
        return None
    # 2026-07-28 servers ask through input_required results (mcp_gateway_svc.input_rounds): such
    # a host's call relays log messages only.
    declared = {} if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS else _declared(ctx)
    if not declared or not ctx.session.can_send_request:
        if not log_level:
            return None
        # Log messages only: nothing declared, and no session of the host's era of its own.
        return _Relay(ctx, progress, log_level).relay("{}", host_era=False)
    return _Relay(ctx, progress, log_level).relay(json.dumps(declared, separators=(",", ":")))


class _Relay:
    """The host side of one relayed call: the SDK request context it answers on."""

    def __init__(self, ctx: ServerRequestContext[Any, Any], progress: bool, log_level: str) -> None:
        self._ctx = ctx
        self._progress = progress
        # The least severe level relayed (0: every one, when the host set none).
        self._least = _LEVEL_ORDER.index(log_level) if log_level else 0

    def relay(self, capabilities_json: str, *, host_era: bool = True) -> CallRelay:
        return CallRelay(
            host_capabilities_json=capabilities_json,
            on_request=self.request,
            on_log=self.log,
            on_progress=self.progress if self._progress else None,
            host_protocol_version=self._ctx.protocol_version if host_era else "",
        )

    async def request(self, relayed: RelayedRequest) -> RelayAnswer:
        """Puts the server's request to the host on the call's own stream; the host's answer."""
        try:
            request, result_type = _typed(relayed.method, relayed.params)
        except ValidationError:
            return RelayAnswer.error(relayed.id, types.INVALID_PARAMS, f"invalid {relayed.method} params")
        if request is None or result_type is None:
            return RelayAnswer.error(relayed.id, types.METHOD_NOT_FOUND, f"{relayed.method} is not relayed")
        try:
            result = await self._ctx.session.send_request(
                request, result_type, metadata=ServerMessageMetadata(related_request_id=self._ctx.request_id)
            )
        except MCPError as err:
            return RelayAnswer.error(relayed.id, err.code, err.message)
        except ValidationError:
            return RelayAnswer.error(
                relayed.id, types.INTERNAL_ERROR, "the host's answer was not a valid result"
            )
        return RelayAnswer.of(relayed.id, result.model_dump(by_alias=True, mode="json", exclude_none=True))

    async def log(self, message: RelayedLog) -> None:
        if message.level not in _LEVELS or _LEVEL_ORDER.index(message.level) < self._least:
            return
        try:
            data = json.loads(message.data_json)
        except ValueError:
            data = message.data_json
        params = types.LoggingMessageNotificationParams(
            level=message.level,  # type: ignore[arg-type]  # checked against LoggingLevel above
            logger=message.logger or None,
            data=data,
        )
        await self._ctx.session.send_notification(
            types.LoggingMessageNotification(params=params), related_request_id=self._ctx.request_id
        )

    async def progress(self, progress: CallProgress) -> None:
        await self._ctx.session.report_progress(progress.progress, progress.total, progress.message or None)


def _typed(
    method: str, params: Mapping[str, Any]
) -> tuple[types.ServerRequest | None, type[BaseModel] | None]:
    """The SDK request for a relayed one, and the result type the host answers with.

    Raises:
        ValidationError: the params do not fit the method.
    """
    if method == "sampling/createMessage":
        typed = types.CreateMessageRequestParams.model_validate(params, by_name=False)
        result: type[BaseModel] = (
            types.CreateMessageResultWithTools if typed.tools else types.CreateMessageResult
        )
        return types.CreateMessageRequest(params=typed), result
    if method == "elicitation/create":
        return types.ElicitRequest(
            params=_ELICIT_PARAMS.validate_python(params, by_name=False)
        ), types.ElicitResult
    if method == "roots/list":
        return types.ListRootsRequest(), types.ListRootsResult
    return None, None
