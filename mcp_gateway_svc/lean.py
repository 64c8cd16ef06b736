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
(:func:`mcp_types.methods.validate_client_request`; plain parameters are judged by :func:`accepted`,
with the same verdict). The call runs through the request handlers'
code (:meth:`mcp_gateway_svc.handlers.McpHandlers.lean_target`), its result is shaped as the
SDK's runner shapes it (:func:`mcp_types.methods.serialize_server_result`, the 2026-07-28
``resultType`` and ``serverInfo`` stamps) and written as one JSON body, as the transports write
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
import weakref
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
import pydantic_core
from mcp.server.lowlevel.server import Server
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
from mcp_types import CORE_RESULT_TYPES, SERVER_INFO_META_KEY, JSONRPCError
from mcp_types import methods as spec_methods
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ValidationError
from starlette.datastructures import Headers
from starlette.types import Send
from toolscout.client import CallToolResult

from mcp_gateway_svc.calls import mcp_result
from mcp_gateway_svc.relay import declared_of
from mcp_gateway_svc.sessions import Session

__all__ = [
    "PING_SECONDS",
    "LeanCall",
    "accepted",
    "answer_session",
    "holding",
    "live_transport",
    "pool_result_wire",
    "read_modern",
    "read_session",
    "wire_result",
    "write_json",
]

_METHOD = "tools/call"
# The parameters a plain call carries; a task, an input_required round's answers or state go the
# SDK's way.
_PLAIN_PARAMS = frozenset({"name", "arguments", "_meta"})


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


# What a tools/call's parameters may declare that the surface models check further: 2026-07-28
# client capabilities and client info members (others are ignored; by alias only).
_CHECKED_CAPABILITIES = frozenset({"elicitation", "experimental", "extensions", "roots", "sampling"})
_INFO_TEXTS = ("description", "title", "websiteUrl")
_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"


def accepted(version: str, params: Mapping[str, Any]) -> bool:
    """Whether the SDK accepts ``params`` of a ``tools/call`` at ``version``
    (:func:`mcp_types.methods.validate_client_request`'s verdict): plain parameters are judged
    here (a dozen type checks where the models' validation took 6-9 µs), anything else by the
    SDK. The tests compare both verdicts on many inputs."""
    if _surely_valid(version, params):
        return True
    try:
        spec_methods.validate_client_request(_METHOD, version, params)
    except (ValidationError, KeyError):
        return False
    return True


def _surely_valid(version: str, params: Mapping[str, Any]) -> bool:
    """True for parameters the surface model of ``version`` surely accepts: a string ``name``,
    ``arguments`` an object or null, and a ``_meta`` as the era wants it without the members
    whose values it checks further (2026-07-28: no declared capability, a plain client info).
    False: not sure (the SDK judges)."""
    if (
        not params.keys() <= _PLAIN_PARAMS
        or type(params.get("name")) is not str
        or type(params.get("arguments", {})) not in (dict, type(None))
    ):
        return False
    meta = params.get("_meta")
    if version in HANDSHAKE_PROTOCOL_VERSIONS:
        return meta is None or (type(meta) is dict and "progressToken" not in meta)
    if version not in MODERN_PROTOCOL_VERSIONS or type(meta) is not dict:
        return False
    capabilities = meta.get(_CLIENT_CAPABILITIES)
    info = meta.get(_CLIENT_INFO)
    return (
        type(meta.get(_PROTOCOL_VERSION)) is str
        and type(capabilities) is dict
        and capabilities.keys().isdisjoint(_CHECKED_CAPABILITIES)
        and "progressToken" not in meta
        and types.LOG_LEVEL_META_KEY not in meta
        and (info is None or _plain_info(info))
    )


def _plain_info(info: Any) -> bool:
    """A client info the 2026-07-28 ``Implementation`` surely accepts (no icons to check)."""
    return (
        type(info) is dict
        and type(info.get("name")) is str
        and type(info.get("version")) is str
        and info.get("icons") is None
        and all(type(info.get(key)) in (str, type(None)) for key in _INFO_TEXTS)
    )


def _plain(
    message: Mapping[str, Any], version: str
) -> tuple[str, dict[str, Any], dict[str, Any] | None] | None:
    """Name, arguments and ``_meta`` of a plain ``tools/call`` the SDK would accept at ``version``
    that asks for nothing relayed; None otherwise."""
    request_id = message.get("id")
    params = message.get("params")
    if (
        message.get("method") != _METHOD
        or not isinstance(request_id, str | int)
        or isinstance(request_id, bool)
        or not isinstance(params, dict)
        or not params.keys() <= _PLAIN_PARAMS
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


def wire_result(server: Server[Any], version: str, result: BaseModel) -> dict[str, Any]:
    """A handler's ``tools/call`` result in its wire form, as the SDK's runner shapes it (the
    per-version sieve, then the 2026-07-28 ``resultType`` and ``serverInfo`` stamps)."""
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    modern = version in MODERN_PROTOCOL_VERSIONS
    result_type = dumped.get("resultType")
    if not modern or not isinstance(result_type, str) or result_type in CORE_RESULT_TYPES:
        dumped = spec_methods.serialize_server_result(_METHOD, version, dumped)
    if not modern:
        return dumped
    if dumped.get("resultType") is None:
        dumped["resultType"] = "complete"
    meta = dumped.get("_meta")
    if meta is None:
        dumped["_meta"] = {SERVER_INFO_META_KEY: server.server_info_stamp}
    elif isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None:
        dumped["_meta"] = {**meta, SERVER_INFO_META_KEY: server.server_info_stamp}
    return dumped


def pool_result_wire(server: Server[Any], version: str, result: CallToolResult | BaseModel) -> dict[str, Any]:
    """A lean call's result in its wire form: what :func:`wire_result` gives for its MCP form
    (:func:`~mcp_gateway_svc.calls.mcp_result` of a pool's result), written directly for a plain
    result of the MCP server (:func:`_plain_wire`). The dict is serialized at once and not kept."""
    if isinstance(result, CallToolResult):
        wire = _plain_wire(server, version in MODERN_PROTOCOL_VERSIONS, result)
        if wire is not None:
            return wire
        result = mcp_result(result)
    return wire_result(server, version, result)


class _Unsure(ValueError):
    """A value the SDK's dump writes otherwise than JSON reads it (a non-finite number)."""


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400: the dump writes null
        raise _Unsure(text)
    return value


def _constant(text: str) -> Any:
    raise _Unsure(text)  # NaN, Infinity: the dump writes null


# JSON as json.loads reads it, refusing what the SDK's dump would write otherwise (one decoder:
# json.loads with hooks builds one per call).
_DECODER = json.JSONDecoder(parse_float=_finite, parse_constant=_constant)


def _object(text: str) -> dict[str, Any] | None:
    """The JSON object in ``text`` as :func:`~toolscout.client.types.parse_json_object` reads it;
    None when that is not an object, or holds a value the SDK's dump would change."""
    try:
        value = _DECODER.decode(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


# A plain text block of the pool (the MCP server's block had nothing but its text).
_PLAIN_TEXT = ("", '{"type":"text"}')
# The ``_meta`` member the 2026-07-28 result declares, by its name (by its alias: below).
_DECLARED_BY_NAME = "io_modelcontextprotocol_server_info"
_STAMPS: weakref.WeakKeyDictionary[Server[Any], dict[str, Any]] = weakref.WeakKeyDictionary()


def _plain_wire(server: Server[Any], modern: bool, result: CallToolResult) -> dict[str, Any] | None:
    """The wire form of a plain pool result (text blocks only, no kept-result link, ``_meta`` and
    ``structuredContent`` JSON objects of values JSON keeps as they are), None for any other.

    For such a result the SDK's sieve (the surface models' validate and dump) keeps every member
    as it is, in its model's field order: ``_meta``, ``content`` (``text``, ``type``), ``isError``,
    ``resultType`` (2026-07-28), ``structuredContent``; then the ``serverInfo`` stamp. The tests
    compare this with :func:`wire_result` of :func:`~mcp_gateway_svc.calls.mcp_result` on many
    results, both eras."""
    if result.result_handle:
        return None
    content = []
    for block in result.content:
        if block.type != "text" or block.raw_json not in _PLAIN_TEXT:
            return None
        content.append({"text": block.text, "type": "text"})
    meta = None
    if result.meta_json:
        # (a 2026-07-28 ``_meta`` is a model whose dump drops null members)
        meta = None if modern and "null" in result.meta_json else _object(result.meta_json)
        if meta is None or (modern and _DECLARED_BY_NAME in meta):
            return None
        if modern and SERVER_INFO_META_KEY in meta:
            # The MCP server's own stamp (it wins): the declared member, first in the dump.
            meta = {SERVER_INFO_META_KEY: meta[SERVER_INFO_META_KEY]} | meta
    structured = None
    if result.structured_content_json:
        structured = _object(result.structured_content_json)
        if structured is None:
            return None
    wire: dict[str, Any] = {} if meta is None else {"_meta": meta}
    wire["content"] = content
    wire["isError"] = result.is_error
    if modern:
        wire["resultType"] = "complete"
    if structured is not None:
        wire["structuredContent"] = structured
    if modern and (meta is None or SERVER_INFO_META_KEY not in meta):
        stamp = _STAMPS.get(server)
        if stamp is None:
            stamp = _STAMPS[server] = server.server_info_stamp
        # (shared, not copied: the answer is serialized at once and never changed)
        wire["_meta"] = (
            {SERVER_INFO_META_KEY: stamp} if meta is None else {**meta, SERVER_INFO_META_KEY: stamp}
        )
    return wire


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
    await asyncio.wait({call}, timeout=ping_seconds)
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
        await asyncio.wait({call}, timeout=ping_seconds)
        if not call.done():
            await send({"type": "http.response.body", "body": b": ping\r\n\r\n", "more_body": True})
    outcome = None if call.cancelled() else call.result()
    event = b"event: message\r\ndata: " + _session_message(request_id, outcome) + b"\r\n\r\n"
    await send({"type": "http.response.body", "body": event})


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
