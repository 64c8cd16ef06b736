"""Which ``tools/call`` requests the gateway answers on its lean path, and how it writes them.

The lean path (:mod:`mcp_gateway_svc.lean`) takes a request only where the SDK's transport would
take it and relay nothing; everything else is left to the SDK (its answers, its errors). The
answers themselves are checked end to end by the gateway's integration tests, which now run on it.
"""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.server import Server
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.shared.exceptions import MCPError
from mcp_types.version import LATEST_HANDSHAKE_VERSION, MODERN_PROTOCOL_VERSIONS
from starlette.datastructures import Headers
from starlette.types import Message
from toolscout.client import GatewayMode

from mcp_gateway_svc.lean import (
    LeanCall,
    answer_session,
    holding,
    read_modern,
    read_session,
    write_json,
)
from mcp_gateway_svc.lean_rules import wire_result
from mcp_gateway_svc.sessions import Session

MODERN = MODERN_PROTOCOL_VERSIONS[-1]
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "host", "version": "1"},
}
URL = "http://127.0.0.1:1"


def _headers(method: str = "tools/call", name: str | None = "echo", **extra: str) -> Headers:
    raw = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": MODERN,
        "mcp-method": method,
        **({"mcp-name": name} if name is not None else {}),
        **extra,
    }
    return Headers(raw=[(k.encode(), v.encode()) for k, v in raw.items()])


def _modern(**params: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"x": 1}, "_meta": dict(ENVELOPE), **params},
    }


def test_a_plain_2026_call_is_read_as_the_handler_would_get_it() -> None:
    call = read_modern(_modern(), _headers(), base_url=URL)
    assert call == LeanCall(3, "echo", {"x": 1}, ENVELOPE, MODERN, "host", "{}", URL)
    assert call is not None
    assert call.modern


def test_a_2026_call_that_declares_what_a_server_may_ask_carries_it_for_input_rounds() -> None:
    message = _modern()
    message["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = {"elicitation": {}}
    call = read_modern(message, _headers(), base_url=URL)
    assert call is not None
    assert json.loads(call.declared_json or "") == {"elicitation": {}}


@pytest.mark.parametrize(
    ("change", "headers"),
    [
        # progress or log messages to relay
        ({"_meta": {**ENVELOPE, "progressToken": 1}}, {}),
        ({"_meta": {**ENVELOPE, "io.modelcontextprotocol/logLevel": "info"}}, {}),
        # an input_required round's answers, a task: the SDK's path
        ({"requestState": "s"}, {}),
        ({"task": {"ttl": 1}}, {}),
        # what the SDK refuses with its own error
        ({"arguments": "not an object"}, {}),
        ({"name": 5}, {}),
        ({"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}}, {}),
        ({}, {"mcp-method": "tools/list"}),
        ({}, {"mcp-name": "other"}),
        ({}, {"content-type": "text/plain"}),
        ({}, {"accept": "text/event-stream"}),
    ],
)
def test_a_2026_call_the_sdk_must_answer_is_left_to_it(
    change: dict[str, Any], headers: dict[str, str]
) -> None:
    message = _modern()
    message["params"].update(change)
    assert read_modern(message, _headers(**headers), base_url=URL) is None


def test_other_methods_and_notifications_are_left_to_the_sdk() -> None:
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": ENVELOPE}}
    assert read_modern(listing, _headers("tools/list", None), base_url=URL) is None
    note = {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "echo", "_meta": ENVELOPE}}
    assert read_modern(note, _headers(), base_url=URL) is None


class _Peer:
    """What the lean path reads of a session's SDK peer (the SDK's ``ServerSession`` has these)."""

    def __init__(
        self, capabilities: types.ClientCapabilities | None = None, initialized: bool = True
    ) -> None:
        self.protocol_version = LATEST_HANDSHAKE_VERSION
        self.client_capabilities = capabilities or types.ClientCapabilities()
        self.client_params = (
            types.InitializeRequestParams(
                protocol_version=LATEST_HANDSHAKE_VERSION,
                capabilities=self.client_capabilities,
                client_info=types.Implementation(name="sdk-host", version="1"),
            )
            if initialized
            else None
        )


def _session(peer: _Peer | None) -> Session:
    session = Session("s1", "", GatewayMode.META, "")
    session.outbound = peer
    return session


def _legacy_headers(**extra: str) -> Headers:
    raw = {"accept": "application/json, text/event-stream", "content-type": "application/json", **extra}
    return Headers(raw=[(k.encode(), v.encode()) for k, v in raw.items()])


_LEGACY = {"jsonrpc": "2.0", "id": "a", "method": "tools/call", "params": {"name": "echo"}}


def test_a_sessions_plain_call_is_read_with_the_handshake_the_session_made() -> None:
    call = read_session(_LEGACY, _legacy_headers(), _session(_Peer()), sse=True, base_url=URL)
    assert call == LeanCall("a", "echo", {}, None, LATEST_HANDSHAKE_VERSION, "sdk-host", None, URL)


def test_a_session_whose_host_can_be_asked_or_wants_log_messages_is_left_to_the_sdk() -> None:
    asks = _Peer(types.ClientCapabilities(sampling=types.SamplingCapability()))
    assert read_session(_LEGACY, _legacy_headers(), _session(asks), sse=True, base_url=URL) is None
    logged = _session(_Peer())
    logged.log_level = "info"
    assert read_session(_LEGACY, _legacy_headers(), logged, sse=True, base_url=URL) is None
    # before the handshake is known (no request of the session reached the SDK since initialize)
    assert read_session(_LEGACY, _legacy_headers(), _session(None), sse=True, base_url=URL) is None
    assert (
        read_session(_LEGACY, _legacy_headers(), _session(_Peer(initialized=False)), sse=True, base_url=URL)
        is None
    )
    # a 2026-07-28 request header on a session: the SDK routes it
    modern = _legacy_headers(**{"mcp-protocol-version": MODERN})
    assert read_session(_LEGACY, modern, _session(_Peer()), sse=True, base_url=URL) is None
    json_only = _legacy_headers(accept="application/json")
    assert read_session(_LEGACY, json_only, _session(_Peer()), sse=True, base_url=URL) is None


def _sent() -> tuple[list[Message], Any]:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    return sent, send


def test_a_result_is_shaped_as_the_sdks_runner_shapes_it() -> None:
    server: Server[Any] = Server("gw", version="9")
    result = types.CallToolResult(content=[types.TextContent(type="text", text="hi")])
    modern = wire_result(server, MODERN, result)
    assert modern["resultType"] == "complete"
    assert modern["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "gw"
    # a server's own stamp (passed through from the MCP server) wins
    stamped = result.model_copy(update={"meta": {"io.modelcontextprotocol/serverInfo": {"name": "up"}}})
    assert wire_result(server, MODERN, stamped)["_meta"]["io.modelcontextprotocol/serverInfo"] == {
        "name": "up"
    }
    legacy = wire_result(server, LATEST_HANDSHAKE_VERSION, result)
    assert "resultType" not in legacy
    assert "_meta" not in legacy
    assert legacy["content"] == [{"type": "text", "text": "hi"}]


async def test_answers_are_written_as_the_transports_write_them() -> None:
    sent, send = _sent()
    await write_json(send, 3, {"content": []})
    assert sent[0]["status"] == 200
    assert json.loads(sent[1]["body"]) == {"jsonrpc": "2.0", "id": 3, "result": {"content": []}}
    sent, send = _sent()
    await write_json(send, 3, MCPError(types.INVALID_PARAMS, "no"))
    assert sent[0]["status"] == 400  # 2026-07-28: the status by the error code
    assert json.loads(sent[1]["body"])["error"] == {"code": types.INVALID_PARAMS, "message": "no"}


def _done(outcome: Any) -> asyncio.Task[Any]:
    async def finished() -> Any:
        return outcome

    return asyncio.ensure_future(finished())


async def test_a_sessions_call_that_ends_in_time_is_answered_in_one_json_body_with_its_session_id() -> None:
    sent, send = _sent()
    await answer_session(send, "a", _done({"content": []}), session_id="r1.s1")
    headers = dict(sent[0]["headers"])
    assert headers[b"content-type"] == b"application/json"
    assert headers[b"mcp-session-id"] == b"r1.s1"
    assert sent[1]["body"] == b'{"jsonrpc":"2.0","id":"a","result":{"content":[]}}'
    sent, send = _sent()
    await answer_session(send, "a", _done(MCPError(types.INVALID_PARAMS, "no")), session_id="r1.s1")
    assert sent[0]["status"] == 200  # as the session transport answers an error
    assert json.loads(sent[1]["body"])["error"]["code"] == types.INVALID_PARAMS
    sent, send = _sent()
    await answer_session(send, "a", _done(RuntimeError("internal detail")), session_id="r1.s1")
    assert b"internal detail" not in sent[1]["body"]


async def test_a_long_session_call_is_answered_on_a_stream_kept_alive_and_a_cancelled_one_on_a_stream_too() -> (
    None
):
    pinged = asyncio.Event()
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)
        if message.get("body") == b": ping\r\n\r\n":
            pinged.set()

    async def long_call() -> Any:
        await pinged.wait()
        return {"content": []}

    await answer_session(send, "a", asyncio.ensure_future(long_call()), session_id="r1.s1", ping_seconds=0.01)
    assert dict(sent[0]["headers"])[b"content-type"] == b"text/event-stream"
    assert sent[1]["body"] == b": ping\r\n\r\n"
    assert (
        sent[-1]["body"]
        == b'event: message\r\ndata: {"jsonrpc":"2.0","id":"a","result":{"content":[]}}\r\n\r\n'
    )
    sent.clear()
    cancelled = asyncio.ensure_future(asyncio.Event().wait())
    cancelled.cancel()  # notifications/cancelled
    await answer_session(send, "a", cancelled, session_id="r1.s1")
    assert dict(sent[0]["headers"])[b"content-type"] == b"text/event-stream"
    event = sent[-1]["body"]
    assert json.loads(event.split(b"data: ")[1])["error"] == {"code": -32800, "message": "Request cancelled"}


async def test_a_lean_call_holds_the_sessions_idle_countdown_as_a_request_of_the_transport_does() -> None:
    transport = StreamableHTTPServerTransport("s1", idle_timeout=60)
    async with transport.connect():
        idle = transport.idle_scope
        assert idle is not None
        with holding(transport):
            assert idle.deadline == math.inf
        assert anyio.current_time() < idle.deadline <= anyio.current_time() + 60
