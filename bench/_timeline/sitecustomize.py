"""Timeline marks for ``bench/call_timeline.py``: loaded by every process of the measured stack
(its folder goes first on their ``PYTHONPATH``), it wraps a few functions on a call's path as their
modules load and appends ``<mark> <perf_counter_ns>`` to the file ``TOOLSCOUT_TIMELINE`` names. The
services' code is not changed; a function that is not there any more leaves its mark out.

``time.perf_counter_ns`` is CLOCK_MONOTONIC on Linux: one clock for every process of the machine.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import os
import sys
import time
from typing import Any

_PATH = os.environ.get("TOOLSCOUT_TIMELINE", "")
_FD = os.open(_PATH, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600) if _PATH else None


def mark(name: str) -> None:
    if _FD is not None:
        os.write(_FD, f"{name} {time.perf_counter_ns()}\n".encode())


def _around(function: Any, enter: str, leave: str) -> Any:
    @functools.wraps(function)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        mark(enter)
        try:
            return await function(*args, **kwargs)
        finally:
            mark(leave)

    return wrapper


def _enter(function: Any, name: str) -> Any:
    """A plain function marked as it is called."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        mark(name)
        return function(*args, **kwargs)

    return wrapper


def _front(function: Any) -> Any:
    """The gateway's ASGI entry: G1 as a request arrives, G4 as its answer starts to go out."""

    @functools.wraps(function)
    async def wrapper(self: Any, scope: Any, receive: Any, send: Any) -> Any:
        mark("G1")

        async def marked_send(message: Any) -> None:
            if message.get("type") == "http.response.start":
                mark("G4")
            await send(message)

        return await function(self, scope, receive, marked_send)

    return wrapper


# module -> [(class name or "" for a module's function, attribute, wrap)]
_TARGETS: dict[str, list[tuple[str, str, Any]]] = {
    "mcp_gateway_svc.front": [("GatewayFront", "__call__", _front)],
    "toolscout.client.aio": [("AsyncPoolClient", "call", lambda f: _around(f, "G2", "G3"))],
    # The call stream: the gateway's write of the call (entered / returned: gRPC reported it
    # written), the answer handed to the waiting call.
    "toolscout.client.call_stream": [
        ("_Open", "write", lambda f: _around(f, "Gw", "Gx")),
        ("", "_deliver", lambda f: _enter(f, "Gd")),
    ],
    # The pool's side of it: the call read off the stream, its answer's write entered / returned.
    "mcp_pool_svc.servicer": [
        ("CallStreams", "_take", lambda f: _enter(f, "Pr")),
        ("_Stream", "answer", lambda f: _around(f, "Pa", "Pb")),
    ],
    "mcp_pool_svc.pool": [("McpPool", "call", lambda f: _around(f, "P1", "P4"))],
    # The POST itself: on the pool's HTTP/1.1 connection directly, or through httpx2 (the first
    # mark a call passes counts).
    "mcp_pool_svc.lean": [
        ("LeanPost", "_post_direct", lambda f: _around(f, "P2", "P3")),
        ("LeanPost", "_post", lambda f: _around(f, "P2", "P3")),
    ],
}


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: Any, name: str) -> None:
        self._inner = inner
        self._name = name

    def create_module(self, spec: Any) -> Any:
        return self._inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._inner.exec_module(module)
        for cls_name, attribute, wrap in _TARGETS[self._name]:
            owner = getattr(module, cls_name, None) if cls_name else module
            if owner is not None and attribute in vars(owner):
                setattr(owner, attribute, wrap(vars(owner)[attribute]))


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in _TARGETS:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader, name)
        return spec


if _FD is not None:
    sys.meta_path.insert(0, _Finder())
