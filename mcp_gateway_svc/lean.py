"""The lean path of a plain ``tools/call``: read once, called once, answered directly.

Most calls through the gateway relay nothing: the host asked for no progress and no log messages
and declared none of sampling, elicitation and roots (the decision of
:func:`mcp_gateway_svc.relay.host_relay`), so the call is one unary ``CallTool`` to the pool and
one JSON-RPC answer. The SDK's streamable-HTTP transport serves such a request with machinery
built for the general case, which the SDK offers no way to skip per request: on a session, a
memory-stream hop into the session's server task, its dispatcher and runner, and a per-request SSE
response with a task group and a writer; on the 2026-07-28 path a Starlette request and response,
the body parsed and validated again, a connection and a runner per request. That was about a
third of the gateway's CPU per call (bench/README, "the lean path").

Here the body the front read and checked once is held to the SDK's own rules, by the SDK's own
functions: the transport's Content-Type and Accept rules, the 2026-07-28 envelope and routing
headers (:func:`~mcp.shared.inbound.classify_inbound_request`,
:func:`~mcp.shared.inbound.find_duplicated_routing_header`), the method's parameters
(:func:`mcp_types.methods.validate_client_request`'s verdict, plain parameters judged in one
pass: :mod:`mcp_gateway_svc.lean_rules`). The call runs through the request handlers'
code (:meth:`mcp_gateway_svc.handlers.McpHandlers.lean_target`), its result is shaped as the
SDK's runner shapes it (:func:`mcp_types.methods.serialize_server_result`, the 2026-07-28
``resultType`` and ``serverInfo`` stamps; a pool's plain result written in that form directly,
:func:`~mcp_gateway_svc.lean_rules.pool_result_wire`) and written as one JSON body, as the transports write
one (:func:`write_json`; on a session too, which the SDK answers on an SSE stream, unless the call
runs long: see :func:`answer_session`). Anything else is the SDK's to serve, unchanged: other methods, a request
the SDK would refuse (it answers with its own error), a call that relays anything, progress or log
messages, a search, a kept result, an unknown tool, tracing on.

What the session transport keeps for a request is kept here: the session's idle countdown is
held while the call runs (:func:`holding`), and ``notifications/cancelled`` naming the call
cancels it (:meth:`mcp_gateway_svc.sessions.Session.cancel_lean`).
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
import pydantic_core
from mcp.server.runner import modern_error_data
from mcp.server.streamable_http import REQUEST_CANCELLED
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    InboundLadderRejection,
    classify_inbound_request,
    find_duplicated_routing_header,
)
from mcp_types import JSONRPCError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.datastructures import Headers
from starlette.types import Send

from mcp_gateway_svc.lean_rules import METHOD, PLAIN_PARAMS, accepted
from mcp_gateway_svc.relay import declared_of
from mcp_gateway_svc.sessions import Session

__all__ = [
    "PING_SECONDS",
    "LeanCall",
    "answer_session",
    "holding",
    "live_transport",
    "read_modern",
    "read_session",
    "write_json",
]


@dataclass(frozen=True, slots=True)
class LeanCall:
    """A ``tools/call`` request that may take the lean path, as the SDK would hand it to the handler."""

    request_id: str | int
    name: str
    arguments: dict[str, Any]
    # The request's ``_meta`` (None: none), as the handler's typed parameters carry it.
    meta: dict[str, Any] | None
    protocol_version: str
    # The host's name (result budgets), "" when it gave none.
    client_name: str
    # A 2026-07-28 request: what it declared of sampling, elicitation and roots (JSON object
    # text); None for a session's request.
    declared_json: str | None
    # scheme://host as the client reached the gateway (login links).
    base_url: str

    @property
    def modern(self) -> bool:
        return self.declared_json is not None


def _accepts(headers: Headers) -> tuple[bool, bool]:
    """(JSON, SSE) accepted, by the transport's rule (``check_accept_headers``, wildcards included)."""
    kinds = [part.strip().split(";")[0].strip().lower() for part in headers.get("accept", "").split(",")]
    anything = "*/*" in kinds
    return (
        anything or "application/json" in kinds or "application/*" in kinds,
        anything or "text/event-stream" in kinds or "text/*" in kinds,
    )


def _json_body(headers: Headers) -> bool:
    """The Content-Type both transports want of a POST (the session transport's stricter rule)."""
    content_type = headers.get("content-type", "")
    return content_type.lower().startswith("application/json") and any(
        part.strip() == "application/json" for part in content_type.split(";")[0].split(",")
    )


def _plain(
    message: Mapping[str, Any], version: str
) -> tuple[str, dict[str, Any], dict[str, Any] | None] | None:
    """Name, arguments and ``_meta`` of a plain ``tools/call`` the SDK would accept at ``version``
    that asks for nothing relayed; None otherwise."""
    request_id = message.get("id")
    params = message.get("params")
    if (
        message.get("method") != METHOD
        or not isinstance(request_id, str | int)
        or isinstance(request_id, bool)
        or not isinstance(params, dict)
        or not params.keys() <= PLAIN_PARAMS
    ):
        return None
    if not accepted(version, params):
        return None
    meta = params.get("_meta")
    if meta and ("progressToken" in meta or "progress_token" in meta or types.LOG_LEVEL_META_KEY in meta):
        return None  # progress or log messages to relay
    arguments = params.get("arguments")
    return params["name"], dict(arguments) if arguments else {}, dict(meta) if meta else None


def read_modern(message: Mapping[str, Any], headers: Headers, *, base_url: str) -> LeanCall | None:
    """A 2026-07-28 ``tools/call`` for the lean path of a transport that answers in JSON, or None."""
    if not _json_body(headers) or not _accepts(headers)[0]:
        return None
    if find_duplicated_routing_header(headers.items()) is not None:
        return None
    verdict = classify_inbound_request(message, headers=dict(headers))
    if isinstance(verdict, InboundLadderRejection):
        return None
    plain = _plain(message, verdict.protocol_version)
    if plain is None:
        return None
    info = verdict.client_info
    name = info.get("name") if isinstance(info, dict) else None
    caps = verdict.client_capabilities
    try:
        declared = declared_of(
            types.ClientCapabilities.model_validate(caps, by_name=False)
            if isinstance(caps, dict) and caps
            else None
        )
    except ValidationError:
        return None
    return LeanCall(
        message["id"],
        plain[0],
        plain[1],
        plain[2],
        verdict.protocol_version,
        name if isinstance(name, str) else "",
        json.dumps(declared, separators=(",", ":")),
        base_url,
    )


def read_session(
    message: Mapping[str, Any], headers: Headers, session: Session, *, sse: bool, base_url: str
) -> LeanCall | None:
    """A handshake-era session's ``tools/call`` for the lean path, or None (the session not
    initialized yet, or its host declared something a server may ask for, or set a log level)."""
    version_header = headers.get("mcp-protocol-version")
    has_json, has_sse = _accepts(headers)
    peer = session.outbound
    params = getattr(peer, "client_params", None)
    if (
        (version_header is not None and version_header not in HANDSHAKE_PROTOCOL_VERSIONS)
        or not _json_body(headers)
        or not has_json
        or (sse and not has_sse)
        or params is None
        or session.log_level
        or declared_of(peer.client_capabilities)
    ):
        return None
    version = peer.protocol_version
    plain = _plain(message, version)
    if plain is None:
        return None
    return LeanCall(
        message["id"], plain[0], plain[1], plain[2], version, params.client_info.name, None, base_url
    )


def live_transport(manager: StreamableHTTPSessionManager, sid: str) -> Any | None:
    """The SDK transport of session ``sid`` while it serves requests, else None (the SDK answers).

    The manager has no public lookup of a session's transport (see also
    :func:`mcp_gateway_svc.sessions.end_session`)."""
    transport = manager._server_instances.get(sid)
    if transport is None or transport.is_terminated:
        return None
    idle = transport.idle_scope
    return None if idle is not None and idle.cancel_called else transport


@contextmanager
def holding(transport: Any) -> Iterator[None]:
    """Holds the session's idle countdown while a lean call runs, as the transport does for each
    request it serves (its ``handle_request``: no public way to count a request in flight)."""
    idle = transport.idle_scope
    seconds = transport._idle_timeout
    if idle is None or seconds is None:
        yield
        return
    transport._requests_in_flight += 1
    idle.deadline = math.inf
    try:
        yield
    finally:
        transport._requests_in_flight -= 1
        if not transport._requests_in_flight:
            idle.deadline = anyio.current_time() + seconds


# Seconds a session's answer waits for the call before it becomes an SSE stream kept alive with a
# comment line this often (the SDK's stream pings as often; a JSON answer has none to send).
PING_SECONDS = 15.0
_SSE_HEADERS = (
    (b"cache-control", b"no-cache, no-transform"),
    (b"connection", b"keep-alive"),
    (b"content-type", b"text/event-stream"),
    (b"x-accel-buffering", b"no"),
)


async def write_json(send: Send, request_id: str | int, outcome: dict[str, Any] | Exception) -> None:
    """A 2026-07-28 answer: one JSON body, the status by the error code's table (as the SDK's)."""
    status = 200
    if isinstance(outcome, Exception):
        error = modern_error_data(outcome)
        status = ERROR_CODE_HTTP_STATUS.get(error.code, 200)
        wire = JSONRPCError(jsonrpc="2.0", id=request_id, error=error).model_dump(
            mode="json", by_alias=True, exclude_none=True
        )
    else:
        # What JSONRPCResponse(...).model_dump(exclude_none=True) gives for a result already in
        # its wire form (a result's contents are never pruned), without building the model.
        wire = {"jsonrpc": "2.0", "id": request_id, "result": outcome}
    data = json.dumps(wire, separators=(",", ":")).encode()
    headers = [(b"content-length", str(len(data)).encode()), (b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


async def answer_session(
    send: Send,
    request_id: str | int,
    call: asyncio.Task[dict[str, Any] | Exception | None],
    *,
    session_id: str,
    ping_seconds: float = PING_SECONDS,
) -> None:
    """A session's answer to a lean call (``call``: its wire result or exception; cancelled by
    ``notifications/cancelled``).

    One JSON body (status 200, the session's id) when the call ends within ``ping_seconds``: the
    client accepted JSON (the transport requires it), a lean call has nothing to send before its
    result, and the ``mcp`` SDK's client opens a new connection after every SSE answer, where it
    keeps the connection after a JSON one (the spec lets the server pick). A longer call is
    answered as the session transport answers, on an SSE stream with a comment line every
    ``ping_seconds`` (a client's read timeout or a proxy's idle timeout sees bytes), then its
    event; so is a cancelled one (``REQUEST_CANCELLED``: its client stopped reading, and drops an
    event from a stream but fails its closed session on a JSON body).
    """
    await _settled(call, ping_seconds)
    outcome = None if not call.done() or call.cancelled() else call.result()
    headers = [(b"mcp-session-id", session_id.encode("latin-1"))]
    if outcome is not None:
        data = _session_message(request_id, outcome)
        start = [(b"content-length", str(len(data)).encode()), (b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": start + headers})
        await send({"type": "http.response.body", "body": data})
        return
    await send({"type": "http.response.start", "status": 200, "headers": [*_SSE_HEADERS, *headers]})
    while not call.done():
        await _settled(call, ping_seconds)
        if not call.done():
            await send({"type": "http.response.body", "body": b": ping\r\n\r\n", "more_body": True})
    outcome = None if call.cancelled() else call.result()
    event = b"event: message\r\ndata: " + _session_message(request_id, outcome) + b"\r\n\r\n"
    await send({"type": "http.response.body", "body": event})


async def _settled(call: asyncio.Future[Any], seconds: float) -> None:
    """Returns once ``call`` is done or ``seconds`` have passed (``asyncio.wait`` of one future
    with a timeout, without its sets and helper futures: a session's every lean call waits so)."""
    if call.done():
        return
    loop = asyncio.get_running_loop()
    waiter = loop.create_future()

    def wake(_: object = None) -> None:
        if not waiter.done():
            waiter.set_result(None)

    timer = loop.call_later(seconds, wake)
    call.add_done_callback(wake)
    try:
        await waiter
    finally:
        timer.cancel()
        call.remove_done_callback(wake)


def _session_message(request_id: str | int, outcome: dict[str, Any] | Exception | None) -> bytes:
    """A session's answer as the session transport serializes it (``model_dump_json``)."""
    if isinstance(outcome, dict):
        # JSONRPCResponse(...).model_dump_json() of a wire-form result: its serializer, no model.
        return pydantic_core.to_json({"jsonrpc": "2.0", "id": request_id, "result": outcome})
    refused = JSONRPCError(jsonrpc="2.0", id=request_id, error=_session_error(outcome))
    return refused.model_dump_json(by_alias=True, exclude_unset=True).encode()


def _session_error(outcome: Exception | None) -> types.ErrorData:
    """A session transport's error for a call that raised or was cancelled (None)."""
    if outcome is None:
        return types.ErrorData(code=REQUEST_CANCELLED, message="Request cancelled")
    if isinstance(outcome, MCPError):
        return outcome.error
    # As the session's dispatcher answers a handler that raised (without the exception's text).
    return types.ErrorData(code=0, message="Internal server error")
