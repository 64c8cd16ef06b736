"""Where the console lives on the gateway's HTTP server (imported by the front, so kept bare)."""

from __future__ import annotations

__all__ = ["PREFIX", "is_console_path"]

PREFIX = "/console"


def is_console_path(path: str) -> bool:
    return path == PREFIX or path.startswith(PREFIX + "/")
