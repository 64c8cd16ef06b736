"""Where the console lives on the gateway's HTTP server (imported by the front, so kept bare)."""

from __future__ import annotations

__all__ = ["EVENTS", "PREFIX", "is_console_path", "is_event_stream"]

PREFIX = "/console"
# The servers page's live event stream, under PREFIX.
EVENTS = "/servers/events"


def is_console_path(path: str) -> bool:
    return path == PREFIX or path.startswith(PREFIX + "/")


def is_event_stream(path: str) -> bool:
    """A page's live event stream (it runs until the page closes or the gateway stops)."""
    return path == PREFIX + EVENTS
