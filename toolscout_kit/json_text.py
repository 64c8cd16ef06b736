"""The one parser for JSON text a caller sends: bounded in depth, valid Unicode, clear errors.

Every JSON string field of the API (tool arguments and ``_meta``, ``toolset_json``, the LLM's
``search_tools`` arguments, ``native_items_json``, ``meta_json``, the arguments in a chat history)
is parsed here, so that one set of limits holds everywhere and no parser error becomes ``INTERNAL``.

* **Depth** is checked *before* parsing, on the text: Python's ``json`` recurses once per level
  and a 100,000-deep array fits in a few hundred kilobytes. The check strips string literals and
  then removes innermost bracket pairs, at most :data:`MAX_JSON_DEPTH` passes, all in C
  (``re``, ``bytes.translate``/``replace``): about half of what ``json.loads`` itself costs on
  the same text, and nothing when it holds fewer brackets than the limit.
* **Lone surrogates** (``"\\ud800"``) parse in Python but are not Unicode: they make any later
  UTF-8 encoding (a hash, a log line, a reply) fail. They are refused, escaped or raw.
  What an MCP *server* sends is read the other way (:func:`server_json`): each one becomes U+FFFD,
  as a lenient peer reads it, so that its answer still arrives. :class:`LoneSurrogateEscapes` does
  the same to the bytes of a stream, for a parser that is not ours (the ``mcp`` SDK's transport).
* **Everything else** the ``json`` module refuses (syntax, integers over Python's digit limit) is
  the caller's error too, reported with the parser's reason and column.

:func:`parse_json` raises :class:`JsonTextError` (an ``INVALID_ARGUMENT``); :func:`json_object_or_none`
is the lenient form for text that may legitimately be malformed (a model's own tool-call arguments
in a history, a schema from a peer), which reads anything unusable as "no object"
(:func:`json_object_or_empty`: as ``{}``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from toolscout.client.wire import well_formed_value

from toolscout_kit.errors import InvalidArgumentError

__all__ = [
    "MAX_JSON_DEPTH",
    "JsonSyntaxError",
    "JsonTextError",
    "LoneSurrogateEscapes",
    "json_depth_bound",
    "json_object_or_empty",
    "json_object_or_none",
    "nested_deeper_than",
    "parse_json",
    "parse_json_object",
    "server_json",
]

# Deep enough for any real schema, tool arguments or provider item (they stay under ~20 levels),
# far below where the json module's recursion would fail.
MAX_JSON_DEPTH = 64

# A string literal, possibly unterminated (then it runs to the end: the parser reports it). Atomic
# and possessive, so a scan is linear whatever the text holds.
_STRING = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"?', re.DOTALL)
# What is left once strings are gone, as bytes: brackets kept (as parentheses), all else dropped.
_KEEP_BRACKETS = bytes.maketrans(b"[]{}", b"()()")
_DROP = bytes(b for b in range(256) if b not in b"[]{}")
# A \uD800-\uDFFF escape: only then can a parsed string hold a surrogate.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE_ESCAPE_BYTES = re.compile(_SURROGATE_ESCAPE.pattern.encode())


class JsonTextError(InvalidArgumentError):
    """JSON text from a caller that is malformed, nested too deeply or not valid Unicode.

    ``what`` names the text ("the arguments"), ``problem`` says what is wrong with it ("not valid
    JSON (...)"); ``requirement`` is true when ``problem`` states what the text must be ("must be a
    JSON object, not array") rather than what it is, so a sentence can be built from the parts
    instead of by editing the message."""

    def __init__(self, what: str, problem: str = "", *, requirement: bool = False) -> None:
        super().__init__(f"{what}: {problem}" if problem else what)
        self.what = what
        self.problem = problem
        self.requirement = requirement


class JsonSyntaxError(JsonTextError):
    """JSON text that does not parse at all (JSON-RPC's "parse error", where the others are well
    formed but refused)."""


def json_depth_bound(text: str, limit: int = MAX_JSON_DEPTH) -> int:
    """An upper bound on the nesting depth of ``text`` (exact for well-formed JSON deeper than
    ``limit``); a value above ``limit`` means "deeper than ``limit``" (the scan stops there).

    Brackets inside string literals do not count. For malformed text the bound still covers every
    level a parser would enter before it finds the error.
    """
    if text.count("[") + text.count("{") <= limit:
        return text.count("[") + text.count("{")
    outside = _STRING.sub("", text).encode("utf-8", "replace")
    brackets = outside.translate(_KEEP_BRACKETS, _DROP)
    if b"(" * (limit + 1) in brackets:  # a run of openers longer than the limit: the usual attack
        return limit + 1
    passes = 0
    while brackets:
        shorter = brackets.replace(b"()", b"")
        if shorter == brackets:
            # Unbalanced: what is left cannot pair up; each opener left may be one more level.
            return passes + brackets.count(b"(")
        brackets = shorter
        passes += 1
        if passes > limit:
            return passes
    return passes


def nested_deeper_than(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether an already-built value (dicts and lists) nests deeper than ``limit`` (no recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def _has_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not item.isascii():
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def server_json(data: str | bytes) -> Any | None:
    """JSON from an MCP server that a strict parser (pydantic's) refused because it escapes a lone
    surrogate (``"\\ud800"``: valid JSON, not valid Unicode), read with each such character as
    U+FFFD, as a lenient peer reads it. None when that cannot be why: the text escapes no
    surrogate, or is not JSON anyway (NaN and Infinity included, as the strict parser refuses
    them). Meant for that parser's failure path only: it parses the text again."""
    found = _SURROGATE_ESCAPE.search(data) if isinstance(data, str) else _SURROGATE_ESCAPE_BYTES.search(data)
    if found is None:
        return None
    try:
        return well_formed_value(json.loads(data, parse_constant=_refuse_constant))
    except (ValueError, RecursionError):
        return None


# Every escape, a valid surrogate pair's two as one (left alone), a lone surrogate's (rewritten).
_ESCAPES = re.compile(
    rb"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\u[dD][89a-fA-F][0-9a-fA-F]{2}|\\.",
    re.DOTALL,
)
# The end of a text that may be a surrogate's escape (or a pair's) cut short: its fate depends on
# what comes next. A whole low surrogate is not among them (it is lone unless a high one precedes
# it, and then this matches from the high one).
_CUT_SHORT = re.compile(
    rb"\\(?:u(?:[dD](?:[89abAB](?:[0-9a-fA-F](?:[0-9a-fA-F]"
    rb"(?:\\(?:u(?:[dD](?:[c-fC-F][0-9a-fA-F]?)?)?)?)?)?)?|[c-fC-F][0-9a-fA-F]?)?)?)?\Z"
)
_REPLACEMENT = rb"\ufffd"


def _rewrite(match: re.Match[bytes]) -> bytes:
    return _REPLACEMENT if len(match[0]) == 6 else match[0]


def _rewritten(data: bytes) -> bytes:
    """``data`` (whole escapes only) with each lone surrogate's escape rewritten."""
    return _ESCAPES.sub(_rewrite, data) if _SURROGATE_ESCAPE_BYTES.search(data) else data


class LoneSurrogateEscapes:
    """Rewrites, in JSON text that arrives in pieces, each escape of a lone surrogate
    (``\\ud800``) as ``\\ufffd``; a pair's escapes and every other byte pass unchanged.

    A strict parser (pydantic's, under the ``mcp`` SDK's transport) refuses the whole message for
    one such escape, and the answer it carried is lost; a JavaScript server writes one whenever it
    cuts a string inside a pair. :meth:`feed` returns what can be decided so far: an escape cut
    short at a piece's end waits for the next piece (a few bytes, never a line's end: a JSON
    message or an SSE event is never held back). The text is the stream's from its start, so an
    escaped backslash (``\\\\u``) is told from an escape.
    """

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held = b""

    def feed(self, piece: bytes) -> bytes:
        data = self._held + piece if self._held else piece
        cut = _CUT_SHORT.search(data, max(len(data) - 12, 0))
        if cut is None:
            ready, self._held = data, b""
        else:
            start = cut.start()
            while start > 0 and data[start - 1] == 0x5C:  # from the start of its backslash run
                start -= 1
            ready, self._held = data[:start], data[start:]
        return _rewritten(ready)

    def end(self) -> bytes:
        """What is still held (the stream ended): decided as it is."""
        held, self._held = self._held, b""
        return _rewritten(held)


def parse_json(text: str, what: str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """The JSON value in ``text``; ``what`` names the field in error messages.

    Raises:
        JsonTextError: not valid JSON, nested deeper than ``max_depth``, or holding a lone
            UTF-16 surrogate.
    """
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise JsonTextError(what, "not valid Unicode (a lone UTF-16 surrogate)") from None
    if json_depth_bound(text, max_depth) > max_depth:
        raise JsonTextError(what, f"nested deeper than {max_depth} levels")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        at = "" if err.msg.endswith(" at") else " at"  # "Unterminated string starting at"
        raise JsonSyntaxError(what, f"not valid JSON ({err.msg}{at} column {err.colno})") from None
    except (ValueError, RecursionError) as err:
        # Integers past Python's digit limit; RecursionError cannot happen below the depth bound
        # but would be the caller's input all the same.
        reason = "nested too deeply" if isinstance(err, RecursionError) else str(err).split(":")[0]
        raise JsonTextError(what, f"not valid JSON ({reason})") from None
    if _SURROGATE_ESCAPE.search(text) and _has_surrogate(value):
        raise JsonTextError(
            what,
            "not valid Unicode (a lone UTF-16 surrogate escape such as \\ud800; "
            "characters outside the BMP need both halves of the pair)",
        )
    return value


def parse_json_object(text: str, what: str, *, max_depth: int = MAX_JSON_DEPTH) -> dict[str, Any]:
    """The JSON object in ``text`` (empty or blank text is ``{}``).

    Raises:
        JsonTextError: as :func:`parse_json`, or the value is not an object.
    """
    if not text.strip():
        return {}
    value = parse_json(text, what, max_depth=max_depth)
    if not isinstance(value, dict):
        raise JsonTextError(what, f"must be a JSON object, not {_json_type(value)}", requirement=True)
    return value


def json_object_or_none(text: str, *, max_depth: int = MAX_JSON_DEPTH) -> dict[str, Any] | None:
    """The JSON object in ``text``, or None when it is empty, unusable (as :func:`parse_json`
    refuses it) or not an object."""
    if not text or not text.strip():
        return None
    try:
        value = parse_json(text, "json", max_depth=max_depth)
    except JsonTextError:
        return None
    return value if isinstance(value, dict) else None


def json_object_or_empty(text: str) -> dict[str, Any]:
    """The JSON object in ``text``, or ``{}`` (as :func:`json_object_or_none` reads it): for text a
    wire format needs as an object whatever it holds, such as a model's own tool-call arguments."""
    return json_object_or_none(text) or {}


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return {list: "an array", str: "a string", int: "a number", float: "a number"}.get(type(value), "a value")
