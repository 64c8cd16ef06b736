"""The gateway's HTTP listener (:mod:`toolscout_kit.http_server`): the writes of one turn of the
event loop leave as one (a response's head and body), answers and streams arrive whole and in
order, on a kept-alive connection too."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from starlette.types import Receive, Scope, Send

from toolscout_kit.host import bind_socket
from toolscout_kit.http_server import HttpListener, _Coalescing

BODY = b'{"jsonrpc":"2.0","id":1,"result":{}}'


class _Recording(asyncio.Transport):
    """A connection's transport that keeps what it is given (the far end's view of the writes)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False
        self.aborted = False

    def write(self, data: Any) -> None:
        self.writes.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_write_buffer_size(self) -> int:
        return 0


async def _turn() -> None:
    await asyncio.sleep(0)


async def test_the_writes_of_one_turn_leave_as_one_in_order() -> None:
    inner = _Recording()
    transport = _Coalescing(inner, asyncio.get_running_loop())
    transport.write(b"HTTP/1.1 200 OK\r\n\r\n")
    transport.writelines([b"{", b"}"])
    assert inner.writes == []
    assert transport.get_write_buffer_size() == 21
    await _turn()
    assert inner.writes == [b"HTTP/1.1 200 OK\r\n\r\n{}"]
    transport.write(b"next")
    await _turn()
    assert inner.writes[1:] == [b"next"]


async def test_closing_sends_what_is_pending_first_and_aborting_drops_it() -> None:
    inner = _Recording()
    transport = _Coalescing(inner, asyncio.get_running_loop())
    transport.write(b"last words")
    transport.close()
    assert inner.writes == [b"last words"]
    assert inner.closed
    await _turn()
    assert inner.writes == [b"last words"]  # the turn's flush found nothing left

    aborted = _Recording()
    transport = _Coalescing(aborted, asyncio.get_running_loop())
    transport.write(b"never")
    transport.abort()
    await _turn()
    assert aborted.writes == []
    assert aborted.aborted


async def _app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    await receive()
    if scope["path"] == "/stream":
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]}
        )
        for part in (b"one ", b"two ", b"three"):
            await send({"type": "http.response.body", "body": part, "more_body": True})
            await asyncio.sleep(0)  # the next part in a later turn
        await send({"type": "http.response.body", "body": b""})
        return
    headers = [(b"content-length", str(len(BODY)).encode()), (b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": BODY})


async def _read_response(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.lower().split(b"\r\n")
    length = next((int(line.split(b":")[1]) for line in lines if line.startswith(b"content-length:")), None)
    if length is not None:
        return head, await reader.readexactly(length)
    body = b""
    while True:  # chunked
        size = int((await reader.readuntil(b"\r\n")).strip(), 16)
        chunk = await reader.readexactly(size + 2)
        if not size:
            return head, body
        body += chunk[:-2]


async def test_answers_and_streams_arrive_whole_on_a_kept_alive_connection() -> None:
    sock = bind_socket("127.0.0.1:0")
    port = sock.getsockname()[1]
    listener = HttpListener(_app, sock, read_timeout=5, shutdown_grace=1, idle=asyncio.Event())
    await listener.start()
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 5)
        raw = writer.get_extra_info("socket")
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for path in ("/mcp", "/stream", "/mcp"):
            writer.write(f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n{{}}".encode())
            head, body = await asyncio.wait_for(_read_response(reader), 5)
            assert head.startswith(b"HTTP/1.1 200")
            assert body == (b"one two three" if path == "/stream" else BODY)
        writer.close()
    finally:
        await listener.refuse()
        await listener.close(1)
        await asyncio.wait_for(listener.closed(), 5)
