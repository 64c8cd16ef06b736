"""A minimal HTTP forward proxy for tests (plain ``http://`` targets, no CONNECT): it reads each
connection's first request head (absolute-form, as a client sends to a proxy), records the
target, connects to it and relays the bytes both ways as they are (the servers behind it accept
the absolute form of later requests on the same connection)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from urllib.parse import urlsplit


@dataclass
class ForwardProxy:
    url: str
    # The first request line of each connection, as the client sent it.
    requests: list[str] = field(default_factory=list)


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    with contextlib.suppress(ConnectionError, OSError):
        writer.close()


@asynccontextmanager
async def running_forward_proxy() -> AsyncIterator[ForwardProxy]:
    """The proxy on a free port of 127.0.0.1, in this event loop."""
    tasks: set[asyncio.Task[None]] = set()
    proxy = ForwardProxy("")

    async def serve(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            head = await client_reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            client_writer.close()
            return
        line = head.split(b"\r\n", 1)[0].decode("latin-1")
        proxy.requests.append(line)
        target = urlsplit(line.split(" ")[1])
        server_reader, server_writer = await asyncio.open_connection(target.hostname, target.port or 80)
        server_writer.write(head)
        pumps = [
            asyncio.ensure_future(_pump(client_reader, server_writer)),
            asyncio.ensure_future(_pump(server_reader, client_writer)),
        ]
        await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        for pump in pumps:
            pump.cancel()
        for writer in (server_writer, client_writer):
            writer.close()

    def serving(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.ensure_future(serve(reader, writer))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    server = await asyncio.start_server(serving, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    proxy.url = f"http://127.0.0.1:{port}"
    try:
        yield proxy
    finally:
        server.close()
        for task in list(tasks):
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
