"""The per-revision MCP fixture servers (``tests/fixtures/protocol/server.py``) as real processes.

``protocol_stdio`` gives the parameters to spawn one over stdio; ``running_protocol_http`` starts one
over streamable HTTP on a free port of 127.0.0.1 (the server picks it and prints it) and stops its
whole process group afterwards.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mcp.client.stdio import StdioServerParameters

__all__ = ["PROTOCOL_SERVER", "Era", "ProtocolHttpServer", "protocol_stdio", "running_protocol_http"]

PROTOCOL_SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "protocol" / "server.py"
Era = Literal["modern", "legacy", "dual"]


def protocol_stdio(era: Era, *flags: str) -> StdioServerParameters:
    """Parameters for ``stdio_client`` / ``Client`` that spawn the fixture for ``era``."""
    return StdioServerParameters(command=sys.executable, args=[str(PROTOCOL_SERVER), "--era", era, *flags])


@dataclass(frozen=True)
class ProtocolHttpServer:
    url: str
    process: subprocess.Popen[bytes]


def _read_announcement(process: subprocess.Popen[bytes], timeout: float) -> str:
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    buffered = b""
    while b"\n" not in buffered:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"the protocol fixture did not announce its port within {timeout}s")
        ready, _, _ = select.select([process.stdout], [], [], remaining)
        if ready:
            chunk = os.read(process.stdout.fileno(), 4096)
            if not chunk:
                raise RuntimeError(
                    f"the protocol fixture exited with status {process.wait(5)} before listening"
                )
            buffered += chunk
    line = buffered.split(b"\n", 1)[0].decode()
    if not line.startswith("listening "):
        raise RuntimeError(f"unexpected first line from the protocol fixture: {line!r}")
    return line.removeprefix("listening ")


@contextmanager
def running_protocol_http(era: Era, *flags: str, timeout: float = 30.0) -> Iterator[ProtocolHttpServer]:
    """The fixture for ``era`` over streamable HTTP on 127.0.0.1, port chosen by the server."""
    process = subprocess.Popen(
        [sys.executable, str(PROTOCOL_SERVER), "--era", era, *flags, "http", "--port", "0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        yield ProtocolHttpServer(url=_read_announcement(process, timeout), process=process)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=5)
        if process.stdout is not None:
            process.stdout.close()
