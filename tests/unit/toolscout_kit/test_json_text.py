"""The one bounded JSON parser: depth measured on the text agrees with the parsed value, lone
surrogates are refused, and no input makes it raise anything but its own error."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from pydantic_core import from_json

from toolscout_kit.errors import InvalidArgumentError
from toolscout_kit.json_text import (
    MAX_JSON_DEPTH,
    JsonTextError,
    LoneSurrogateEscapes,
    json_depth_bound,
    json_object_or_none,
    nested_deeper_than,
    parse_json,
    parse_json_object,
    server_json,
)

# Strings that look like structure to a naive scan.
_TRICKY = ["[", "]]", '{"a": [', "\\", '"', '\\"[', "\\u005b", "plain", "", "é[中]"]


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def _random_value(rng: random.Random, depth: int, budget: list[int]) -> Any:
    """A random document with one path ``depth`` containers deep and small side branches."""
    if depth <= 0 or budget[0] <= 0:
        return rng.choice([rng.choice(_TRICKY), rng.randint(-5, 5), 1.5, True, None])
    budget[0] -= 1
    width = rng.randint(1, 3)
    deep = rng.randrange(width)
    children = [
        _random_value(rng, depth - 1 if i == deep else rng.randint(0, 2), budget) for i in range(width)
    ]
    if rng.random() < 0.5:
        return children
    return {rng.choice(_TRICKY) + str(i): child for i, child in enumerate(children)}


@pytest.mark.parametrize("seed", range(40))
def test_the_depth_bound_is_the_depth_of_the_parsed_value(seed: int) -> None:
    rng = random.Random(seed)  # noqa: S311  # reproducible test data, not secrets
    for _ in range(25):
        value = _random_value(rng, rng.randint(0, 90), [400])
        text = json.dumps(value, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, 1]))
        depth = _depth(value)
        bound = json_depth_bound(text)
        if depth <= MAX_JSON_DEPTH:
            assert depth <= bound <= max(depth, text.count("[") + text.count("{")), text[:200]
            assert parse_json(text, "x") == value
        else:
            assert bound > MAX_JSON_DEPTH
            with pytest.raises(JsonTextError, match="nested deeper than 64 levels"):
                parse_json(text, "x")
        assert nested_deeper_than(value) == (depth > MAX_JSON_DEPTH)


def test_the_limit_is_inclusive() -> None:
    assert parse_json("[" * 64 + "]" * 64, "x") is not None
    with pytest.raises(JsonTextError, match="x: nested deeper than 64 levels"):
        parse_json("[" * 65 + "]" * 65, "x")
    with pytest.raises(JsonTextError, match="nested deeper than 3 levels"):
        parse_json('{"a": {"b": {"c": []}}}', "x", max_depth=3)


@pytest.mark.parametrize("seed", range(10))
def test_any_prefix_or_mangling_of_deep_text_is_a_json_text_error(seed: int) -> None:
    rng = random.Random(seed)  # noqa: S311  # reproducible test data, not secrets
    base = '{"a": ' * 3000 + '["]", "\\\\", 1]' + "}" * 3000
    for _ in range(30):
        cut = base[: rng.randint(0, len(base) - 1)]
        chars = list(cut)
        for _ in range(rng.randint(0, 5)):
            if chars:
                chars[rng.randrange(len(chars))] = rng.choice('[]{}"\\,:')
        with pytest.raises(JsonTextError):
            parse_json("".join(chars), "x")


@pytest.mark.parametrize(
    "text",
    [
        '"\\ud800"',
        '"\\uDFFF"',
        '"\\udc00\\ud800"',  # a pair in the wrong order
        '{"\\ud83d": 1}',  # in a key
        '["ok", {"deep": ["\\ud800x"]}]',
        '"\ud800"',  # raw, as an in-process caller can pass it
    ],
)
def test_lone_surrogates_are_refused(text: str) -> None:
    with pytest.raises(JsonTextError, match="not valid Unicode"):
        parse_json(text, "x")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('"\\ud83d\\ude00"', "\U0001f600"),  # a proper pair
        ('"\\\\ud800"', "\\ud800"),  # an escaped backslash, then plain letters
        ('"é中"', "é中"),
    ],
)
def test_valid_unicode_parses(text: str, value: str) -> None:
    assert parse_json(text, "x") == value


def test_errors_name_the_field_and_the_reason() -> None:
    with pytest.raises(JsonTextError) as err:
        parse_json('{"a": ', "toolset_json")
    assert err.value.message == "toolset_json: not valid JSON (Expecting value at column 7)"
    with pytest.raises(JsonTextError) as err:
        parse_json('"abc', "x")
    assert err.value.message == "x: not valid JSON (Unterminated string starting at column 1)"
    with pytest.raises(JsonTextError, match=r"x: not valid JSON \(Exceeds the limit"):
        parse_json("1" * 5000, "x")
    assert issubclass(JsonTextError, InvalidArgumentError)


def test_an_object_is_required_where_one_is_expected() -> None:
    assert parse_json_object("", "x") == {}
    assert parse_json_object("  ", "x") == {}
    assert parse_json_object('{"a": 1}', "x") == {"a": 1}
    with pytest.raises(JsonTextError, match="x: must be a JSON object, not an array"):
        parse_json_object("[]", "x")
    with pytest.raises(JsonTextError, match="not a string"):
        parse_json_object('"s"', "x")


def test_the_lenient_form_reads_anything_unusable_as_none() -> None:
    assert json_object_or_none('{"a": [1]}') == {"a": [1]}
    for text in ("", " ", "[]", "{", "[" * 100_000, '{"a": "\\ud800"}', "null"):
        assert json_object_or_none(text) is None


def test_server_json_reads_lone_surrogates_as_the_replacement_character_and_nothing_else() -> None:
    text = '{"a": "x\\ud800y", "\\udc00k": ["\\ud83d\\ude00", 1.5, null]}'
    assert server_json(text) == server_json(text.encode()) == {"a": "x\ufffdy", "\ufffdk": ["😀", 1.5, None]}
    # Not what it is for: no surrogate escape, not JSON, or NaN (which the strict parser refuses too).
    for other in ('{"a": "x"}', '{"a": "\\ud800"', '{"a": "\\ud800", "n": NaN}', "[Infinity]"):
        assert server_json(other) is None


# Pieces of string contents, as JSON escapes them (what a JavaScript server writes included).
_STRING_PIECES = [
    "plain",
    "\\ud800",  # a lone high surrogate
    "\\udfff",  # a lone low one
    "\\ud83d\\ude00",  # a pair (an emoji)
    "\\ude00\\ud83d",  # a pair's halves swapped: two lone ones
    "\\ud83d\\ud83d\\ude00",  # a lone high, then a pair
    "\\\\ud800",  # an escaped backslash, then the text "ud800"
    "\\\\\\ud800",  # an escaped backslash, then a lone surrogate
    '\\u00e9\\n\\"',
    "é中",
    "\\uD800\\uDC00",  # upper-case hex
]


def _server_text(rng: random.Random) -> bytes:
    """A JSON message as a server writes it: strings of random pieces, keys and values."""

    def string() -> str:
        return '"' + "".join(rng.choice(_STRING_PIECES) for _ in range(rng.randint(0, 4))) + '"'

    members = ", ".join(f"{string()}: [{string()}, {rng.randint(0, 9)}]" for _ in range(rng.randint(1, 4)))
    return ("{" + members + "}").encode()


def _decoded(text: bytes) -> Any:
    """What a lenient reader makes of the text: each lone surrogate as U+FFFD."""
    value = server_json(text)
    return json.loads(text) if value is None else value


@pytest.mark.parametrize("seed", range(40))
def test_lone_surrogate_escapes_are_rewritten_in_any_pieces_and_nothing_else_changes(seed: int) -> None:
    rng = random.Random(seed)  # noqa: S311  # reproducible test data, not secrets
    text = _server_text(rng)
    cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(0, 12))))
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    rewriter = LoneSurrogateEscapes()
    out = b"".join(rewriter.feed(piece) for piece in pieces) + rewriter.end()
    # The strict parser reads it, as the lenient one read the original.
    assert from_json(out) == _decoded(text)
    # Byte for byte the same where there was nothing to rewrite.
    if from_json(out) == json.loads(text):
        assert out == text


def test_every_cut_of_a_message_gives_the_same_bytes() -> None:
    text = b'{"a": "x\\ud83d\\ude00\\ud800\\\\ud800\\\\\\udc00y"}\n\n'
    whole = LoneSurrogateEscapes()
    expected = whole.feed(text) + whole.end()
    assert expected == b'{"a": "x\\ud83d\\ude00\\ufffd\\\\ud800\\\\\\ufffdy"}\n\n'
    for cut in range(1, len(text)):
        rewriter = LoneSurrogateEscapes()
        assert rewriter.feed(text[:cut]) + rewriter.feed(text[cut:]) + rewriter.end() == expected, cut
    for size in (1, 2, 3, 5):
        rewriter = LoneSurrogateEscapes()
        pieces = [rewriter.feed(text[i : i + size]) for i in range(0, len(text), size)]
        assert b"".join(pieces) + rewriter.end() == expected


def test_a_message_or_an_event_is_never_held_back() -> None:
    rewriter = LoneSurrogateEscapes()
    # A piece ending with a whole message (or SSE event) gives all of it at once.
    for piece in (b'data: {"a": "\\ud800"}\n\n', b'{"b": "\\\\"}', b'{"c": "\\ud83d\\ude00"}\n'):
        assert rewriter.feed(piece).endswith(piece[-2:])
    # Only an escape cut short is held, until the next piece decides it.
    assert rewriter.feed(b'{"d": "\\ud83d') == b'{"d": "'
    assert rewriter.feed(b'\\ude00"}') == b'\\ud83d\\ude00"}'
    assert rewriter.feed(b'{"e": "\\ud83d') == b'{"e": "'
    assert rewriter.feed(b'x"}') == b'\\ufffdx"}'
