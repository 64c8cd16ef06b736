"""A lean HTTP/1.1 transport for the pool's streamable-HTTP clients: asyncio streams and ``h11``.

The pool's calls to streamable-HTTP servers go through the ``mcp`` SDK's transport on a shared
``httpx2`` client (:class:`~mcp_pool_svc.session.HttpClients`). Profiled (bench/README, "Round 3"),
a third of the pool's CPU per call went to ``httpcore2``'s connection pool and its ``anyio``
streams (an async-library lookup per read and write, a lock and a wrapper per layer), around the
few microseconds ``h11`` itself spends on the bytes. This transport sits under the same
``httpx2.AsyncClient`` (auth, redirects, the SDK's headers and SSE reading are unchanged) and
does the socket work with asyncio's streams directly. :meth:`LeanHttpTransport.exchange` is the same
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
clients do not ask for it) and proxies (``httpx2`` mounts its own transports for the proxies the
environment names; those requests never reach this one).
"""

from __future__ import annotations

import asyncio
import select
import ssl
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import h11
import httpx2

__all__ = ["Body", "LeanHttpTransport"]

_READ_SIZE = 65536
_DEFAULT_PORTS = {b"http": 80, b"https": 443}

Origin = tuple[bytes, bytes, int]


def _readable(writer: asyncio.StreamWriter) -> bool:
    """Whether the connection's socket has something to read (or an end) right now."""
    sock = writer.get_extra_info("socket")
    if sock is None:
        return True
    poll = select.poll()
    poll.register(sock.fileno(), select.POLLIN)
    return bool(poll.poll(0))


class _Connection:
    """One TCP (or TLS) connection and its HTTP/1.1 state."""

    __slots__ = ("_timer", "deadline", "h11", "idle_since", "reader", "timed_out", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.h11 = h11.Connection(h11.CLIENT)
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

    async def send(self, request: httpx2.Request, limit: float | None) -> None:
        """Writes the request head and body.

        Raises:
            httpx2.LocalProtocolError, httpx2.WriteError, httpx2.WriteTimeout.
        """
        chunks = []
        async for chunk in request.stream:  # type: ignore[union-attr]  # an httpx2 request's is async
            if chunk:
                chunks.append(chunk)
        await self.send_parts(request.method, request.url.raw_path, request.headers.raw, chunks, limit)

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
        try:
            out = self.h11.send(h11.Request(method=method, target=target, headers=headers))
            chunks = [out] if out else []
            for chunk in body:
                chunks.append(self.h11.send(h11.Data(data=chunk)) or b"")
            chunks.append(self.h11.send(h11.EndOfMessage()) or b"")
        except h11.LocalProtocolError as err:
            raise httpx2.LocalProtocolError(str(err)) from None
        self.writer.write(b"".join(chunks))
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

    async def next_event(self, limit: float | None) -> Any:
        """The next HTTP event of the response, reading as needed.

        Raises:
            httpx2.RemoteProtocolError: the server broke HTTP, or closed the connection early.
            httpx2.ReadError, httpx2.ReadTimeout.
        """
        while True:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as err:
                raise httpx2.RemoteProtocolError(str(err)) from None
            if event is not h11.NEED_DATA:
                if isinstance(event, h11.ConnectionClosed):
                    raise httpx2.RemoteProtocolError("Server disconnected without sending a response.")
                return event
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
            try:
                self.h11.receive_data(data)
            except RuntimeError as err:  # data after the server said it closes
                raise httpx2.RemoteProtocolError(str(err)) from None


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
            if isinstance(event, h11.Data):
                yield bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                self._complete = True

    async def read_all(self) -> bytes:
        """The whole body (the connection is given back, or closed, as by :meth:`aclose`)."""
        parts = []
        try:
            while True:
                event = await self._conn.next_event(self._timeout)
                if isinstance(event, h11.Data):
                    parts.append(bytes(event.data))
                elif isinstance(event, h11.EndOfMessage):
                    self._complete = True
                    return b"".join(parts)
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        conn = self._conn
        if self._complete and conn.h11.our_state is h11.DONE and conn.h11.their_state is h11.DONE:
            conn.h11.start_next_cycle()
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
            headers=head.headers.raw_items(),
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
    ) -> tuple[h11.Response, Body]:
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
            while isinstance(event, h11.InformationalResponse):
                event = await conn.next_event(read_timeout)
        except BaseException:
            conn.close()
            raise
        assert isinstance(event, h11.Response)
        return event, Body(self, origin, conn, read_timeout)

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn in conns:
                conn.close()
