"""No process an MCP server started outlives it, even one that left the server's process group.

Killing a stdio server's process group reaches its children, but not a child that called
``setsid`` (node's ``spawn(..., {detached: true})`` does): that one has its own session and group,
and when the server dies it is re-parented away. Two things catch it here:

* every server starts with a tag in its environment (``TOOLSCOUT_MCP_SERVER_ID``), which its
  descendants inherit, so they can be found wherever they were re-parented;
* the pool makes itself a *child subreaper* (Linux ``prctl(PR_SET_CHILD_SUBREAPER)``), so orphans
  of its servers are re-parented to the pool rather than to init: they stay in the pool's tree,
  and the pool reaps the ones it kills.

When a server's connection ends, :func:`kill_leftovers` signals every process of that server:
its descendants at that moment and every process carrying its tag.

A subreaper must also collect the exit status of every orphan that lands on it, whenever it exits
(a wrapper's server after the wrapper was killed, a daemon a server double-forked), or each stays
a ``<defunct>`` entry. :class:`Reaper` does, for the processes of the servers the pool started:
each server runs in a session of its own, registered for as long as its process tree lives, and
an exited child of the pool in a registered session is reaped — never the server process itself
(its transport waits for it), and never a child of anything else in the process (a test, ``toolscout
up``), whose owner waits for it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import uuid
from collections.abc import Iterable
from pathlib import Path

import anyio

from toolscout_kit.logging import get_logger

__all__ = [
    "SERVER_TAG_ENV",
    "Reaper",
    "become_subreaper",
    "descendants_of",
    "kill_leftovers",
    "new_server_tag",
]

log = get_logger(__name__)

SERVER_TAG_ENV = "TOOLSCOUT_MCP_SERVER_ID"
_PR_SET_CHILD_SUBREAPER = 36
_PROC = Path("/proc")
_POLL = 0.02
# Seconds between two looks for exited children (one waitid call when there are none).
REAP_INTERVAL = 0.5


def become_subreaper() -> bool:
    """Makes orphaned descendants of this process its children (Linux); False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def new_server_tag() -> str:
    """A tag for one server process (put in its environment as ``SERVER_TAG_ENV``)."""
    return uuid.uuid4().hex


def _fields(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first), or None once gone."""
    try:
        raw = (_PROC / str(pid) / "stat").read_bytes()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ")".
    return raw[raw.rfind(b")") + 2 :].split()


def _stat(pid: int) -> tuple[str, int] | None:
    """``(state, ppid)`` of a process, or None once it is gone."""
    fields = _fields(pid)
    return None if fields is None else (fields[0].decode(), int(fields[1]))


def _parents() -> dict[int, int]:
    table: dict[int, int] = {}
    for entry in _PROC.iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None:
                table[int(entry.name)] = stat[1]
    return table


def _descendants(roots: Iterable[int], parents: dict[int, int]) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    stack = list(roots)
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def descendants_of(pid: int) -> set[int]:
    """The live descendants of ``pid`` now (empty where /proc is missing)."""
    if not _PROC.is_dir():
        return set()
    return _descendants([pid], _parents())


def _tagged(pids: Iterable[int], tag: str) -> set[int]:
    needle = f"{SERVER_TAG_ENV}={tag}".encode()
    found = set()
    for pid in pids:
        try:
            environ = (_PROC / str(pid) / "environ").read_bytes()
        except OSError:
            continue  # gone, or another user's process
        if needle in environ.split(b"\0"):
            found.add(pid)
    return found


def _alive(pid: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


def _reap(pids: Iterable[int]) -> None:
    # Orphans re-parented to us are our children now: collect their exit status so they do not
    # stay zombies. Only those: the server processes themselves belong to the transport.
    me = os.getpid()
    for pid in pids:
        stat = _stat(pid)
        if stat is not None and stat[1] == me:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)


class Reaper:
    """Reaps the exited processes of the MCP servers' sessions that were left to this process.

    ``register(leader)`` when a server starts (it leads its own session), ``unregister`` once its
    whole tree is gone; :meth:`sweep` collects what exited (the stdio transport sweeps while it
    waits for a process group to empty), and :meth:`run` sweeps every ``REAP_INTERVAL`` seconds
    for the orphans that exit while their server runs.
    """

    def __init__(self) -> None:
        self._sessions: set[int] = set()
        self.reaped = 0

    @property
    def serving(self) -> int:
        """How many servers' sessions are registered: their transports have not finished stopping."""
        return len(self._sessions)

    def register(self, leader: int) -> None:
        self._sessions.add(leader)

    def unregister(self, leader: int) -> None:
        self.sweep()
        self._sessions.discard(leader)

    def sweep(self) -> int:
        """Reaps every exited child of this process in a registered session (not a leader)."""
        if not self._sessions:
            return 0
        try:
            # Peeks (WNOWAIT): is any child waiting to be reaped at all? One call, nothing taken.
            if os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
                return 0
        except ChildProcessError:
            return 0
        if not _PROC.is_dir():
            return 0
        me = os.getpid()
        reaped = 0
        for entry in _PROC.iterdir():
            if not entry.name.isdigit() or int(entry.name) in self._sessions:
                continue
            fields = _fields(int(entry.name))
            # state, ppid, pgrp, session: an exited child of ours in a server's session.
            if fields is None or fields[0] != b"Z" or int(fields[1]) != me:
                continue
            if int(fields[3]) in self._sessions:
                with contextlib.suppress(ChildProcessError, OSError):
                    if os.waitpid(int(entry.name), os.WNOHANG)[0]:
                        reaped += 1
        self.reaped += reaped
        return reaped

    async def run(self, interval: float = REAP_INTERVAL) -> None:
        """Sweeps until cancelled."""
        while True:
            self.sweep()
            await anyio.sleep(interval)


def _signal(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _leftovers(server_pid: int, tag: str, known: Iterable[int]) -> set[int]:
    if not _PROC.is_dir():
        return set()
    parents = _parents()
    alive_known = {pid for pid in known if pid in parents}
    own = _descendants([server_pid], parents) | _tagged(parents, tag) | alive_known
    return (own | _descendants(own, parents)) - {server_pid, os.getpid()}


async def kill_leftovers(server_pid: int, tag: str, grace: float, *, known: Iterable[int] = ()) -> set[int]:
    """SIGTERM, then after ``grace`` seconds SIGKILL, every process the server left behind.

    Those are the server's descendants (now, plus ``known``: those seen while it still ran) and
    every process whose environment carries ``tag``, with their own descendants. The server
    process itself is left to its transport. Returns the pids that were signalled.
    """
    own = _leftovers(server_pid, tag, known)
    if not own:
        return set()
    log.info("mcp_server_leftovers", pids=sorted(own), count=len(own))
    _signal(own, signal.SIGTERM)
    # Another process's exit gives us no event to wait on: poll, bounded by the grace.
    with anyio.move_on_after(grace):
        while any(_alive(pid) for pid in own):
            _reap(own)
            await anyio.sleep(_POLL)
    _signal([pid for pid in own if _alive(pid)], signal.SIGKILL)
    with anyio.move_on_after(grace):
        while any(_alive(pid) for pid in own):  # noqa: ASYNC110 - as above, no exit event
            await anyio.sleep(_POLL)
    _reap(own)
    return own
