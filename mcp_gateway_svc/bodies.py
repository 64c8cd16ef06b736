"""A POST's body, read and checked before the MCP SDK sees it.

The gateway reads each body itself, once, under two limits: ``gateway.max_body_bytes`` (413) and
``gateway.request_read_timeout`` (a client that sends half a body is answered 408 and dropped
with one log line; one that goes away mid-body is one log line too, never a traceback). Then the
text is held to the same bounded JSON rules as every JSON text of the gRPC API
(:mod:`toolscout_kit.json_text`: valid UTF-8, no lone surrogate escape, at most
``MAX_JSON_DEPTH`` levels) and to the JSON-RPC envelope, so that a problem is answered with one
sentence and the specification's code before anything is sent on:

* not JSON (or not UTF-8): -32700;
* a batch, a missing or wrong ``jsonrpc``, a request without a string ``method``, an ``id`` that
  is neither a string nor an integer: -32600;
* well-formed JSON the gateway refuses (a lone surrogate, too deep) or ``params`` that is not an
  object: -32602, with the reason.

The SDK's own checks stay behind this one (the envelope ``_meta`` of 2026-07-28, the parameters
of each method); what it would answer with a validation dump or a traceback never reaches it. The
``MCP-Protocol-Version`` header is checked here too: the SDK routes an unknown value to its
2026-07-28 path, which then complains about a missing ``_meta`` envelope instead of the header.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from mcp_types import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from starlette.types import Message, Receive

from toolscout_kit.json_text import JsonSyntaxError, JsonTextError, parse_json

__all__ = [
    "KNOWN_VERSIONS",
    "ClientGoneError",
    "Refusal",
    "check_message",
    "check_protocol_version",
    "read_body",
    "replaying",
]

KNOWN_VERSIONS = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)


@dataclass(frozen=True, slots=True)
class Refusal:
    """An HTTP status and a JSON-RPC error to answer instead of serving the request."""

    status: int
    code: int
    message: str
    reason: str  # the rejection metric's label
    request_id: str | int | None = None


class ClientGoneError(Exception):
    """The client disconnected before its body arrived."""


async def read_body(receive: Receive, *, limit: int, seconds: float, declared: int | None) -> bytes | Refusal:
    """The whole body, or why not (too large: 413; not within ``seconds``: 408).

    Raises:
        ClientGoneError: the client went away first.
    """
    if declared is not None and declared > limit:
        return Refusal(413, INVALID_REQUEST, f"the request body is over {limit} bytes", "too_large")
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(seconds):
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise ClientGoneError
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > limit:
                    return Refusal(
                        413, INVALID_REQUEST, f"the request body is over {limit} bytes", "too_large"
                    )
                chunks.append(chunk)
                if not message.get("more_body", False):
                    return b"".join(chunks)
    except TimeoutError:
        return Refusal(
            408, INVALID_REQUEST, f"the request body did not arrive within {seconds:g} s", "body_timeout"
        )


def replaying(body: bytes, receive: Receive) -> Receive:
    """``receive`` that hands out ``body`` first (already read), then waits as the original does."""
    sent = False

    async def again() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again


def check_protocol_version(header: str | None) -> Refusal | None:
    """A refusal for an ``MCP-Protocol-Version`` header this server does not speak."""
    if header is None or header in KNOWN_VERSIONS:
        return None
    shown = (
        header
        if len(header) <= 40 and header.isprintable()
        else header[:40].encode("unicode_escape").decode()
    )
    return Refusal(
        400,
        INVALID_REQUEST,
        f"unsupported MCP-Protocol-Version '{shown}': this server speaks {', '.join(KNOWN_VERSIONS)}",
        "bad_protocol_version",
    )


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def check_message(body: bytes) -> Refusal | dict[str, Any]:
    """The one JSON-RPC message in ``body``, or why the gateway may not pass it on."""
    try:
        message = parse_json(body.decode("utf-8"), "the request body")
    except UnicodeDecodeError as err:
        return Refusal(400, PARSE_ERROR, f"Parse error: the body is not UTF-8 (byte {err.start})", "bad_json")
    except JsonSyntaxError as err:
        return Refusal(400, PARSE_ERROR, f"Parse error: {err.message}", "bad_json")
    except JsonTextError as err:
        return Refusal(400, INVALID_PARAMS, err.message, "bad_json")
    problem = _envelope_problem(message)
    if problem is None:
        return dict(message)
    request_id = message.get("id") if isinstance(message, dict) else None
    return Refusal(400, *problem, "bad_jsonrpc", request_id if _valid_id(request_id) else None)


def _envelope_problem(message: Any) -> tuple[int, str] | None:
    problem: tuple[int, str] | None = None
    if isinstance(message, list):
        problem = INVALID_REQUEST, "a batch (a JSON array) is not accepted: send one message per request"
    elif not isinstance(message, dict):
        problem = INVALID_REQUEST, "the body must be one JSON-RPC message (an object)"
    elif message.get("jsonrpc") != "2.0":
        problem = INVALID_REQUEST, 'a JSON-RPC message needs "jsonrpc": "2.0"'
    elif "id" in message and not _valid_id(message["id"]):
        problem = INVALID_REQUEST, 'the "id" must be a string or an integer'
    elif "method" not in message:
        if not ("id" in message and ("result" in message or "error" in message)):
            # (otherwise the client's answer to a request of the server)
            problem = INVALID_REQUEST, 'a JSON-RPC request needs a "method" (a string)'
    elif not isinstance(message["method"], str):
        problem = INVALID_REQUEST, 'the "method" must be a string'
    elif "params" in message and not isinstance(message["params"], dict):
        problem = INVALID_PARAMS, 'the "params" must be an object'
    return problem
