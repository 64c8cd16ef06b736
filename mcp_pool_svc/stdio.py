"""A stdio transport that owns its server's whole process tree and reads its output linearly.

The SDK's ``stdio_client`` stops the process tree only when the server itself is still running at
shutdown; a server that crashed leaves its own children behind. Here the server starts in a new
session (its own process group), tagged in its environment, and shutdown always ends by
signalling that group and then every process the server left behind, even one that detached
itself with ``setsid`` (:mod:`mcp_pool_svc.reaper`). So no descendant survives a crash, a restart
or the pool's shutdown.

stdout is split into lines by :class:`~mcp_pool_svc.lines.LineSplitter` (linear in the size of a
line). A line longer than ``max_line_bytes`` is never held whole: when its JSON-RPC id can be read
from its ends, the call it answers gets an error (:data:`OVERSIZED_REPLY`) and the session goes
on; otherwise the session ends and is restarted. stderr is read line by line and handed to
``on_stderr`` (the pool redacts and logs it). The exit status is reported once, before the
transport's exit, for every process that ended by itself (a crash, an exit at start).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread
import mcp_types
from anyio.abc import ByteReceiveStream, ByteSendStream, ObjectReceiveStream, ObjectSendStream, Process
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from mcp_pool_svc.lines import LineSplitter, OversizedLine, parse_message, request_id_of
from mcp_pool_svc.reaper import SERVER_TAG_ENV, Reaper, descendants_of, kill_leftovers, new_server_tag
from toolscout_kit.logging import get_logger

__all__ = ["OVERSIZED_REPLY", "describe_exit", "stdio_transport"]

log = get_logger(__name__)

# Time the server gets to exit after its stdin closes, then after SIGTERM, before SIGKILL.
EXIT_GRACE = 2.0
TERM_GRACE = 2.0
_POLL = 0.01
# JSON-RPC error code of the error this transport answers in place of an oversized reply.
OVERSIZED_REPLY = -32090
_READ_CHUNK = 1 << 18
# Lines this long are parsed off the event loop, so that other servers' calls keep flowing.
_THREAD_PARSE_BYTES = 1 << 20
# A stderr line longer than this is cut (the rest of it is dropped, not buffered).
STDERR_LINE_BYTES = 8192


def describe_exit(status: int | None) -> str:
    """How a server process ended, for ``last_error``."""
    if status is None:
        return "the server process ended"
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = f"signal {-status}"
        return f"the server process was killed by {name}"
    return f"the server process exited with status {status}"


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(parse_message(line))
    except ValueError as err:
        # Passed on as a value: the session reports it and keeps reading.
        return err


def _refusal(line: OversizedLine, limit: int) -> SessionMessage | None:
    """The error answer to the call an oversized reply was for, or None if the id is unreadable."""
    request_id = request_id_of(line)
    if request_id is None:
        return None
    error = {
        "code": OVERSIZED_REPLY,
        "message": f"the server's reply is {line.size} bytes, more than the {limit}-byte limit",
        "data": {"size": line.size, "limit": limit},
    }
    raw = json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error})
    return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(raw, by_name=False))


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


async def _wait_group_gone(pgid: int, seconds: float, reaper: Reaper) -> bool:
    with anyio.move_on_after(seconds):
        while True:
            # A member that exited stays in the group until it is reaped: an orphan re-parented
            # to the pool (the wrapper that started it was killed) is reaped here, not waited out.
            reaper.sweep()
            if not _signal_group(pgid, 0):
                return True
            # Nothing signals that a process group emptied: poll, bounded by ``seconds``.
            await anyio.sleep(_POLL)
    return False


async def _stop(
    process: Process, exited: anyio.Event, tag: str, before_signal: Callable[[], None], reaper: Reaper
) -> None:
    """Stops the server and everything it started; ``before_signal()`` runs before it is signalled."""
    pgid = process.pid
    # Seen while the server still runs: children that cleared their environment are among them.
    known = descendants_of(process.pid)
    if process.stdin is not None:
        with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdin.aclose()
    # MCP's shutdown sequence: stdin closed, a grace period, then SIGTERM, then SIGKILL. The group
    # is signalled even when the leader is already gone, since its children may not be.
    if not await _wait_exit(process, exited, EXIT_GRACE):
        before_signal()
    # SIGCONT too: a stopped (SIGSTOP, a debugger) process only acts on SIGTERM once continued.
    if (
        _signal_group(pgid, signal.SIGTERM)
        and _signal_group(pgid, signal.SIGCONT)
        and not await _wait_group_gone(pgid, TERM_GRACE, reaper)
    ):
        _signal_group(pgid, signal.SIGKILL)
        await _wait_group_gone(pgid, TERM_GRACE, reaper)
    await _wait_exit(process, exited, TERM_GRACE)
    await kill_leftovers(process.pid, tag, TERM_GRACE, known=known)
    with anyio.move_on_after(TERM_GRACE), suppress(OSError, anyio.BrokenResourceError):
        await process.aclose()


async def _pump_stderr(stream: ByteReceiveStream, on_stderr: Callable[[str], None]) -> None:
    splitter = LineSplitter(STDERR_LINE_BYTES)

    def emit(line: bytes | OversizedLine) -> None:
        if isinstance(line, OversizedLine):
            text = f"{line.head.decode(errors='replace')}... [line of {line.size} bytes cut]"
        else:
            text = line.decode(errors="replace")
        if text.strip():
            on_stderr(text.rstrip("\r"))

    try:
        async for chunk in stream:
            for line in splitter.feed(chunk):
                emit(line)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError):
        pass


class _ExitReport:
    """Reports the exit status once, and only for a process that ended by itself."""

    def __init__(self, process: Process, on_exit: Callable[[str], None]) -> None:
        self._process = process
        self._on_exit = on_exit
        self._done = False

    def stopping(self) -> None:
        # From here on the pool is signalling the process: how it ends is our doing.
        self._done = True

    def send(self) -> None:
        if not self._done:
            self._done = True
            self._on_exit(describe_exit(self._process.returncode))


async def _pump_stdout(
    stdout: ByteReceiveStream, sink: ObjectSendStream[SessionMessage | Exception], max_line_bytes: int
) -> None:
    """Passes each line on as a message until EOF (or until an oversized reply cannot be matched)."""
    splitter = LineSplitter(max_line_bytes)
    while True:
        chunk = await stdout.receive(_READ_CHUNK)
        for line in splitter.feed(chunk):
            if isinstance(line, OversizedLine):
                refusal = _refusal(line, max_line_bytes)
                if refusal is None:
                    # Nothing tells which call it answered: end the session for a clean restart.
                    log.warning("mcp_reply_too_large_unmatched", bytes=line.size)
                    return
                log.warning("mcp_reply_too_large", bytes=line.size, limit=max_line_bytes)
                await sink.send(refusal)
            elif line.strip():
                if len(line) >= _THREAD_PARSE_BYTES:
                    await sink.send(await anyio.to_thread.run_sync(_parse, line))
                else:
                    await sink.send(_parse(line))


async def _pump_stdin(
    messages: ObjectReceiveStream[SessionMessage],
    stdin: ByteSendStream,
    read_side: ObjectSendStream[SessionMessage | Exception],
) -> None:
    """Writes the session's messages to the server, one JSON line each."""
    try:
        async with messages:
            async for message in messages:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                await stdin.send(data.encode())
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        # The server stopped reading: end the read side so pending requests fail fast.
        await read_side.aclose()


@asynccontextmanager
async def stdio_transport(
    command: str,
    args: list[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    on_exit: Callable[[str], None],
    on_stderr: Callable[[str], None],
    max_line_bytes: int,
    reaper: Reaper,
) -> AsyncIterator[tuple[Any, Any]]:
    """Starts the server and yields ``(read_stream, write_stream)`` for a ``ClientSession``.

    ``on_exit`` receives :func:`describe_exit` of a process that ended by itself (not of one the
    pool stopped), at the latest when the transport exits. The server's session is registered
    with ``reaper`` until its whole process tree is gone.

    Raises:
        OSError: the command cannot be started (not found, not executable, bad cwd).
    """
    tag = new_server_tag()
    process = await anyio.open_process(
        [command, *args],
        env={**get_default_environment(), **env, SERVER_TAG_ENV: tag},
        cwd=cwd,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    reaper.register(process.pid)
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    exited = anyio.Event()

    exit_report = _ExitReport(process, on_exit)

    async def reader() -> None:
        assert process.stdout is not None
        try:
            async with read_writer:
                await _pump_stdout(process.stdout, read_writer, max_line_bytes)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError):
            pass

    async def watcher() -> None:
        await _watch_exit(process, exited)
        exit_report.send()
        # Children may still hold stdout open, so EOF may never come: end the session's read
        # side now so that the supervisor sees the loss at once.
        await read_writer.aclose()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            assert process.stdin is not None
            tg.start_soon(_pump_stdin, write_reader, process.stdin, read_writer)
            tg.start_soon(watcher)
            assert process.stderr is not None
            tg.start_soon(_pump_stderr, process.stderr, on_stderr)
            try:
                yield read_stream, write_stream
            finally:
                # Shielded so that a cancelled caller still leaves no process behind; every wait
                # inside is bounded.
                with anyio.CancelScope(shield=True):
                    # A process that already ended did so by itself: report it before stopping.
                    if process.returncode is not None or exited.is_set():
                        exit_report.send()
                    await _stop(process, exited, tag, exit_report.stopping, reaper)
                    exit_report.send()
                tg.cancel_scope.cancel()
    finally:
        reaper.unregister(process.pid)
        for stream in (read_stream, write_stream, read_writer, write_reader):
            stream.close()
