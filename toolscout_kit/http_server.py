"""The HTTP side of the service host: an ASGI app served by uvicorn, run by :mod:`toolscout_kit.host`.

The MCP gateway is an HTTP server (MCP's streamable HTTP), not a gRPC one; it runs the host's
lifecycle like the gRPC services through :class:`HttpListener`: bound by the host's
:func:`~toolscout_kit.host.bind_socket` before anything answers; refusing runs the app's own
refusals (readiness turns false through :attr:`~toolscout_kit.host.RunningServer.stopping`, event
streams end); closing lets the requests in flight finish within the grace (the app's ``idle``
event); then the app refuses new requests and ends those still running (``end_requests``: they
are answered at once, so that the stop takes the grace and not uvicorn's own timeout on top of
it, and uvicorn cancels no request task); then it leaves the app's lifespans (the MCP SDK's
session managers: sessions and their streams end) and stops uvicorn.

uvicorn runs without its own signal handling (the host owns the signals), and closes a connection
whose first request's headers have not all arrived within the read timeout (uvicorn itself times
out idle keep-alive connections only). Its HTTP/1.1 parser is httptools (llhttp, in C), uvicorn's
own choice when it is installed: about half the server's CPU per request of the pure-Python h11
(bench/README, "the lean path"). uvicorn writes a response's head and its body as they are sent
(two ``send`` calls, two TCP segments for a small answer); the writes of one turn of the event
loop go out as one here (:class:`_Coalescing`: a JSON answer is one segment, about 10 µs of CPU
and 20 µs of wall time less per request on loopback).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import Any

import uvicorn
from starlette.types import ASGIApp
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from toolscout_kit.host import DRAIN_MARGIN
from toolscout_kit.logging import get_logger

__all__ = ["HttpListener"]

_log = get_logger(__name__)


class _Uvicorn(uvicorn.Server):
    """uvicorn without its own signal handling: the host (or ``toolscout up``) owns the signals."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class _Coalescing(asyncio.Transport):
    """A connection's transport whose writes within one turn of the event loop are handed on
    together at the turn's end (uvicorn writes a response's head, then its body, each at once)."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes | bytearray | memoryview] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._pending:
            self._loop.call_soon(self._flush)
        self._pending.append(data)

    def writelines(self, list_of_data: Iterable[bytes | bytearray | memoryview]) -> None:
        for data in list_of_data:
            self.write(data)

    def _flush(self) -> None:
        if not self._pending:
            return
        data = b"".join(self._pending)
        self._pending.clear()
        if not self._transport.is_closing():
            self._transport.write(data)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def abort(self) -> None:
        self._pending.clear()
        self._transport.abort()

    def write_eof(self) -> None:
        self._flush()
        self._transport.write_eof()

    def can_write_eof(self) -> bool:
        return self._transport.can_write_eof()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._transport.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._transport.get_protocol()

    def is_reading(self) -> bool:
        return self._transport.is_reading()

    def pause_reading(self) -> None:
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        self._transport.resume_reading()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._transport.set_write_buffer_limits(high, low)

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + sum(len(data) for data in self._pending)

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._transport.get_write_buffer_limits()


def _timed_http(seconds: float) -> type[HttpToolsProtocol]:
    """uvicorn's HTTP/1.1 protocol, closing a connection whose first request's headers have not
    all arrived within ``seconds`` (the body is the app's to time)."""

    class _TimedHttp(HttpToolsProtocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            if isinstance(transport, asyncio.Transport):  # (a TCP or TLS connection's: always)
                transport = _Coalescing(transport, self.loop)
            super().connection_made(transport)  # type: ignore[arg-type]  # uvicorn's is a Transport
            self.loop.call_later(seconds, self._headers_due)

        def _headers_due(self) -> None:
            if self.cycle is None and not self.transport.is_closing():
                _log.info("connection dropped: its request headers did not arrive in time", timeout=seconds)
                self.transport.close()

    return _TimedHttp


class HttpListener:
    """The host's :class:`~toolscout_kit.host.Listener` for ``app`` on the bound ``sock``.

    ``lifespans`` are entered before serving and left once the requests in flight are done (the
    SDK's session managers); ``idle`` is set whenever no request is being answered; ``on_refuse``
    runs first at shutdown (what ends the app's endless streams); ``end_requests`` runs when the
    grace is over (or nothing is in flight any more): the app ends what is still running and
    refuses new requests.
    """

    def __init__(
        self,
        app: ASGIApp,
        sock: socket.socket,
        *,
        read_timeout: float,
        shutdown_grace: float,
        idle: asyncio.Event,
        lifespans: Sequence[AbstractAsyncContextManager[object]] = (),
        on_refuse: Sequence[Callable[[], Awaitable[None]]] = (),
        end_requests: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        config = uvicorn.Config(
            app,
            lifespan="off",
            log_level="warning",
            # Its lines go to the process's own logging (one line each: toolscout_kit.logging).
            log_config=None,
            access_log=False,
            http=_timed_http(read_timeout),
            timeout_graceful_shutdown=max(int(shutdown_grace), 1),
        )
        self._server = _Uvicorn(config)
        self._sock = sock
        self._idle = idle
        self._lifespans = list(lifespans)
        self._on_refuse = list(on_refuse)
        self._end_requests = end_requests
        self._exit = asyncio.Event()
        self._started = asyncio.Event()
        self._closed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Serves from now on (the socket is already listening: connections made meanwhile wait)."""
        self._task = asyncio.create_task(self._run(), name="http-server")
        await self._started.wait()

    async def _run(self) -> None:
        try:
            async with AsyncExitStack() as stack:
                for lifespan in self._lifespans:
                    await stack.enter_async_context(lifespan)
                serving = asyncio.create_task(self._server.serve(sockets=[self._sock]))
                self._started.set()
                exiting = asyncio.create_task(self._exit.wait())
                await asyncio.wait({serving, exiting}, return_when=asyncio.FIRST_COMPLETED)
                exiting.cancel()
                self._server.should_exit = True
            # The lifespans are left: the sessions ended, their streams with them.
            await serving
        except Exception:
            _log.exception("the HTTP server failed")
        finally:
            self._started.set()
            self._closed.set()

    async def refuse(self) -> None:
        for refusal in self._on_refuse:
            await refusal()

    async def close(self, grace: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), max(grace - DRAIN_MARGIN, 0.0))
        if self._end_requests is not None:
            await self._end_requests()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._idle.wait(), DRAIN_MARGIN)
        # What is left (a request the app could not end) uvicorn cancels after a second.
        self._server.config.timeout_graceful_shutdown = 1
        self._exit.set()
        if self._task is not None:
            await self._closed.wait()

    async def closed(self) -> None:
        await self._closed.wait()
