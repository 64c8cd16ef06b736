"""The pool's HTTP/1.1 transport (``mcp_pool_svc/http11.py``) against small real servers on
127.0.0.1: a read that takes too long times out (also after earlier reads on the same connection
moved its one timer on), a connection the server closed while idle is not reused, a refused
connect is a ``ConnectError`` (nothing sent), and a response read whole gives its connection back."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import httpx2
import pytest

from mcp_pool_svc.http11 import LeanHttpTransport

_ANSWER = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def _server(handle: Handler) -> AsyncIterator[tuple[httpx2.URL, list[int]]]:
    """A server on a free port; yields its URL and the number of connections it accepted."""
    accepted: list[int] = []

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(1)
        try:
            await handle(reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield httpx2.URL(f"http://127.0.0.1:{port}/mcp"), accepted
    finally:
        server.close()


async def _read_request(reader: asyncio.StreamReader) -> bool:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        (
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        ),
        0,
    )
    await reader.readexactly(length)
    return True


def _head(url: httpx2.URL) -> list[tuple[bytes, bytes]]:
    return [(b"host", url.netloc), (b"content-length", b"2")]


async def test_answers_keep_one_connection_and_a_slow_answer_times_out() -> None:
    answered = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for _ in range(3):
            await _read_request(reader)
            writer.write(_ANSWER)
            await writer.drain()
        await _read_request(reader)
        answered.set()
        await asyncio.Event().wait()  # never answers the fourth

    transport = LeanHttpTransport()
    async with _server(handle) as (url, accepted):
        for _ in range(3):
            head, body = await transport.exchange(b"POST", url, _head(url), [b"{}"], {"read": 5.0})
            assert head.status_code == 200
            assert await body.read_all() == b"{}"
        with pytest.raises(httpx2.ReadTimeout):
            await transport.exchange(b"POST", url, _head(url), [b"{}"], {"read": 0.2})
        assert answered.is_set()
        assert len(accepted) == 1
    await transport.aclose()


async def test_a_connection_the_server_closed_while_idle_is_not_reused() -> None:
    closed = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(_ANSWER)
        await writer.drain()
        if not closed.is_set():
            writer.close()
            await writer.wait_closed()
            closed.set()

    transport = LeanHttpTransport()
    async with _server(handle) as (url, accepted):
        _, body = await transport.exchange(b"POST", url, _head(url), [b"{}"], {"read": 5.0})
        assert await body.read_all() == b"{}"
        # Closed on the server's side (whether this side's event loop has read the close yet or not).
        await asyncio.wait_for(closed.wait(), 10)
        _, body = await transport.exchange(b"POST", url, _head(url), [b"{}"], {"read": 5.0})
        assert await body.read_all() == b"{}"
        assert len(accepted) == 2
    await transport.aclose()


async def test_a_refused_connect_is_a_connect_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: refused
        url = httpx2.URL(f"http://127.0.0.1:{port}/mcp")
        transport = LeanHttpTransport()
        with pytest.raises(httpx2.ConnectError):
            await transport.exchange(b"POST", url, _head(url), [b"{}"], {"connect": 5.0})
        await transport.aclose()
