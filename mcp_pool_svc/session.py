"""One live MCP session to one server, over stdio, SSE or streamable HTTP.

:func:`open_connection` spawns or dials the server, initializes a ``ClientSession`` and yields a
:class:`Connection` that the supervisor keeps open for as long as the server is healthy. Requests
from many callers run concurrently on that one session. The transport's read stream is relayed
through a small forwarder so that the supervisor learns at once when the server goes away
(process exit, broken stream) instead of waiting for the next ping.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import anyio
import httpx2
import mcp_types
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.message import SessionMessage

from mcp_pool_svc.catalog import ListedTool, listed_tool_from_mcp
from mcp_pool_svc.stdio import stdio_transport
from toolscout_kit.config import RemoteServerConfig, StdioServerConfig

__all__ = [
    "Connection",
    "ConnectionEvent",
    "Connector",
    "StderrSink",
    "make_connector",
    "open_connection",
    "transport_name",
]

ConnectionEvent = Literal["closed", "exited", "tools_changed", "stream_error"]
_CLIENT_INFO = mcp_types.Implementation(name="toolscout-mcp-pool", version="0.1.0")
# SSE streams stay open between events; only the connect/write phases use connect_timeout.
_SSE_READ_TIMEOUT = 300.0


def transport_name(config: StdioServerConfig | RemoteServerConfig) -> str:
    """``stdio``, ``sse`` or ``streamable-http``."""
    if isinstance(config, StdioServerConfig):
        return "stdio"
    return config.resolved_transport


@dataclass
class Connection:
    """An initialized session plus what the server said about itself."""

    session: ClientSession
    server_info: str
    closed: anyio.Event

    async def list_tools(self) -> list[ListedTool]:
        """Every tool of the server, following pagination cursors."""
        tools: list[ListedTool] = []
        cursor: str | None = None
        while True:
            params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await self.session.list_tools(params=params)
            tools.extend(listed_tool_from_mcp(t) for t in page.tools)
            cursor = page.next_cursor
            if not cursor:
                return tools

    async def ping(self) -> None:
        await self.session.send_ping()


class Connector(Protocol):
    """Opens a connection; the supervisor depends on this, so tests can pass their own."""

    def __call__(
        self,
        name: str,
        config: StdioServerConfig | RemoteServerConfig,
        on_event: Callable[[ConnectionEvent, str], None],
    ) -> AbstractAsyncContextManager[Connection]: ...


async def _forward(
    source: ObjectReceiveStream[SessionMessage | Exception],
    sink: ObjectSendStream[SessionMessage | Exception],
    closed: anyio.Event,
    on_event: Callable[[ConnectionEvent, str], None],
) -> None:
    try:
        async with sink:
            async for item in source:
                # Exceptions (unparsable lines) pass through; the session's message handler reports them.
                await sink.send(item)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
        pass
    finally:
        closed.set()
        on_event("closed", "connection closed by the server")


def _transport(
    config: StdioServerConfig | RemoteServerConfig,
    on_event: Callable[[ConnectionEvent, str], None],
    *,
    base_dir: Path,
    on_stderr: Callable[[str], None],
    max_line_bytes: int,
) -> AbstractAsyncContextManager[Any]:
    if isinstance(config, StdioServerConfig):
        cwd = Path(os.path.expanduser(config.cwd)) if config.cwd else base_dir
        if not cwd.is_absolute():
            cwd = base_dir / cwd
        return stdio_transport(
            config.command,
            config.args,
            env=config.env,
            cwd=cwd,
            on_exit=lambda detail: on_event("exited", detail),
            on_stderr=on_stderr,
            max_line_bytes=max_line_bytes,
        )
    return _remote_transport(config)


@asynccontextmanager
async def _remote_transport(config: RemoteServerConfig) -> AsyncIterator[Any]:
    timeout = httpx2.Timeout(config.connect_timeout, read=_SSE_READ_TIMEOUT)
    if config.resolved_transport == "sse":
        async with sse_client(
            config.url,
            headers=config.headers,
            timeout=config.connect_timeout,
            sse_read_timeout=_SSE_READ_TIMEOUT,
        ) as streams:
            yield streams
        return
    async with (
        create_mcp_http_client(headers=config.headers, timeout=timeout) as client,
        streamable_http_client(config.url, http_client=client) as streams,
    ):
        yield streams


def _message_handler(on_event: Callable[[ConnectionEvent, str], None]) -> Any:
    async def handle(message: Any) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            on_event("tools_changed", "")
        elif isinstance(message, Exception):
            on_event("stream_error", f"invalid message from the server: {type(message).__name__}")

    return handle


# Logs one stderr line of a server (masked) and returns the masked line.
StderrSink = Callable[[str, str], str]
# The last stderr line a failed start is reported with is cut to this many characters.
_LAST_STDERR_CHARS = 300


def make_connector(*, base_dir: Path, stderr_sink: StderrSink, max_line_bytes: int) -> Connector:
    """The real connector: stdio paths resolve against ``base_dir`` (the config file's folder).

    Each line a stdio server writes to stderr goes to ``stderr_sink(server_name, line)``; a reply
    line longer than ``max_line_bytes`` is refused (see :mod:`mcp_pool_svc.stdio`). When the process
    exits, the exit event carries its last stderr line (masked): usually the reason it could not
    start ("ModuleNotFoundError: ...").
    """

    def connect(
        name: str,
        config: StdioServerConfig | RemoteServerConfig,
        on_event: Callable[[ConnectionEvent, str], None],
    ) -> AbstractAsyncContextManager[Connection]:
        last: list[str] = []

        def stderr(line: str) -> None:
            last[:] = [stderr_sink(name, line)]

        def event(kind: ConnectionEvent, detail: str) -> None:
            if kind == "exited" and last:
                line = last[0] if len(last[0]) <= _LAST_STDERR_CHARS else last[0][:_LAST_STDERR_CHARS] + "..."
                detail = f"{detail}; its last stderr line: {line}"
            on_event(kind, detail)

        return open_connection(
            config, event, base_dir=base_dir, on_stderr=stderr, max_line_bytes=max_line_bytes
        )

    return connect


@asynccontextmanager
async def open_connection(
    config: StdioServerConfig | RemoteServerConfig,
    on_event: Callable[[ConnectionEvent, str], None],
    *,
    base_dir: Path,
    on_stderr: Callable[[str], None],
    max_line_bytes: int,
) -> AsyncIterator[Connection]:
    """Connects and initializes within ``config.connect_timeout``.

    Raises:
        TimeoutError: the server did not answer ``initialize`` in time.
        OSError: the command could not be started.
        mcp.MCPError: the server refused or closed the connection.
    """
    async with AsyncExitStack() as stack:
        # Not under fail_after: the transport's task group must not be entered inside a scope that
        # ends before it. Spawning is immediate and SSE's connect is bounded by its HTTP timeout.
        read, write = await stack.enter_async_context(
            _transport(
                config, on_event, base_dir=base_dir, on_stderr=on_stderr, max_line_bytes=max_line_bytes
            )
        )
        relay_send, relay_recv = anyio.create_memory_object_stream[SessionMessage | Exception](16)
        stack.push_async_callback(relay_recv.aclose)
        closed = anyio.Event()
        tg = await stack.enter_async_context(anyio.create_task_group())
        tg.start_soon(_forward, read, relay_send, closed, on_event)
        # LIFO: the session exits first, then the forwarder is cancelled, then the transport closes.
        stack.callback(tg.cancel_scope.cancel)
        session = await stack.enter_async_context(
            ClientSession(
                relay_recv, write, message_handler=_message_handler(on_event), client_info=_CLIENT_INFO
            )
        )
        with anyio.fail_after(config.connect_timeout):
            init = await session.initialize()
        info = init.server_info
        yield Connection(session=session, server_info=f"{info.name} {info.version}".strip(), closed=closed)
