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

from mcp_pool_svc.http11 import _END, Head, LeanHttpTransport, _Response

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


# --- the response as HTTP/1.1 frames it, read by httptools ------------------------------------------


async def _exchange(
    transport: LeanHttpTransport,
    url: httpx2.URL,
    method: bytes = b"POST",
    headers: list[tuple[bytes, bytes]] | None = None,
    body: list[bytes] | None = None,
) -> tuple[int, bytes]:
    head, stream = await transport.exchange(
        method,
        url,
        _head(url) if headers is None else headers,
        [b"{}"] if body is None else body,
        {"read": 5.0},
    )
    return head.status_code, await stream.read_all()


def _answering(*answers: bytes) -> Handler:
    """A server that answers each request on a connection with the next of ``answers`` (then
    waits for the client to close)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for answer in answers:
            await _read_request(reader)
            writer.write(answer)
            await writer.drain()
        await reader.read()

    return handle


async def test_a_chunked_answer_is_read_whole_and_its_connection_kept() -> None:
    chunked = b'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\n{"a\r\n4\r\n":1}\r\n0\r\n\r\n'
    transport = LeanHttpTransport()
    async with _server(_answering(chunked, chunked)) as (url, accepted):
        assert await _exchange(transport, url) == (200, b'{"a":1}')
        assert await _exchange(transport, url) == (200, b'{"a":1}')
        assert len(accepted) == 1
    await transport.aclose()


async def test_an_answer_without_a_length_ends_with_its_connection_which_is_not_reused() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{"until": ')
        await writer.drain()
        writer.write(b'"the close"}')
        await writer.drain()

    transport = LeanHttpTransport()
    async with _server(handle) as (url, accepted):
        assert await _exchange(transport, url) == (200, b'{"until": "the close"}')
        assert await _exchange(transport, url) == (200, b'{"until": "the close"}')
        assert len(accepted) == 2
    await transport.aclose()


async def test_a_chunked_answers_trailers_are_not_its_head() -> None:
    chunked = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\nx-trailer: 1\r\n\r\n"
    transport = LeanHttpTransport()
    async with _server(_answering(chunked)) as (url, _):
        head, stream = await transport.exchange(b"POST", url, _head(url), [b"{}"], {"read": 5.0})
        assert await stream.read_all() == b"{}"
        assert head.headers == [(b"transfer-encoding", b"chunked")]
    await transport.aclose()


async def test_an_informational_answer_is_skipped() -> None:
    answer = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\ncontent-length: 2\r\n\r\n{}"
    transport = LeanHttpTransport()
    async with _server(_answering(answer)) as (url, _):
        assert await _exchange(transport, url) == (201, b"{}")
    await transport.aclose()


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\n{}", "the server closes it"),
        (b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\n{}", "HTTP/1.0"),
        (_ANSWER + b"HTTP/1.1 200 OK\r\n", "bytes nobody asked for after the answer"),
    ],
)
async def test_a_connection_http_does_not_let_carry_another_request_is_not_reused(
    answer: bytes, why: str
) -> None:
    transport = LeanHttpTransport()
    async with _server(_answering(answer, answer)) as (url, accepted):
        assert await _exchange(transport, url) == (200, b"{}"), why
        await _exchange(transport, url)
        assert len(accepted) == 2, why
    await transport.aclose()


async def test_a_request_saying_it_closes_its_connection_does_not_reuse_it() -> None:
    transport = LeanHttpTransport()
    async with _server(_answering(_ANSWER, _ANSWER)) as (url, accepted):
        closing = [*_head(url), (b"connection", b"close")]
        assert await _exchange(transport, url, headers=closing) == (200, b"{}")
        assert await _exchange(transport, url) == (200, b"{}")
        assert len(accepted) == 2
    await transport.aclose()


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (b"", "Server disconnected without sending a response."),
        (b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n{}", "without sending complete message body"),
        (b"HTTP/1.1 200 OK\r\nbroken header\r\n\r\n", "Invalid header"),
        (b"HTTP/1.1 200 OK\r\n" + b"x-big: %s\r\n" % (b"a" * 1000) * 70, "head is over 65536 bytes"),
        (
            b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\n",
            "switched",
        ),
    ],
)
async def test_an_answer_that_breaks_http_is_a_remote_protocol_error(answer: bytes, message: str) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(answer)
        await writer.drain()

    transport = LeanHttpTransport()
    async with _server(handle) as (url, _):
        with pytest.raises(httpx2.RemoteProtocolError, match=message):
            await _exchange(transport, url)
    await transport.aclose()


async def test_the_answer_to_a_head_request_has_no_body() -> None:
    transport = LeanHttpTransport()
    async with _server(_answering(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")) as (url, _):
        head = [(b"host", url.netloc)]
        assert await _exchange(transport, url, method=b"HEAD", headers=head, body=[]) == (200, b"")
    await transport.aclose()


# --- the request as it goes out ---------------------------------------------------------------------


async def test_a_chunked_request_body_goes_out_in_chunks() -> None:
    received: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        received.append(await reader.readuntil(b"0\r\n\r\n"))
        writer.write(_ANSWER)
        await writer.drain()
        await reader.read()

    transport = LeanHttpTransport()
    async with _server(handle) as (url, _):
        head = [(b"host", url.netloc), (b"Transfer-Encoding", b"chunked")]
        assert await _exchange(transport, url, headers=head, body=[b'{"a"', b"", b":1}"]) == (200, b"{}")
    assert received == [
        b'POST /mcp HTTP/1.1\r\nhost: %s\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{"a"\r\n3\r\n:1}\r\n0\r\n\r\n'
        % url.netloc
    ]
    await transport.aclose()


@pytest.mark.parametrize(
    ("method", "headers", "body", "message"),
    [
        (b"POST", [(b"x-injected", b"a\r\nx-evil: 1")], [b"{}"], "illegal header value"),
        (b"POST", [(b"bad name", b"1")], [b"{}"], "illegal header name"),
        (b"POST", [(b"x-padded", b" 1")], [b"{}"], "illegal header value"),
        (b"PO ST", [], [b"{}"], "illegal method"),
        (b"POST", [(b"content-length", b"3")], [b"{}"], "declared Content-Length"),
        (b"POST", [(b"content-length", b"2"), (b"content-length", b"3")], [b"{}"], "bad Content-Length"),
        (b"POST", [(b"content-length", b"-2")], [b"{}"], "bad Content-Length"),
        (b"POST", [(b"transfer-encoding", b"gzip")], [b"{}"], "chunked is supported"),
        (b"POST", [(b"content-length", b"2"), (b"transfer-encoding", b"chunked")], [b"{}"], "together"),
        (b"GET", [], [b"{}"], "declared Content-Length"),
        (b"GET", "no host", [], "Host"),
    ],
)
async def test_a_request_http_cannot_carry_is_refused_before_anything_is_sent(
    method: bytes, headers: list[tuple[bytes, bytes]] | str, body: list[bytes], message: str
) -> None:
    received: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        received.append(await reader.read())

    transport = LeanHttpTransport()
    async with _server(handle) as (url, _):
        head = [] if headers == "no host" else [(b"host", url.netloc), *headers]
        with pytest.raises(httpx2.LocalProtocolError, match=message):
            await transport.exchange(method, url, head, body, {"read": 5.0})
        await transport.aclose()
        await asyncio.sleep(0.05)
    assert received in ([], [b""])


def test_a_response_read_past_its_end_gives_its_end_again() -> None:
    # (what next_event asks when the connection ends after the response: not a wait for more)
    response = _Response()
    response.feed(_ANSWER)
    assert list(response.events) == [
        Head(200, b"OK", [(b"content-type", b"application/json"), (b"content-length", b"2")]),
        b"{}",
        _END,
    ]
    response.events.clear()
    response.closed()
    assert list(response.events) == [_END]
