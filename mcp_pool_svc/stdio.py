"""A stdio transport that owns its server's whole process group.

The SDK's ``stdio_client`` stops the process tree only when the server itself is still running at
shutdown; a server that crashed leaves its own children behind. Here the server starts in a new
session (its own process group) and shutdown always ends by signalling that group, so no
descendant survives a crash, a restart or the pool's shutdown. The exit status is reported too,
which makes "exits at start" diagnosable from ``ListServers``.
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any, TextIO

import anyio
import anyio.lowlevel
import mcp_types
from anyio.abc import Process
from anyio.streams.text import TextReceiveStream
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

__all__ = ["stdio_transport"]

# Time the server gets to exit after its stdin closes, then after SIGTERM, before SIGKILL.
EXIT_GRACE = 2.0
TERM_GRACE = 2.0
_POLL = 0.01


def _parse(line: str) -> SessionMessage | Exception:
    try:
        return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as err:
        # Passed on as a value: the session reports it and keeps reading.
        return err


def _signal_group(pgid: int, sig: int) -> bool:
    """Signals the group; False once no member is left."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


async def _watch_exit(process: Process, exited: anyio.Event) -> None:
    """Sets ``exited`` when the server process ends, even if its children keep the pipes open."""
    try:
        pidfd = os.pidfd_open(process.pid)
    except (AttributeError, OSError):
        pidfd = None
    if pidfd is not None:
        try:
            # A pidfd becomes readable when the process exits: an event, not a poll.
            await anyio.wait_readable(pidfd)
        finally:
            os.close(pidfd)
    while process.returncode is None:  # noqa: ASYNC110 - no exit event without pidfd; reaping may lag
        await anyio.sleep(_POLL)
    exited.set()


async def _wait_exit(process: Process, exited: anyio.Event, seconds: float) -> bool:
    # The watcher may have been cancelled with its task group (a cancelled connect), so the
    # return code is checked too; each wait on the event is short for that reason.
    with anyio.move_on_after(seconds):
        while process.returncode is None and not exited.is_set():
            with anyio.move_on_after(_POLL * 5):
                await exited.wait()
        return True
    return False


async def _wait_group_gone(pgid: int, seconds: float) -> bool:
    with anyio.move_on_after(seconds):
        while _signal_group(pgid, 0):  # noqa: ASYNC110 - nothing signals that a process group emptied
            await anyio.sleep(_POLL)
        return True
    return False


async def _stop(process: Process, exited: anyio.Event) -> None:
    pgid = process.pid
    if process.stdin is not None:
        with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdin.aclose()
    # MCP's shutdown sequence: stdin closed, a grace period, then SIGTERM, then SIGKILL. The group
    # is signalled even when the leader is already gone, since its children may not be.
    await _wait_exit(process, exited, EXIT_GRACE)
    if _signal_group(pgid, signal.SIGTERM) and not await _wait_group_gone(pgid, TERM_GRACE):
        _signal_group(pgid, signal.SIGKILL)
        await _wait_group_gone(pgid, TERM_GRACE)
    await _wait_exit(process, exited, TERM_GRACE)
    with anyio.move_on_after(TERM_GRACE), suppress(OSError, anyio.BrokenResourceError):
        await process.aclose()


@asynccontextmanager
async def stdio_transport(
    command: str,
    args: list[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    errlog: TextIO,
    on_exit: Callable[[int | None], None],
) -> AsyncIterator[tuple[Any, Any]]:
    """Starts the server and yields ``(read_stream, write_stream)`` for a ``ClientSession``.

    Raises:
        OSError: the command cannot be started (not found, not executable, bad cwd).
    """
    process = await anyio.open_process(
        [command, *args],
        env={**get_default_environment(), **env},
        cwd=cwd,
        stderr=errlog,
        start_new_session=True,
    )
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    exited = anyio.Event()

    async def reader() -> None:
        assert process.stdout is not None
        buffer = ""
        try:
            async with read_writer:
                async for chunk in TextReceiveStream(process.stdout, errors="replace"):
                    lines = (buffer + chunk).split("\n")
                    buffer = lines.pop()
                    for line in lines:
                        if line.strip():
                            await read_writer.send(_parse(line))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError):
            pass

    async def watcher() -> None:
        await _watch_exit(process, exited)
        on_exit(process.returncode)
        # Children may still hold stdout open, so EOF may never come: end the session's read
        # side now so that the supervisor sees the loss at once.
        await read_writer.aclose()

    async def writer() -> None:
        assert process.stdin is not None
        try:
            async with write_reader:
                async for message in write_reader:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await process.stdin.send(data.encode())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            # The server stopped reading: end the read side so pending requests fail fast.
            await read_writer.aclose()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            tg.start_soon(writer)
            tg.start_soon(watcher)
            try:
                yield read_stream, write_stream
            finally:
                # Shielded so that a cancelled caller still leaves no process behind; every wait
                # inside is bounded.
                with anyio.CancelScope(shield=True):
                    await _stop(process, exited)
                tg.cancel_scope.cancel()
    finally:
        for stream in (read_stream, write_stream, read_writer, write_reader):
            stream.close()
