"""The lean path of a plain ``tools/call``, and of the pool's ``tools/list``, to a 2026-07-28
streamable-HTTP server.

On the ``mcp`` SDK's own path a request crosses its dispatcher (a pending entry and a memory
stream per request), the transport's writer task, a task per POST under a cancel scope, a
validation of the whole JSON-RPC reply, and the connection's forwarder back to the dispatcher's
reader task: three task switches and two validations of the same reply per call. At 2026-07-28
a request's answer is the body of its own POST (no session, no handshake), so the dispatcher can
make the POST itself and read the answer directly: :class:`LeanPost`, which the connection's
dispatcher (:class:`~mcp_pool_svc.session._LenientDispatcher`) uses for a call that asks for
nothing else (:func:`lean_call`: no relay, no progress, no timeout of the SDK's own). The
session stamps the request and validates the result as before (result type, ``resultType``, the
tool's output schema), so results pass unchanged. The pool's listings take it too
(:meth:`~mcp_pool_svc.session.Connection.list_tools`): the SDK's transport validates each reply's
JSON-RPC envelope before the session validates the same tools again, and on the 1,000-server fleet
the pool held 354 MB that way against 240 MB on this path (bench/README, round 10).

The POST goes out on the server's HTTP/1.1 transport (:mod:`mcp_pool_svc.http11`) directly while
the shared client holds no cookies: the client's headers, the request's, and a plain JSON answer
read off the connection without ``httpx2``'s request and response objects; any other answer (SSE,
an error status, a redirect, a cookie, an encoded body) becomes the response the client's
transport would have given, read as the next paragraph says.

Otherwise the POST goes out on the server's shared ``httpx2`` client, as the SDK's transport
does (its redirect rule, headers and the not-sent marking of :class:`~mcp_pool_svc.session._NotSentTransport`
apply alike), and its answer is read as the SDK reads it: a JSON body, or an SSE stream whose
other messages (log messages, progress, a request of the server) are handed to the dispatcher
as if the transport had read them, in the calling task's context (so they find their call), and
which is resumed with ``Last-Event-ID`` when it ends early. HTTP statuses mean what they mean to
the SDK (202 and a redirect it does not follow: invalid request; a JSON-RPC error body at 4xx/5xx
is that error; 404 method not found; other errors internal). A transport failure after sending
ends the connection, as it ends the SDK's transport (the supervisor reconnects; the call is
"sent, then lost"). Cancelling the call closes its POST, which is the 2026-07-28 HTTP
cancellation.

The ``ClientSession`` side of such a call is :mod:`mcp_pool_svc.plain_call`; a call the SDK
makes itself (``ClientSession.call_tool``) takes this path all the same.
"""

from __future__ import annotations

import contextvars
import itertools
import json
import logging
from collections.abc import Awaitable, Callable
from contextlib import nullcontext
from typing import Any

import anyio
import httpx2
import mcp_types
from mcp.client.streamable_http import (
    DEFAULT_MAX_SSE_EVENT_SIZE,
    DEFAULT_RECONNECTION_DELAY_MS,
    MAX_RECONNECTION_ATTEMPTS,
)
from mcp.shared._httpx_utils import redirect_location, sse_within_origin, stream_within_origin
from mcp.shared._otel import inject_trace_context, otel_span
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCError, JSONRPCResponse, jsonrpc_message_adapter
from opentelemetry.trace import ProxyTracerProvider, SpanKind, get_tracer_provider
from pydantic import ValidationError

from mcp_pool_svc.http11 import LeanHttpTransport
from mcp_pool_svc.lines import parse_message

__all__ = ["LEAN_IDS_FROM", "LeanPost", "lean_call"]

log = logging.getLogger(__name__)

# The JSON-RPC ids of lean requests start here: apart from the dispatcher's (from 0), for a
# server's logs' sake.
LEAN_IDS_FROM = 1 << 40
# Set by the pool for the duration of a call that may take the lean path.
_LEAN: contextvars.ContextVar[bool] = contextvars.ContextVar("toolscout_lean_call", default=False)
_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
# The requests that may take it (inside ``lean_call``).
_LEAN_METHODS = frozenset({"tools/call", "tools/list"})
# Options of a request that the lean path leaves to the SDK's own.
_SDK_OPTIONS = frozenset({"on_progress", "timeout", "resumption_token", "on_resumption_token", "request_id"})


class lean_call:  # a function to its callers: ``with lean_call():``
    """Lets the ``tools/call`` or ``tools/list`` sent in this context take the lean path where it
    applies (a class, not a generator: it is entered on every call)."""

    __slots__ = ("_token",)

    def __enter__(self) -> None:
        self._token = _LEAN.set(True)

    def __exit__(self, *exc: object) -> None:
        _LEAN.reset(self._token)


def _redirect_location(response: httpx2.Response) -> httpx2.URL | None:
    """Where a redirect the POST did not follow points (for the message: without userinfo,
    query or fragment, as the SDK says it), or None."""
    if response.next_request is not None:
        return redirect_location(response)
    if not response.has_redirect_location:
        return None
    target = response.request.url.join(response.headers["location"])
    return target.copy_with(userinfo=b"", query=None, fragment=None)


def _json_content(response: httpx2.Response) -> bool:
    return response.headers.get("content-type", "").lower().startswith("application/json")


class LeanPost:
    """Sends a connection's plain ``tools/call`` and ``tools/list`` requests as direct POSTs (see
    the module's doc)."""

    def __init__(
        self,
        client: httpx2.AsyncClient,
        url: str,
        deliver: Callable[[SessionMessage], Awaitable[None]],
        lost: Callable[[str], None],
        transport: httpx2.AsyncBaseTransport | None = None,
        direct: LeanHttpTransport | None = None,
        not_sent: Callable[[Exception], MCPError] | None = None,
    ) -> None:
        """``deliver``: hands a message of the server to the dispatcher (as read from the
        transport, in the calling task's context). ``lost``: ends the connection. ``transport``:
        the client's own transport, used directly (without the client's redirect and auth
        layers, which a shared client without auth or proxies does not need on the way out).
        ``direct``: the HTTP/1.1 transport under it, which sends a POST without ``httpx2``'s
        request and response objects while the client holds no cookies (a plain JSON answer is
        read straight off the connection; any other answer becomes the response ``transport``
        would have given); ``not_sent``: the error of a request whose POST could not connect,
        as ``transport`` would answer it."""
        self._client = client
        self._transport = transport
        self._direct = direct if not_sent is not None else None
        self._not_sent = not_sent
        self._target = httpx2.URL(url)  # parsed once: the client would parse the text per request
        self._url = url
        self._deliver = deliver
        self._lost = lost
        self._ids = itertools.count(LEAN_IDS_FROM)
        self._host = self._target.netloc
        self._timeouts = client.timeout.as_dict()

    def applies(self, method: str, opts: Any) -> bool:
        return method in _LEAN_METHODS and _LEAN.get() and not _SDK_OPTIONS.intersection(opts or ())

    async def request(self, method: str, params: Any, opts: Any) -> dict[str, Any]:
        """The result of one request (the dispatcher's ``send_raw_request``).

        Raises:
            MCPError: the server's JSON-RPC error, or the SDK's for an answer it cannot read;
                ``CONNECTION_CLOSED`` when the transport failed after sending.
        """
        request_id = next(self._ids)
        out = dict(params) if params is not None else {}
        meta = dict(out.get("_meta") or {})
        name = out.get("name")
        # The SDK's client span, as its dispatcher opens one, where a tracer provider is installed.
        traced = not isinstance(get_tracer_provider(), ProxyTracerProvider)
        with (
            otel_span(
                f"MCP send {method}{f' {name}' if isinstance(name, str) else ''}",
                kind=SpanKind.CLIENT,
                attributes={"mcp.method.name": method, "jsonrpc.request.id": str(request_id)},
            )
            if traced
            else nullcontext()
        ):
            inject_trace_context(meta)
            if meta:
                out["_meta"] = meta
            body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": out}
            headers = {**_HEADERS, **opts.get("headers", {})}
            try:
                if self._direct is not None and not self._client.cookies:
                    return await self._post_direct(body, headers)
                return await self._post(body, headers)
            except httpx2.TransportError as err:
                # Sent (a POST that could not connect is answered "not sent" by the transport):
                # the SDK's transport would end here, and the session with it.
                self._lost(f"HTTP transport failed: {type(err).__name__}")
                raise MCPError(mcp_types.CONNECTION_CLOSED, "Connection closed") from None

    def _head(self, headers: dict[str, str], length: int) -> list[tuple[bytes, bytes]]:
        """The request head the client would send: Host, its own headers unless the request's
        replace them (names compare without case), the request's, Content-Length."""
        given = {name.lower() for name in headers}
        head = [(b"host", self._host)]
        head += [(k, v) for k, v in self._client.headers.raw if k.decode("ascii").lower() not in given]
        head += [(k.encode("ascii"), v.encode("ascii")) for k, v in headers.items()]
        head.append((b"content-length", str(length).encode("ascii")))
        return head

    async def _post_direct(self, body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
        """:meth:`_post` on the HTTP/1.1 transport directly (see ``direct`` in the constructor)."""
        assert self._direct is not None
        assert self._not_sent is not None
        payload = json.dumps(body).encode()
        try:
            head, stream = await self._direct.exchange(
                b"POST", self._target, self._head(headers, len(payload)), [payload], self._timeouts
            )
        except (httpx2.ConnectError, httpx2.ConnectTimeout) as err:
            raise self._not_sent(err) from None
        status = head.status_code
        content_type = encoding = b""
        cookie = False
        for raw_name, value in head.headers:
            name = raw_name.lower()
            if name == b"content-type":
                content_type = value.lower()
            elif name == b"content-encoding":
                encoding = value.lower()
            elif name == b"set-cookie":
                cookie = True
        if (
            200 <= status < 300
            and status != 202
            and not cookie
            and encoding in (b"", b"identity")
            and content_type.startswith(b"application/json")
        ):
            try:
                return await self._answer(await stream.read_all(), "JSON response")
            except _NotAnAnswer:
                raise MCPError(
                    mcp_types.INTERNAL_ERROR, "the server's JSON answer to the request is not a response"
                ) from None
        # Anything else is read as the client's response is (SSE, errors, redirects, cookies).
        response = httpx2.Response(
            status,
            headers=head.headers,
            stream=stream,
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": head.reason},
        )
        response.request = self._client.build_request("POST", self._target, content=payload, headers=headers)
        return await self._respond(response, payload, headers)

    async def _post(self, body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
        payload = json.dumps(body).encode()
        if self._transport is not None:
            # The client's request (its headers, cookies and timeouts) on its transport directly;
            # a 307/308 (the server ran nothing) goes the client's way below, as the SDK's would.
            request = self._client.build_request("POST", self._target, content=payload, headers=headers)
            response = await self._transport.handle_async_request(request)
            response.request = request
            return await self._respond(response, payload, headers)
        async with stream_within_origin(
            self._client, "POST", self._url, content=payload, headers=headers
        ) as response:
            return await self._reply(response, headers)

    async def _respond(
        self, response: httpx2.Response, payload: bytes, headers: dict[str, str]
    ) -> dict[str, Any]:
        """The answer of a response of the transport (closed here); a 307/308 goes the client's way."""
        try:
            if response.status_code not in (307, 308):
                if "set-cookie" in response.headers:
                    self._client.cookies.extract_cookies(response)
                return await self._reply(response, headers)
        finally:
            await response.aclose()
        async with stream_within_origin(
            self._client, "POST", self._url, content=payload, headers=headers
        ) as redirected:
            return await self._reply(redirected, headers)

    async def _reply(self, response: httpx2.Response, headers: dict[str, str]) -> dict[str, Any]:
        """The answer to the POST: its JSON body, or the answer on its SSE stream."""
        status = response.status_code
        if status == 202:
            raise MCPError(mcp_types.INVALID_REQUEST, "server answered a request with 202 Accepted")
        location = _redirect_location(response)
        if location is not None:
            raise MCPError(
                mcp_types.INVALID_REQUEST,
                f"Redirect to {location} not followed; use that URL as the endpoint if it is the intended server",
            )
        if status >= 400:
            raise await self._error_status(response)
        content_type = response.headers.get("content-type", "").lower()
        if content_type.startswith("application/json"):
            try:
                return await self._answer(await response.aread(), "JSON response")
            except httpx2.StreamError as err:
                raise MCPError(mcp_types.PARSE_ERROR, f"Failed to parse JSON response: {err}") from None
            except _NotAnAnswer:
                raise MCPError(
                    mcp_types.INTERNAL_ERROR, "the server's JSON answer to the request is not a response"
                ) from None
        if content_type.startswith("text/event-stream"):
            return await self._events(response, headers)
        raise MCPError(mcp_types.INVALID_REQUEST, f"Unexpected content type: {content_type}")

    async def _error_status(self, response: httpx2.Response) -> MCPError:
        """The error a 4xx/5xx answer stands for (its JSON-RPC error body if it has one)."""
        if _json_content(response):
            try:
                parsed = jsonrpc_message_adapter.validate_json(await response.aread(), by_name=False)
                if isinstance(parsed, JSONRPCError):
                    return MCPError.from_error_data(parsed.error)
            except (httpx2.StreamError, ValidationError):
                pass
        if response.status_code == 404:
            return MCPError(mcp_types.METHOD_NOT_FOUND, "Not Found")
        return MCPError(mcp_types.INTERNAL_ERROR, "Server returned an error response")

    async def _answer(self, data: str | bytes, where: str) -> dict[str, Any]:
        """The result in a JSON-RPC message (the common case read without a model), or the error
        it carries.

        Raises:
            MCPError: an error response, or a message that is not JSON-RPC (``PARSE_ERROR``).
            _NotAnAnswer: a valid message that is not a response (handed to the dispatcher).
        """
        try:
            message = json.loads(data)
        except ValueError:
            message = None
        if (
            isinstance(message, dict)
            and message.get("jsonrpc") == "2.0"
            and "id" in message
            and isinstance(message.get("result"), dict)
            and "error" not in message
            and "method" not in message
        ):
            result: dict[str, Any] = message["result"]
            return result
        try:
            parsed = parse_message(data)
        except ValidationError as err:
            raise MCPError(mcp_types.PARSE_ERROR, f"Failed to parse {where}: {err}") from None
        if isinstance(parsed, JSONRPCError):
            raise MCPError.from_error_data(parsed.error)
        if isinstance(parsed, JSONRPCResponse):
            return parsed.result
        await self._deliver(SessionMessage(parsed))
        raise _NotAnAnswer

    async def _events(self, response: httpx2.Response, headers: dict[str, str]) -> dict[str, Any]:
        """The answer on an SSE stream, resumed with ``Last-Event-ID`` when it ends early (as the
        SDK's transport does: at most ``MAX_RECONNECTION_ATTEMPTS`` failed attempts in a row)."""
        resume = _Resume()
        answer = await self._read(
            httpx2.EventSource(response, max_event_size=DEFAULT_MAX_SSE_EVENT_SIZE), resume
        )
        attempt = 0
        while answer is None:
            if resume.last_id is None:
                raise MCPError(mcp_types.CONNECTION_CLOSED, "SSE stream ended without a response")
            if attempt >= MAX_RECONNECTION_ATTEMPTS:
                raise MCPError(
                    mcp_types.CONNECTION_CLOSED, "SSE stream ended and reconnection attempts were exhausted"
                )
            delay = resume.retry_ms if resume.retry_ms is not None else DEFAULT_RECONNECTION_DELAY_MS
            await anyio.sleep(delay / 1000)
            resumed = {k: v for k, v in headers.items() if k != "content-type"}
            resumed["last-event-id"] = resume.last_id
            try:
                async with sse_within_origin(
                    self._client, self._url, headers=resumed, max_event_size=DEFAULT_MAX_SSE_EVENT_SIZE
                ) as source:
                    source.response.raise_for_status()
                    answer = await self._read(source, resume)
                    attempt = 0
            except (httpx2.HTTPError, httpx2.SSEError):
                attempt += 1
        return answer

    async def _read(self, source: httpx2.EventSource, resume: _Resume) -> dict[str, Any] | None:
        """The answer among the stream's events; None when the stream ended without one.

        Raises:
            MCPError: the answer is an error, is not JSON-RPC, or the stream is not valid SSE.
        """
        try:
            async for event in source:
                resume.last_id = event.id or resume.last_id
                if event.retry is not None:
                    resume.retry_ms = event.retry
                if event.event != "message" or not event.data:
                    continue
                try:
                    return await self._answer(event.data, "SSE message")
                except _NotAnAnswer:
                    continue
        except httpx2.SSEError as err:
            raise MCPError(mcp_types.CONNECTION_CLOSED, f"SSE stream failed: {err}") from None
        except httpx2.TransportError:
            log.debug("SSE stream ended", exc_info=True)
        return None


class _Resume:
    """Where an SSE stream can be resumed from."""

    __slots__ = ("last_id", "retry_ms")

    def __init__(self) -> None:
        self.last_id: str | None = None
        self.retry_ms: int | None = None


class _NotAnAnswer(Exception):
    """A message on a request's stream that is not its answer (the dispatcher got it)."""
