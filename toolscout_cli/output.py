"""Output for people (aligned tables, one-line messages) and for programs (``--json``)."""

from __future__ import annotations

import base64
import dataclasses
import json
import shutil
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO, TypeVar

__all__ = ["Output", "to_jsonable", "truncate"]

T = TypeVar("T")


def to_jsonable(value: Any) -> Any:
    """Dataclasses, tuples and bytes (base64) as plain JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return value


def truncate(text: str, width: int) -> str:
    """One line of at most ``width`` characters (an ellipsis marks the cut)."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[: max(width - 1, 0)] + "…"


class Output:
    """Where a command writes: stdout for results, stderr for progress and errors."""

    def __init__(self, *, json_mode: bool, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.json_mode = json_mode
        self.out = out or sys.stdout
        self.err = err or sys.stderr

    def line(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    def note(self, text: str) -> None:
        """Progress or hints for a person (stderr, so stdout stays clean for pipes)."""
        print(text, file=self.err, flush=True)

    def json(self, value: Any) -> None:
        print(json.dumps(to_jsonable(value), ensure_ascii=False), file=self.out, flush=True)

    def listing(
        self,
        key: str,
        items: Sequence[T],
        *,
        empty: str,
        headers: Sequence[str],
        row: Callable[[T], Sequence[Any]],
    ) -> None:
        """What a listing command prints: ``{key: items}`` in JSON mode; else a table with a
        ``row`` per item, or the ``empty`` message when there is none."""
        if self.json_mode:
            self.json({key: items})
        elif not items:
            self.line(empty)
        else:
            self.table(headers, [row(x) for x in items])

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[Any]], *, wrap_last: bool = True) -> None:
        """An aligned table; the last column is cut to the terminal width."""
        cells = [[str(c) for c in row] for row in rows]
        widths = [len(h) for h in headers]
        for row in cells:
            for i, cell in enumerate(row[:-1] if wrap_last else row):
                widths[i] = max(widths[i], len(cell))
        if wrap_last and headers:
            used = sum(widths[:-1]) + 2 * (len(headers) - 1)
            room = max(shutil.get_terminal_size((120, 24)).columns - used, 20)
            widths[-1] = min(max([len(headers[-1])] + [len(r[-1]) for r in cells]), room)
            cells = [[*r[:-1], truncate(r[-1], widths[-1])] for r in cells]

        def fmt(row: Sequence[str]) -> str:
            return "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()

        self.line(fmt(list(headers)))
        self.line(fmt(["-" * w for w in widths]))
        for row in cells:
            self.line(fmt(row))
