"""Reading a kept tool result (a document behind a handle) within a token budget.

Three ways, each answering text for the model that never exceeds the budget and says how to read on:

* :func:`read_page` - from a character offset, cut at a line end, with the next offset;
* :func:`grep` - lines containing a pattern (case-insensitive, literal: a model's regular
  expressions are often wrong and a bad one could scan 50 MB for minutes), with context lines,
  numbered, with the match count;
* :func:`project` - a JMESPath expression over the JSON document (jmespath: the AWS CLI's query
  language, a small pure-Python library with a full specification).

The document is never copied whole: matches are found with ``str.find`` over the original text and
lines are located around each match.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import jmespath
from jmespath.exceptions import JMESPathError

from toolscout_kit.errors import InvalidArgumentError
from toolscout_kit.tokens import count_tokens, max_tokens

__all__ = ["MAX_CONTEXT_LINES", "ReadOut", "grep", "project", "read_page"]

MAX_CONTEXT_LINES = 20
_CHARS_PER_TOKEN = 3.2


@dataclass(frozen=True, slots=True)
class ReadOut:
    """What a read returns: ``text`` for the model, its exact ``tokens``, and for a page the offset
    to continue from (-1: the end was reached); ``total_chars`` is the document's length."""

    text: str
    tokens: int
    next_offset: int
    total_chars: int


def _fit(text: str, budget: int, encoding: str, note: str) -> tuple[str, int]:
    """``text`` cut (with ``note`` appended) until it is within ``budget`` tokens."""
    if max_tokens(text) <= budget:
        return text, count_tokens(text, encoding)
    tokens = count_tokens(text, encoding)
    while tokens > budget:
        keep = max(int(len(text) * budget / tokens * 0.9) - len(note), 0)
        text = text[:keep] + note
        tokens = count_tokens(text, encoding)
    return text, tokens


def read_page(document: str, offset: int, budget: int, encoding: str) -> ReadOut:
    """The document from character ``offset`` on, within ``budget`` tokens.

    Raises:
        InvalidArgumentError: ``offset`` is negative or past the end.
    """
    if offset < 0 or (offset > len(document) and document):
        raise InvalidArgumentError(
            f"offset {offset} is outside the result (it has {len(document)} characters)"
        )
    chars = max(int(budget * _CHARS_PER_TOKEN) - 80, 1)
    while True:
        end = min(offset + chars, len(document))
        if end < len(document):
            nl = document.rfind("\n", offset, end)
            if nl > offset + chars // 2:
                end = nl + 1
        page = document[offset:end]
        footer = (
            f"\n[characters {offset}-{end} of {len(document)}; next: read_result with offset {end}]"
            if end < len(document)
            else f"\n[characters {offset}-{end} of {len(document)}: the end]"
        )
        text = page + footer
        tokens = count_tokens(text, encoding) if max_tokens(text) > budget else -1
        if tokens <= budget:
            return ReadOut(
                text,
                tokens if tokens >= 0 else count_tokens(text, encoding),
                end if end < len(document) else -1,
                len(document),
            )
        chars = max(int(chars * budget / tokens * 0.9), 1)


def _line_bounds(document: str, pos: int) -> tuple[int, int]:
    start = document.rfind("\n", 0, pos) + 1
    end = document.find("\n", pos)
    return start, len(document) if end < 0 else end


def grep(document: str, pattern: str, context_lines: int, budget: int, encoding: str) -> ReadOut:
    """Lines of ``document`` that contain ``pattern`` (case-insensitive), each with
    ``context_lines`` lines before and after, numbered, within ``budget`` tokens.

    Raises:
        InvalidArgumentError: an empty pattern, or context_lines outside 0..MAX_CONTEXT_LINES.
    """
    if not pattern:
        raise InvalidArgumentError("pattern must not be empty")
    if not 0 <= context_lines <= MAX_CONTEXT_LINES:
        raise InvalidArgumentError(f"context_lines must be 0 to {MAX_CONTEXT_LINES}, not {context_lines}")
    finder = re.compile(re.escape(pattern), re.IGNORECASE)
    limit = int(budget * _CHARS_PER_TOKEN) - 120
    blocks: list[str] = []
    used = 0
    matches = 0
    shown = 0
    last_end = -1
    line_no = 0
    counted_to = 0
    pos = 0
    while (found := finder.search(document, pos)) is not None:
        matches += 1
        start, end = _line_bounds(document, found.start())
        pos = end + 1
        if used >= limit:
            continue
        # Context: walk back and forward context_lines lines.
        c_start = start
        for _ in range(context_lines):
            if c_start == 0:
                break
            c_start = document.rfind("\n", 0, c_start - 1) + 1
        c_end = end
        for _ in range(context_lines):
            if c_end >= len(document):
                break
            nxt = document.find("\n", c_end + 1)
            c_end = len(document) if nxt < 0 else nxt
        c_start = max(c_start, last_end + 1)
        if c_start > c_end:
            continue
        line_no += document.count("\n", counted_to, c_start)
        counted_to = c_start
        numbered = [
            f"{line_no + 1 + k}: {line}" for k, line in enumerate(document[c_start:c_end].split("\n"))
        ]
        block = "\n".join(numbered)
        blocks.append(block if last_end < 0 or c_start == last_end + 1 else f"--\n{block}")
        used += len(block) + 4
        shown += 1
        last_end = c_end
    if not matches:
        text = f"[no line contains {pattern!r} (case-insensitive); the result has {len(document)} characters]"
        return ReadOut(text, count_tokens(text, encoding), -1, len(document))
    more = "" if shown == matches else f"; {matches - shown} more not shown: grep a longer pattern"
    head = f"[{matches} matching line(s) for {pattern!r}{more}]\n"
    text, tokens = _fit(head + "\n".join(blocks), budget, encoding, "\n[… cut at the result budget]")
    return ReadOut(text, tokens, -1, len(document))


def project(document: str, expression: str, budget: int, encoding: str) -> ReadOut:
    """The JMESPath ``expression`` applied to the JSON ``document``, as compact JSON within
    ``budget`` tokens.

    Raises:
        InvalidArgumentError: the expression is invalid, or the document is not JSON.
    """
    try:
        compiled = jmespath.compile(expression)
    except JMESPathError as err:
        raise InvalidArgumentError(f"path {expression!r} is not a valid JMESPath expression: {err}") from None
    try:
        value = json.loads(document)
    except ValueError:
        raise InvalidArgumentError(
            "path needs a JSON result and this one is not JSON; read it with offset or pattern"
        ) from None
    try:
        found = compiled.search(value)
    except JMESPathError as err:
        raise InvalidArgumentError(f"path {expression!r} could not be applied: {err}") from None
    del value
    out = json.dumps(found, ensure_ascii=False, separators=(",", ":"))
    if found is None:
        out = f"null [nothing at {expression!r}]"
    text, tokens = _fit(out, budget, encoding, "…[cut at the result budget: project a narrower path]")
    return ReadOut(text, tokens, -1, len(document))
