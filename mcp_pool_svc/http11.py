"""A lean HTTP/1.1 transport for the pool's streamable-HTTP clients: asyncio streams and ``httptools``.

The pool's calls to streamable-HTTP servers go through the ``mcp`` SDK's transport on a shared
``httpx2`` client (:class:`~mcp_pool_svc.session.HttpClients`). Profiled (bench/README, "Round 3"),
a third of the pool's CPU per call went to ``httpcore2``'s connection pool and its ``anyio``
streams (an async-library lookup per read and write, a lock and a wrapper per layer), around the
few microseconds ``h11`` itself spends on the bytes. This transport sits under the same
``httpx2.AsyncClient`` (auth, redirects, the SDK's headers and SSE reading are unchanged) and
does the socket work with asyncio's streams directly. Responses are read by ``httptools``
(llhttp, in C: the parser the gateway's uvicorn uses); requests are written here, checked as
``h11`` (the pure-Python parser this transport used before) checks them: ~50 µs of CPU per
exchange with ``h11``, ~4 µs this way (bench/README, "Round 7"). :meth:`LeanHttpTransport.exchange` is the same
exchange without ``httpx2``'s request and response objects (the lean POST reads a plain JSON answer
with it, :mod:`mcp_pool_svc.lean`); each connection keeps one timer for its read and write
timeouts, moved on only when it fires early, instead of one made and cancelled per read.

It behaves as ``httpcore2`` does where the pool depends on it: keep-alive connections per origin,
no cap on their number; an idle one is dropped when the server closed it (its socket polled
before reuse) or after ``keepalive_expiry``; a response read to its end gives its connection back, one abandoned
mid-way (a cancelled 2026-07-28 call: closing the POST is its cancellation) closes it; TLS with
``httpx2``'s default context. Failures are ``httpx2``'s exceptions, with the same meaning: a
connect that failed (``ConnectError``, ``ConnectTimeout``) sent nothing, which
:class:`~mcp_pool_svc.session._NotSentTransport` relies on. Not supported: HTTP/2 (the pool's
clients do not ask for it) and proxies (the pool's clients mount ``httpx2``'s own transports for
the proxies the environment names, :func:`~mcp_pool_svc.session._proxy_mounts`; those requests
never reach this one).
"""

from __future__ import annotations

import asyncio
import re
import select
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator, Mapping
from typing import NamedTuple

import httptools
import httpx2

__all__ = ["Body", "Head", "LeanHttpTransport"]

_READ_SIZE = 65536
# A response head past this is refused, as h11 refuses one past its 16 KiB (a server sending
# headers without end would otherwise grow the pool's memory without end).
_MAX_HEAD_BYTES = 64 * 1024
_DEFAULT_PORTS = {b"http": 80, b"https": 443}
# RFC 9110's token (a method, a header's name) and field value (no control character but a tab
# inside, no white space at either end), as h11 checks them before sending.
_TOKEN = re.compile(rb"[-!#$%&'*+.^_`|~0-9a-zA-Z]+")
_FIELD_VALUE = re.compile(rb"(?:[\x21-\x7e\x80-\xff](?:[\t\x20-\x7e\x80-\xff]*[\x21-\x7e\x80-\xff])?)?")
_TARGET = re.compile(rb"[\x21-\x7e\x80-\xff]+")
_DIGITS = re.compile(rb"[0-9]+")

Origin = tuple[bytes, bytes, int]


class Head(NamedTuple):
    """A response's status line and headers (names as the server wrote them, in its order)."""

    status_code: int
    reason: bytes
    headers: list[tuple[bytes, bytes]]


class _End:
    """The response's end (the body read whole)."""


_END = _End()


def _readable(writer: asyncio.StreamWriter) -> bool:
    """Whether the connection's socket has something to read (or an end) right now."""
    sock = writer.get_extra_info("socket")
    if sock is None:
        return True
    poll = select.poll()
    poll.register(sock.fileno(), select.POLLIN)
    return bool(poll.poll(0))


def _head_lines(
    method: bytes, target: bytes, headers: list[tuple[bytes, bytes]]
) -> tuple[list[bytes], bool, int | None]:
    """A request's head, line by line, whether its body is chunked, and its declared length.

    Raises:
        httpx2.LocalProtocolError: a method, target or header HTTP/1.1 cannot carry as given.
    """
    if not _TOKEN.fullmatch(method):
        raise httpx2.LocalProtocolError(f"illegal method {method!r}")
    if not _TARGET.fullmatch(target):
        raise httpx2.LocalProtocolError(f"illegal request target {target!r}")
    lines = [b"%s %s HTTP/1.1\r\n" % (method, target)]
    host = chunked = False
    length: bytes | None = None
    for name, value in headers:
        if not _TOKEN.fullmatch(name):
            raise httpx2.LocalProtocolError(f"illegal header name {name!r}")
        if not _FIELD_VALUE.fullmatch(value):
            raise httpx2.LocalProtocolError(f"illegal header value {value!r}")
        lower = name.lower()
        if lower == b"host":
            host = True
        elif lower == b"content-length":
            if not _DIGITS.fullmatch(value) or (length is not None and value != length):
                raise httpx2.LocalProtocolError("bad Content-Length")
            length = value
        elif lower == b"transfer-encoding":
            if value.lower() != b"chunked" or chunked:
                raise httpx2.LocalProtocolError("Only Transfer-Encoding: chunked is supported")
            chunked = True
        lines.append(b"%s: %s\r\n" % (name, value))
    if not host:
        raise httpx2.LocalProtocolError("Missing mandatory Host: header")
    if chunked and length is not None:
        raise httpx2.LocalProtocolError("Content-Length and Transfer-Encoding: chunked together")
    lines.append(b"\r\n")
    return lines, chunked, None if length is None else int(length)


def _request_bytes(
    method: bytes, target: bytes, headers: list[tuple[bytes, bytes]], body: list[bytes]
) -> bytes:
    """A request's head and body as they go out, checked as h11 checks them: the head's names and
    values, a Host header, and the body framed as the head says (chunked, or its Content-Length;
    no body without either).

    Raises:
        httpx2.LocalProtocolError: not a request HTTP/1.1 can carry as given.
    """
    lines, chunked, length = _head_lines(method, target, headers)
    if chunked:
        for chunk in body:
            if chunk:
                lines += (b"%x\r\n" % len(chunk), chunk, b"\r\n")
        lines.append(b"0\r\n\r\n")
    elif sum(map(len, body)) != (length or 0):
        raise httpx2.LocalProtocolError("the body's length is not its declared Content-Length")
    else:
        lines += body
    return b"".join(lines)


class _Response:
    """The parser's callbacks for the responses to one request: its events, in order."""

    __slots__ = (
        "_head_bytes",
        "_headers",
        "_parser",
        "_reason",
        "bodiless",
        "done",
        "events",
        "extra",
        "framed",
        "keep_alive",
        "started",
    )

    def __init__(self, *, bodiless: bool = False) -> None:
        self.bodiless = bodiless  # the answer to a HEAD request: no body, whatever its headers say
        self.events: deque[Head | bytes | _End] = deque()
        self._parser = httptools.HttpResponseParser(self)
        self._headers: list[tuple[bytes, bytes]] = []
        self._head_bytes = 0
        self._reason = b""
        self.started = False  # a final (not 1xx) response's head arrived
        self.framed = False  # its length is known (Content-Length or chunked), not "until the close"
        self.keep_alive = False
        self.done = False
        self.extra = False  # bytes after the response: the connection is not reused

    def feed(self, data: bytes) -> None:
        """Raises: httpx2.RemoteProtocolError: not an HTTP/1.1 response."""
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            raise httpx2.RemoteProtocolError("the server switched protocols") from None
        except httptools.HttpParserError as err:
            if not self.done:
                raise httpx2.RemoteProtocolError(str(err) or "the server broke HTTP/1.1") from None
            self.extra = True
        if self._head_bytes > _MAX_HEAD_BYTES and not self.done:
            raise httpx2.RemoteProtocolError(f"the response's head is over {_MAX_HEAD_BYTES} bytes")

    def on_message_begin(self) -> None:
        if self.done:
            self.extra = True
        self._headers = []
        self._head_bytes = 0
        self._reason = b""

    def on_status(self, reason: bytes) -> None:
        self._head_bytes += len(reason)
        if self._head_bytes <= _MAX_HEAD_BYTES:
            self._reason += reason

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_bytes += len(name) + len(value)
        if self._head_bytes <= _MAX_HEAD_BYTES:
            self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        if self.done:
            return
        status = self._parser.get_status_code()
        self.keep_alive = self._parser.should_keep_alive() and self._parser.get_http_version() == "1.1"
        if status >= 200:
            self.started = True
            self.framed = status in (204, 304) or any(
                name.lower() in (b"content-length", b"transfer-encoding") for name, _ in self._headers
            )
        self.events.append(Head(status, self._reason, self._headers))
        self._headers = []  # (a chunked body's trailers, if any, are not the head's)
        if self.started and self.bodiless:
            # The parser would wait for the body the headers announce; the connection is not reused.
            self.done = True
            self.keep_alive = False
            self.events.append(_END)

    def on_body(self, body: bytes) -> None:
        if not self.done and body:
            self.events.append(body)

    def on_message_complete(self) -> None:
        if self.started and not self.done:
            self.done = True
            self.events.append(_END)

    def closed(self) -> None:
        """The server closed the connection.

        Raises:
            httpx2.RemoteProtocolError: before the response's end.
        """
        if self.done:
            self.events.append(_END)  # (read past its end: the end again, not a wait for more)
            return
        if not self.started:
            raise httpx2.RemoteProtocolError("Server disconnected without sending a response.")
        if self.framed:
            raise httpx2.RemoteProtocolError("peer closed connection without sending complete message body")
        # A response without a length ends with its connection.
        self.done = True
        self.keep_alive = False
        self.events.append(_END)


class _Connection:
    """One TCP (or TLS) connection and its exchange under way."""

    __slots__ = (
        "_timer",
        "deadline",
        "idle_since",
        "keep_alive",
        "reader",
        "response",
        "timed_out",
        "writer",
    )

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.response = _Response()
        self.keep_alive = True  # this side did not say it closes the connection
        self.idle_since = 0.0
        self.timed_out = False
        # When the read or write under way times out (None: none is). One timer per connection,
        # moved on only when it fires early: a timer per read would be made and cancelled per call.
        self.deadline: float | None = None
        self._timer: asyncio.TimerHandle | None = None

    def reusable(self, now: float, expiry: float) -> bool:
        """Idle, open, not closed by the server meanwhile, and not older than ``expiry``.

        An idle connection's socket that is readable was closed by the server (or it sent
        something unasked): asked of the kernel, since the event loop may not have read the close
        yet (a server killed a moment ago). A request sent on it would be lost after sending;
        a new connection to a dead server is refused before anything is sent.
        """
        return (
            now - self.idle_since < expiry
            and not self.writer.is_closing()
            and not self.reader.at_eof()
            and self.reader.exception() is None
            and not _readable(self.writer)
        )

    def finished(self) -> bool:
        """The exchange ended as HTTP/1.1 lets the connection carry another."""
        response = self.response
        return response.done and response.keep_alive and self.keep_alive and not response.extra

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self.writer.is_closing():
            self.writer.close()

    def _arm(self, limit: float) -> None:
        """The read or write about to start times out in ``limit`` seconds."""
        loop = asyncio.get_running_loop()
        deadline = self.deadline = loop.time() + limit
        timer = self._timer
        if timer is None or timer.when() > deadline:
            if timer is not None:
                timer.cancel()
            self._timer = loop.call_at(deadline, self._check)

    def _check(self) -> None:
        self._timer = None
        deadline = self.deadline
        if deadline is None:
            return
        loop = asyncio.get_running_loop()
        if loop.time() >= deadline:
            self.timed_out = True
            self.writer.transport.abort()
        else:
            self._timer = loop.call_at(deadline, self._check)

    async def send_parts(
        self,
        method: bytes | str,
        target: bytes,
        headers: list[tuple[bytes, bytes]],
        body: list[bytes],
        limit: float | None,
    ) -> None:
        """Writes a request's head and its body (``body``: its chunks).

        Raises:
            httpx2.LocalProtocolError, httpx2.WriteError, httpx2.WriteTimeout.
        """
        if isinstance(method, str):
            method = method.encode("ascii")
        data = _request_bytes(method, target, headers, body)
        self.keep_alive = not any(
            name.lower() == b"connection" and b"close" in value.lower() for name, value in headers
        )
        self.response = _Response(bodiless=method == b"HEAD")
        self.writer.write(data)
        if self.writer.transport.get_write_buffer_size() == 0:
            return
        if limit:
            self._arm(limit)
        try:
            await self.writer.drain()
        except OSError as err:
            if self.timed_out:
                raise httpx2.WriteTimeout("timed out writing the request") from None
            raise httpx2.WriteError(str(err) or type(err).__name__) from None
        finally:
            self.deadline = None

    async def next_event(self, limit: float | None) -> Head | bytes | _End:
        """The next event of the response (a head, a piece of its body, its end), reading as needed.

        Raises:
            httpx2.RemoteProtocolError: the server broke HTTP, or closed the connection early.
            httpx2.ReadError, httpx2.ReadTimeout.
        """
        response = self.response
        events = response.events
        while not events:
            if limit:
                self._arm(limit)
            try:
                data = await self.reader.read(_READ_SIZE)
            except OSError as err:
                if self.timed_out:
                    raise httpx2.ReadTimeout("timed out reading the response") from None
                raise httpx2.ReadError(str(err) or type(err).__name__) from None
            finally:
                self.deadline = None
            if self.timed_out:
                raise httpx2.ReadTimeout("timed out reading the response")
            if data:
                response.feed(data)
            else:
                response.closed()
        return events.popleft()


class Body(httpx2.AsyncByteStream):
    """A response's body as it arrives; its connection goes back to the pool once it is read to
    the end and closed, and is closed when the body is abandoned before."""

    def __init__(
        self, transport: LeanHttpTransport, origin: Origin, conn: _Connection, timeout: float | None
    ):
        self._transport = transport
        self._origin = origin
        self._conn = conn
        self._timeout = timeout
        self._complete = False
        self._closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while not self._complete:
            event = await self._conn.next_event(self._timeout)
            if isinstance(event, bytes):
                yield event
            elif event is _END:
                self._complete = True

    async def read_all(self) -> bytes:
        """The whole body (the connection is given back, or closed, as by :meth:`aclose`)."""
        parts = []
        try:
            while True:
                event = await self._conn.next_event(self._timeout)
                if isinstance(event, bytes):
                    parts.append(event)
                elif event is _END:
                    self._complete = True
                    return b"".join(parts)
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        conn = self._conn
        if self._complete and conn.finished():
            self._transport.release(self._origin, conn)
        else:
            conn.close()


class LeanHttpTransport(httpx2.AsyncBaseTransport):
    """HTTP/1.1 over asyncio streams, keep-alive connections per origin (see the module's doc)."""

    def __init__(self, *, keepalive_expiry: float = 30.0, ssl_context: ssl.SSLContext | None = None) -> None:
        self._expiry = keepalive_expiry
        self._ssl = ssl_context
        self._idle: dict[Origin, list[_Connection]] = {}
        self._closed = False

    def _ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = httpx2.create_ssl_context()
        return self._ssl

    def release(self, origin: Origin, conn: _Connection) -> None:
        """Keeps a connection whose exchange completed for the next request to ``origin``."""
        if self._closed or conn.writer.is_closing():
            conn.close()
            return
        conn.idle_since = time.monotonic()
        self._idle.setdefault(origin, []).append(conn)

    def _reusable(self, origin: Origin) -> _Connection | None:
        idle = self._idle.get(origin)
        now = time.monotonic()
        while idle:
            conn = idle.pop()
            if conn.reusable(now, self._expiry):
                return conn
            conn.close()
        return None

    async def _connect(self, origin: Origin, limit: float | None) -> _Connection:
        """A new connection to ``origin``.

        Raises:
            httpx2.ConnectError, httpx2.ConnectTimeout: not connected (nothing was sent).
        """
        scheme, host, port = origin
        name = host.decode("ascii")
        tls = self._ssl_context() if scheme == b"https" else None
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(
                    name, port, ssl=tls, server_hostname=name if tls else None, limit=_READ_SIZE
                ),
                limit,
            )
        except TimeoutError:
            raise httpx2.ConnectTimeout(f"no connection to {name}:{port} in time") from None
        except (OSError, ssl.SSLError) as err:
            raise httpx2.ConnectError(str(err) or type(err).__name__) from None
        return _Connection(reader, writer)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        url = request.url
        timeouts: dict[str, float | None] = request.extensions.get("timeout") or {}
        body = []
        async for chunk in request.stream:  # type: ignore[union-attr]  # an httpx2 request's is async
            if chunk:
                body.append(chunk)
        head, stream = await self.exchange(request.method, url, request.headers.raw, body, timeouts)
        return httpx2.Response(
            head.status_code,
            headers=head.headers,
            stream=stream,
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": head.reason},
        )

    async def exchange(
        self,
        method: bytes | str,
        url: httpx2.URL,
        headers: list[tuple[bytes, bytes]],
        body: list[bytes],
        timeouts: Mapping[str, float | None],
    ) -> tuple[Head, Body]:
        """Sends one request (its whole head in ``headers``) and reads the response's head; the
        body is read from the returned stream. Without ``httpx2``'s request and response objects:
        :class:`~mcp_pool_svc.lean.LeanPost` reads a plain JSON answer with this.

        Raises:
            httpx2.UnsupportedProtocol: not http or https.
            httpx2.ConnectError, httpx2.ConnectTimeout: not connected (nothing was sent).
            httpx2.TransportError: sent (maybe in part), then the exchange failed.
        """
        if url.raw_scheme not in _DEFAULT_PORTS:
            raise httpx2.UnsupportedProtocol(f"unsupported URL scheme {url.scheme!r}")
        origin: Origin = (url.raw_scheme, url.raw_host, url.port or _DEFAULT_PORTS[url.raw_scheme])
        read_timeout = timeouts.get("read")
        conn = self._reusable(origin) or await self._connect(origin, timeouts.get("connect"))
        try:
            await conn.send_parts(method, url.raw_path, headers, body, timeouts.get("write"))
            event = await conn.next_event(read_timeout)
            while isinstance(event, Head) and event.status_code < 200:  # 1xx: informational
                event = await conn.next_event(read_timeout)
        except BaseException:
            conn.close()
            raise
        assert isinstance(event, Head)
        return event, Body(self, origin, conn, read_timeout)

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn in conns:
                conn.close()
