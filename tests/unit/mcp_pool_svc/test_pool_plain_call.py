"""``plain_call_tool`` (mcp_pool_svc/plain_call.py) against the SDK's ``ClientSession.call_tool``: on
every answer of a grid of results (content kinds, structured content valid and not for the tool's
output schema, tool errors, input-required and foreign result types, broken fields, schemas that
do not compile or do not resolve), at every protocol revision, both send the same request and
reach the same verdict (the same result, or the same exception type and message)."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession

from mcp_pool_svc.plain_call import plain_call_tool, plain_meta

_OBJECT_SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}},
    "required": ["n"],
}
_TOOLS = [
    {"name": "free", "inputSchema": {"type": "object"}},
    {"name": "typed", "inputSchema": {"type": "object"}, "outputSchema": _OBJECT_SCHEMA},
    {
        "name": "dangling",
        "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}},
    },
    {
        "name": "broken",
        "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object", "minProperties": -1},
    },
]
_CONTENT: list[Any] = [
    [],
    [{"type": "text", "text": "hello"}],
    [{"type": "text", "text": "a"}, {"type": "image", "data": "aGk=", "mimeType": "image/png"}],
    [{"type": "audio", "data": "aGk=", "mimeType": "audio/wav"}],
    [{"type": "resource_link", "uri": "file:///x", "name": "x"}],
    [{"type": "resource", "resource": {"uri": "file:///x", "text": "t"}}],
    [{"type": "text"}],  # no text
    [{"type": "nonsense", "x": 1}],
    "not a list",
    None,  # no content at all
]
_STRUCTURED: list[Any] = [
    "absent",
    None,
    {"n": 1},
    {"n": 1, "tags": ["a", "b"]},
    {"n": "one"},
    {"tags": [1]},
    {"a": 1},
    [1, 2],
    "text",
]
_KINDS: list[Any] = ["complete", "absent", "input_required", "claimed-thing", 7]
_ERRORS: list[Any] = ["absent", True, False, "yes"]


def _results() -> list[dict[str, Any]]:
    results = []
    for content, structured, kind, error in itertools.product(_CONTENT, _STRUCTURED, _KINDS, _ERRORS):
        raw: dict[str, Any] = {}
        if content is not None:
            raw["content"] = content
        if structured != "absent":
            raw["structuredContent"] = structured
        if kind != "absent":
            raw["resultType"] = kind
        if error != "absent":
            raw["isError"] = error
        if kind == "input_required":
            raw["inputRequests"] = {"a": {"method": "roots/list"}}
        results.append(raw)
    results += [
        {"content": [], "resultType": "complete", "_meta": {"k": "v"}, "extra": 1},
        {"content": [], "resultType": "complete", "_meta": "not an object"},
        {"content": [], "resultType": "complete", "ttlMs": -5},
    ]
    return results


class _FakeDispatcher:
    """A server of protocol ``version`` answering ``server/discover`` (or ``initialize``) and
    ``tools/list``, and each ``tools/call`` with the result it is given; it records what was sent."""

    def __init__(self, version: str) -> None:
        self.version = version
        self.answer: dict[str, Any] = {}
        self.sent: list[tuple[Any, Any]] = []

    async def run(self, on_request: Any, on_notify: Any, intercept: Any = None, *, task_status: Any) -> None:
        task_status.started()
        await anyio.sleep_forever()

    async def notify(self, method: str, params: Any, opts: Any = None) -> None:
        pass

    async def send_raw_request(self, method: str, params: Any, opts: Any = None) -> dict[str, Any]:
        if method == "server/discover":
            return {
                "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "fake", "version": "1"},
                "ttlMs": 0,
                "cacheScope": "private",
                "resultType": "complete",
            }
        if method == "initialize":
            return {
                "protocolVersion": self.version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "fake", "version": "1"},
            }
        if method == "tools/list":
            if self.version != "2026-07-28":
                return {"tools": _TOOLS}
            return {"tools": _TOOLS, "ttlMs": 0, "cacheScope": "private", "resultType": "complete"}
        assert method == "tools/call"
        self.sent.append((params, dict(opts or {})))
        # Each path gets its own copy: the SDK may change the dict it is given (a negative ttlMs).
        return _copy(self.answer)


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


async def _verdict(call: Any) -> tuple[str, Any]:
    try:
        result = await call
    except Exception as exc:
        return ("raised", (type(exc).__name__, str(exc)))
    return ("result", (type(result).__name__, result.model_dump(by_alias=True, exclude_none=True)))


@asynccontextmanager
async def _session(version: str = "2026-07-28") -> AsyncIterator[tuple[ClientSession, _FakeDispatcher]]:
    dispatcher = _FakeDispatcher(version)
    async with ClientSession(dispatcher=dispatcher) as session:  # type: ignore[arg-type]
        if version == "2026-07-28":
            await session.discover()
        else:
            await session.initialize()
        assert session.protocol_version == version
        await session.list_tools()
        yield session, dispatcher


@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"])
async def test_the_plain_call_sends_what_call_tool_sends_and_reaches_the_same_verdict_on_every_answer(
    version: str,
) -> None:
    async with _session(version) as (client, server):
        await _compare_all(client, server)


async def _compare_all(client: ClientSession, server: _FakeDispatcher) -> None:
    checked = 0
    for tool in ("free", "typed", "dangling", "broken"):
        for meta in ({}, {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}):
            # A host's first round (the gateway's 2026-07-28 hosts) allows an input_required answer.
            allow = meta == {}
            for answer in _results():
                server.answer = answer
                server.sent.clear()
                arguments = {"x": [1, {"y": None}], "z": 1.5}
                by_sdk = await _verdict(
                    client.call_tool(tool, arguments, meta=meta or None, allow_input_required=allow)  # type: ignore[arg-type]
                )
                plain = await _verdict(
                    plain_call_tool(
                        client, server.send_raw_request, tool, arguments, meta, allow_input_required=allow
                    )
                )
                assert plain == by_sdk, (tool, meta, answer)
                assert server.sent[0] == server.sent[1], (tool, meta)
                checked += 1
    assert checked == 8 * len(_results())


async def test_a_tool_not_yet_listed_is_listed_first_as_the_sdk_does() -> None:
    async with _session() as (client, server):
        client._tool_output_schemas.pop("typed")
        server.answer = {"content": [], "structuredContent": {"n": "one"}, "resultType": "complete"}
        verdict = await _verdict(plain_call_tool(client, server.send_raw_request, "typed", {}, {}))
        assert "typed" in client._tool_output_schemas
    assert verdict[0] == "raised"
    assert "Invalid structured content returned by tool typed" in verdict[1][1]


def test_only_a_meta_without_a_progress_token_is_plain() -> None:
    assert plain_meta({})
    assert plain_meta({"traceparent": "x"})
    assert not plain_meta({"progressToken": 1})
