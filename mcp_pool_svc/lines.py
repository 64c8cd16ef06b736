"""Splitting a byte stream into lines in linear time, with a cap on the length of one line.

A stdio MCP server sends one JSON-RPC message per line, and a tool result can make that line
tens of megabytes long. :class:`LineSplitter` looks for newlines only in the bytes it has just
received and joins a line's pieces once, when the line ends, so reading is linear in its size.
A line longer than the cap is not kept: the splitter keeps only its first and last few
kilobytes (enough to find the JSON-RPC ``id`` so the one call can be refused) and its length.
:func:`parse_message` reads the JSON-RPC message of a line (or of an SSE event).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import mcp_types

from toolscout_kit.json_text import server_json

__all__ = ["LineSplitter", "OversizedLine", "parse_message", "request_id_of"]

# How much of an oversized line is kept at each end.
_EDGE = 4096


@dataclass(frozen=True)
class OversizedLine:
    """A line longer than the cap: its size and its two ends, never its whole content."""

    size: int
    head: bytes
    tail: bytes


class LineSplitter:
    """Feed it chunks; it returns the complete lines (without the newline) each chunk finished.

    Memory held between calls stays below ``max_line_bytes`` plus one chunk, however long a line.
    """

    def __init__(self, max_line_bytes: int) -> None:
        self._limit = max_line_bytes
        self._parts: list[bytes] = []
        self._size = 0
        self._oversized = False
        self._head = b""
        self._tail = b""

    @property
    def buffered_bytes(self) -> int:
        """Bytes held for the line in progress."""
        return self._size if not self._oversized else len(self._head) + len(self._tail)

    def feed(self, chunk: bytes) -> list[bytes | OversizedLine]:
        out: list[bytes | OversizedLine] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if piece:
                self._add(piece)
            if end < 0:
                return out
            out.append(self._finish())
            start = end + 1

    def _add(self, piece: bytes) -> None:
        if self._oversized:
            self._size += len(piece)
            self._tail = (self._tail + piece[-_EDGE:])[-_EDGE:]
            return
        self._parts.append(piece)
        self._size += len(piece)
        if self._size > self._limit:
            whole = b"".join(self._parts)
            self._parts = []
            self._oversized = True
            self._head = whole[:_EDGE]
            self._tail = whole[-_EDGE:]

    def _finish(self) -> bytes | OversizedLine:
        if self._oversized:
            line: bytes | OversizedLine = OversizedLine(self._size, self._head, self._tail)
        else:
            line = self._parts[0] if len(self._parts) == 1 else b"".join(self._parts)
        self._parts = []
        self._size = 0
        self._oversized = False
        self._head = self._tail = b""
        return line


_ID = rb'(-?\d+|"(?:[^"\\]|\\.)*")'
# Python SDKs write "jsonrpc" and "id" first; the TypeScript SDK writes the result first and
# "id" last. A nested "id" (inside a result) can be neither the first key nor the last one.
_ID_FIRST = re.compile(rb'^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*' + _ID)
_ID_LAST = re.compile(rb'"id"\s*:\s*' + _ID + rb'\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*$')


def request_id_of(line: OversizedLine) -> int | str | None:
    """The JSON-RPC ``id`` of an oversized message when its ends show it, else None."""
    found = _ID_FIRST.search(line.head) or _ID_LAST.search(line.tail)
    if found is None:
        return None
    raw = found.group(1)
    if raw.startswith(b'"'):
        return raw[1:-1].decode("utf-8", errors="replace")
    return int(raw)


def parse_message(data: str | bytes) -> mcp_types.JSONRPCMessage:
    """The JSON-RPC message in ``data``, as the SDK's transports read one (pydantic's strict
    JSON), except that a lone surrogate escape (``"\\ud800"``), which that parser refuses, is read
    as U+FFFD (:func:`~toolscout_kit.json_text.server_json`): a server that sends one still has
    its answer read, instead of the call waiting for its timeout.

    Raises:
        ValueError: not a JSON-RPC message (pydantic's ``ValidationError``).
    """
    try:
        return mcp_types.jsonrpc_message_adapter.validate_json(data, by_name=False)
    except ValueError:
        lenient = server_json(data)
        if lenient is None:
            raise
        return mcp_types.jsonrpc_message_adapter.validate_python(lenient, by_name=False)
