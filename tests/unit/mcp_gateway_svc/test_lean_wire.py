"""The lean path writes a pool's tool result in its wire form in one pass
(:func:`mcp_gateway_svc.lean_rules.pool_result_wire`): the same dict, member order included, as the SDK
path's two (the MCP result built of it, :func:`~mcp_gateway_svc.calls.mcp_result`, then the SDK
runner's per-version sieve and stamps, :func:`~mcp_gateway_svc.lean_rules.wire_result`), for every
protocol version, every content block kind, ``structuredContent``, ``isError`` and ``_meta``."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from mcp.server import Server
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from toolscout.client import CallToolResult, ContentBlock

from mcp_gateway_svc.calls import mcp_result
from mcp_gateway_svc.lean_rules import _plain_wire, pool_result_wire, wire_result

VERSIONS = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)
TEXT = ContentBlock("text", text="hello", raw_json='{"type":"text"}')

BLOCKS = (
    TEXT,
    ContentBlock("text", text="bare"),
    ContentBlock("text", text="", raw_json='{"type":"text"}'),
    ContentBlock("text", text="null NaN Infinity \ud83d\ude00 \u00e9", raw_json='{"type":"text"}'),
    ContentBlock("text", text="noted", raw_json='{"type":"text","annotations":{"priority":0.5}}'),
    ContentBlock("text", text="meta", raw_json='{"type":"text","_meta":{"k":null,"j":1}}'),
    ContentBlock("text", text="extra", raw_json='{"type":"text","extra":1}'),
    ContentBlock(
        "image", data=b"\x89PNG", mime_type="image/png", raw_json='{"type":"image","mimeType":"image/png"}'
    ),
    ContentBlock(
        "audio", data=b"RIFF", mime_type="audio/wav", raw_json='{"type":"audio","mimeType":"audio/wav"}'
    ),
    ContentBlock(
        "resource_link",
        uri="file:///b",
        name="b",
        raw_json='{"type":"resource_link","uri":"file:///b","name":"b","title":"B","size":3}',
    ),
    ContentBlock(
        "resource",
        text="body",
        uri="file:///a",
        raw_json='{"type":"resource","resource":{"uri":"file:///a","mimeType":"text/plain"}}',
    ),
    ContentBlock(
        "resource",
        data=b"\x00\x01",
        uri="file:///c",
        raw_json='{"type":"resource","resource":{"uri":"file:///c"}}',
    ),
    ContentBlock("widget", raw_json='{"type":"widget","x":1}'),
    ContentBlock("image", data=b"x", raw_json='{"type":"image"}'),  # no mimeType: not a valid block
)

OBJECTS = (
    "",
    "{}",
    '{"n":1}',
    '{"a":null,"b":[null,{"c":null}]}',
    '{"f":1.5,"e":1e5,"big":123456789012345678901234567890,"neg":-0.0}',
    '{"huge":1e400}',
    '{"nan":NaN}',
    '{"inf":-Infinity}',
    '{"s":"null","t":"NaN"}',
    '{"dup":1,"dup":2}',
    '{"nested":{"deep":[1,"two",true,false,{"x":[]}]}}',
    '{"io.modelcontextprotocol/serverInfo":{"name":"up","version":"1"}}',
    '{"io_modelcontextprotocol_server_info":{"name":"up","version":"1"}}',
    '{"io.modelcontextprotocol/serverInfo":null}',
    '{"a":1,"io.modelcontextprotocol/serverInfo":{"name":"up","version":"2"},"b":[2.5]}',
    '{"io.modelcontextprotocol/serverInfo":"odd"}',
    '{"lone":"\\ud800"}',
    "[1,2]",
    '"text"',
    "not json",
)


_SCALARS: dict[str, tuple[Any, ...]] = {
    "str": ("", "a", "null", "é", "x" * 20, "\n\t\"'"),
    "int": (0, -1, 7, 2**63, -(2**70)),
    "float": (0.5, -2.25, 1e-9, 3.0e100),
    "bool": (True, False),
    "null": (None,),
}


def _json_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.choice([*_SCALARS, *(("list", "dict") if depth < 3 else ())])
    if kind == "list":
        return [_json_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    if kind == "dict":
        return {f"k{i}": _json_value(rng, depth + 1) for i in range(rng.randint(0, 4))}
    return rng.choice(_SCALARS[kind])


def _results() -> list[CallToolResult]:
    results = [
        CallToolResult(content=(TEXT,)),
        CallToolResult(content=()),
        CallToolResult(content=(TEXT, TEXT), is_error=True),
        CallToolResult(content=(TEXT,), result_handle="h1", server="s", tool="t"),
    ]
    results += [CallToolResult(content=(block,)) for block in BLOCKS]
    results += [CallToolResult(content=(TEXT, block, TEXT)) for block in BLOCKS]
    for text in OBJECTS:
        results.append(CallToolResult(content=(TEXT,), structured_content_json=text))
        results.append(CallToolResult(content=(TEXT,), meta_json=text, is_error=True))
    rng = random.Random(36)  # noqa: S311 (test data, not secrets)
    for _ in range(150):
        structured = _json_value(rng) if rng.random() < 0.7 else None
        meta = _json_value(rng) if rng.random() < 0.5 else None
        results.append(
            CallToolResult(
                content=tuple(rng.choice(BLOCKS[:4]) for _ in range(rng.randint(0, 3))),
                structured_content_json=json.dumps({"v": structured}) if structured is not None else "",
                meta_json=json.dumps({"m": meta}) if meta is not None else "",
                is_error=rng.random() < 0.3,
            )
        )
    return results


def _sdk_path(server: Server[Any], version: str, result: CallToolResult) -> dict[str, Any] | str:
    try:
        return wire_result(server, version, mcp_result(result))
    except Exception as err:  # the SDK path's refusal: the one pass must refuse alike
        return type(err).__name__


def _one_pass(server: Server[Any], version: str, result: CallToolResult) -> dict[str, Any] | str:
    try:
        return pool_result_wire(server, version, result)
    except Exception as err:
        return type(err).__name__


@pytest.mark.parametrize("version", VERSIONS)
def test_the_one_pass_wire_form_is_the_sdk_paths_member_for_member_in_order(version: str) -> None:
    server: Server[Any] = Server("gw", version="9")
    for result in _results():
        expected, got = _sdk_path(server, version, result), _one_pass(server, version, result)
        assert got == expected, result
        # member order too: the answer's bytes are the same
        assert json.dumps(got) == json.dumps(expected), result


@pytest.mark.parametrize("version", [HANDSHAKE_PROTOCOL_VERSIONS[-1], MODERN_PROTOCOL_VERSIONS[-1]])
def test_plain_results_take_the_one_pass_and_others_the_sdks(version: str) -> None:
    server: Server[Any] = Server("gw", version="9")
    modern = version in MODERN_PROTOCOL_VERSIONS
    plain = [
        CallToolResult(content=(TEXT,)),
        CallToolResult(content=(TEXT, ContentBlock("text", text="b")), is_error=True),
        CallToolResult(content=(TEXT,), structured_content_json='{"a":null,"b":[1.5,"x"]}'),
        CallToolResult(content=(TEXT,), meta_json='{"trace":"t1"}'),
        # the MCP server's own serverInfo stamp (a 2026-07-28 server's, passed through)
        CallToolResult(
            content=(TEXT,), meta_json='{"a":1,"io.modelcontextprotocol/serverInfo":{"name":"up"}}'
        ),
    ]
    for result in plain:
        assert _plain_wire(server, modern, result) is not None, result
    others = [
        CallToolResult(content=(BLOCKS[4],)),  # annotations
        CallToolResult(content=(BLOCKS[7],)),  # an image
        CallToolResult(content=(TEXT,), result_handle="h"),  # a kept result's link
        CallToolResult(content=(TEXT,), structured_content_json='{"x":1e400}'),
        CallToolResult(content=(TEXT,), structured_content_json="[1]"),
        CallToolResult(content=(TEXT,), meta_json="[1]"),
        CallToolResult(content=(TEXT,), meta_json='{"io_modelcontextprotocol_server_info":{"name":"up"}}')
        if modern
        else CallToolResult(content=(TEXT,), meta_json='{"x":NaN}'),
    ]
    for result in others:
        assert _plain_wire(server, modern, result) is None, result


def test_the_server_info_stamp_is_the_gateways_and_a_servers_own_wins() -> None:
    server: Server[Any] = Server("gw", version="9")
    version = MODERN_PROTOCOL_VERSIONS[-1]
    wire = pool_result_wire(server, version, CallToolResult(content=(TEXT,)))
    assert wire["_meta"] == {"io.modelcontextprotocol/serverInfo": {"name": "gw", "version": "9"}}
    assert wire["resultType"] == "complete"
    own = CallToolResult(
        content=(TEXT,), meta_json='{"io.modelcontextprotocol/serverInfo":{"name":"up","version":"2"}}'
    )
    assert (
        pool_result_wire(server, version, own)["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "up"
    )
