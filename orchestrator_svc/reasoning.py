"""Separates ``<think>`` / ``<thinking>`` reasoning from answer text, also across stream chunks."""

from __future__ import annotations

from typing import Literal

__all__ = ["ThinkSplitter", "split_reasoning"]

Kind = Literal["text", "reasoning"]
_OPEN = ("<think>", "<thinking>")
_CLOSE = ("</think>", "</thinking>")


def _partial_tail(buf: str, tags: tuple[str, ...]) -> int:
    """Length of the longest suffix of ``buf`` that is a proper prefix of one of ``tags``."""
    longest = max(len(t) for t in tags) - 1
    for size in range(min(longest, len(buf)), 0, -1):
        tail = buf[-size:]
        if any(t.startswith(tail) for t in tags):
            return size
    return 0


class ThinkSplitter:
    """Feed text pieces; get (kind, text) pieces with the tags removed.

    A tag split over two chunks is held back until it can be decided, so no partial tag ever
    reaches the answer.
    """

    def __init__(self) -> None:
        self._buf = ""
        self._thinking = False

    def feed(self, text: str) -> list[tuple[Kind, str]]:
        self._buf += text
        out: list[tuple[Kind, str]] = []
        while self._buf:
            tags = _CLOSE if self._thinking else _OPEN
            kind: Kind = "reasoning" if self._thinking else "text"
            hits = [(i, t) for t in tags if (i := self._buf.find(t)) >= 0]
            if hits:
                index, tag = min(hits)
                if index:
                    out.append((kind, self._buf[:index]))
                self._buf = self._buf[index + len(tag) :]
                self._thinking = not self._thinking
                continue
            keep = _partial_tail(self._buf, tags)
            ready = self._buf[: len(self._buf) - keep]
            if ready:
                out.append((kind, ready))
            self._buf = self._buf[len(self._buf) - keep :]
            break
        return out

    def flush(self) -> list[tuple[Kind, str]]:
        rest, self._buf = self._buf, ""
        return [("reasoning" if self._thinking else "text", rest)] if rest else []


def split_reasoning(text: str) -> tuple[str, str]:
    """(answer, reasoning) of a complete text; both stripped."""
    splitter = ThinkSplitter()
    pieces = splitter.feed(text) + splitter.flush()
    answer = "".join(p for k, p in pieces if k == "text")
    reasoning = "".join(p for k, p in pieces if k == "reasoning")
    return answer.strip(), reasoning.strip()
