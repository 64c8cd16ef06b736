"""Reading stdio lines: linear joining, and a cap that never holds an oversized line whole."""

from __future__ import annotations

import json

import mcp_types
import pytest
from pydantic import ValidationError

from mcp_pool_svc.lines import LineSplitter, OversizedLine, parse_message, request_id_of


def test_lines_split_across_chunks_come_out_whole_and_in_order() -> None:
    splitter = LineSplitter(1000)
    assert splitter.feed(b'{"a":') == []
    assert splitter.feed(b'1}\n{"b"') == [b'{"a":1}']
    assert splitter.feed(b":2}\n\n{") == [b'{"b":2}', b""]
    assert splitter.buffered_bytes == 1


def test_a_line_over_the_cap_is_never_held_whole_and_is_reported_with_its_size() -> None:
    limit, chunk = 10_000, b"x" * 4096
    splitter = LineSplitter(limit)
    held = 0
    for _ in range(250):  # a 1 MB line, a hundred times the cap
        assert splitter.feed(chunk) == []
        held = max(held, splitter.buffered_bytes)
    assert held <= limit + len(chunk)
    [line, after] = splitter.feed(b"tail\nnext\n")
    assert isinstance(line, OversizedLine)
    assert line.size == 250 * 4096 + 4
    assert line.tail.endswith(b"tail")
    assert after == b"next"
    assert splitter.buffered_bytes == 0


def _oversized(raw: bytes) -> OversizedLine:
    [line] = LineSplitter(64).feed(raw + b"\n")
    assert isinstance(line, OversizedLine)
    return line


def test_the_id_of_an_oversized_reply_is_read_from_either_end() -> None:
    body = {"content": [{"type": "text", "text": "y" * 20_000}], "structuredContent": {"id": 99}}
    python_order = json.dumps({"jsonrpc": "2.0", "id": 7, "result": body}).encode()
    typescript_order = json.dumps({"result": body, "jsonrpc": "2.0", "id": 8}).encode()
    string_id = json.dumps({"result": body, "id": "req-9", "jsonrpc": "2.0"}).encode()
    assert request_id_of(_oversized(python_order)) == 7
    assert request_id_of(_oversized(typescript_order)) == 8
    assert request_id_of(_oversized(string_id)) == "req-9"


def test_an_id_nested_inside_the_result_is_never_taken_for_the_replys() -> None:
    nested_last = json.dumps({"result": {"text": "z" * 20_000, "item": {"id": 5}}}).encode()
    assert request_id_of(_oversized(nested_last)) is None


def test_a_message_with_a_lone_surrogate_escape_is_read_with_the_replacement_character() -> None:
    # pydantic's JSON parser refuses "\\ud800" (valid JSON, not Unicode); the call's answer must
    # still be read, not dropped while the call waits for its timeout.
    line = b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"a\\ud800b"}]}}'
    message = parse_message(line)
    assert isinstance(message, mcp_types.JSONRPCResponse)
    assert (message.id, message.result["content"][0]["text"]) == (7, "a\ufffdb")
    assert parse_message(b'{"jsonrpc":"2.0","id":1,"result":{}}') == mcp_types.JSONRPCResponse(
        jsonrpc="2.0", id=1, result={}
    )
    for broken in (
        b'{"jsonrpc":"2.0","id":1,"result":"\\ud800"',
        b'{"jsonrpc":"1.0","id":1,"result":{"a":"\\ud800"}}',
    ):
        with pytest.raises(ValidationError):
            parse_message(broken)
