"""Handing the C heap's freed memory back to the operating system after a large catalog.

A catalog of 50,000 tools is built, sent and decoded as large transient objects (protobuf
messages, their serialized bytes, Python dicts). Once they are freed, glibc's allocator keeps most
of that memory for later use instead of returning it, so a process's RSS stays at its peak: about
35 MB in the pool after serving the 1,000-server fleet's catalog to discovery and the gateway
(bench/README, "Memory after a large catalog"). :func:`release_soon` asks glibc to give it back
(``malloc_trim(0)``) shortly after such work, once the bytes have left; where the C library is not
glibc it does nothing.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import functools
import time
from collections.abc import Callable

from toolscout_kit.logging import get_logger

__all__ = ["LARGE_CATALOG_TOOLS", "release_freed_memory", "release_soon"]

_log = get_logger(__name__)

# A catalog (or a list of tools) at least this long is worth a trim once it is done with.
LARGE_CATALOG_TOOLS = 1_000
# Seconds after the large work before the trim: its bytes have been written by then, and several
# pieces of work in that time share one trim.
_DELAY = 1.0


class _Schedule:
    """When the trim scheduled last is due (``time.monotonic``): until then, more work shares it."""

    due = 0.0


_SCHEDULE = _Schedule()


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library has none (musl, macOS)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def release_freed_memory() -> bool:
    """Returns the C heap's free memory to the operating system now; False where that cannot be
    done (not glibc) or there was nothing to return."""
    trim = _malloc_trim()
    return bool(trim(0)) if trim is not None else False


def release_soon(tools: int = LARGE_CATALOG_TOOLS) -> None:
    """After work on a catalog of ``tools`` tools: :func:`release_freed_memory` about a second from
    now on the running loop (one trim for all the work of that second), when ``tools`` is at least
    :data:`LARGE_CATALOG_TOOLS`; nothing for a small catalog, or outside an event loop."""
    if tools < LARGE_CATALOG_TOOLS or _malloc_trim() is None:
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    now = time.monotonic()
    if now < _SCHEDULE.due:
        return
    _SCHEDULE.due = now + _DELAY
    loop.call_later(_DELAY, _trim)


def _trim() -> None:
    released = release_freed_memory()
    _log.debug("freed memory handed back to the operating system", released=released)
