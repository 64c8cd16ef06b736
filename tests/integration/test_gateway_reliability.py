"""The gateway under an attacker's and a careless user's input (issue 30): real pool, discovery and
MCP server processes on 127.0.0.1:0, the gateway's real HTTP server in front, raw HTTP for the bytes
no SDK would send."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest

from tests.support.gateway import MODERN, gateway_stack, post
from tests.support.mcp_servers import example_server_config
from toolscout_kit.config import ToolscoutConfig, parse_config

_INTERNAL = re.compile(r"Traceback|File \"|ipv4:|127\.0\.0\.1:\d+|\.py\b")
WAIT = 30.0
_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}


def _config(tmp: Path, **gateway: Any) -> ToolscoutConfig:
    return parse_config(
        {
            "servers": {
                "text": example_server_config("text"),
                "notes": example_server_config("notes", defer_loading=True),
            },
            "tool_discovery": {"enabled": True},
            "tool_sets": {
                "team_b": {"servers": {"notes": True}},
                "prog": {"servers": {"text": True}},
                "every": {"servers": {"text": True, "notes": True}},
            },
            "toolscout": {"gateway": {"modes": {"prog": "progressive", "every": "all"}, **gateway}},
        },
        base_dir=tmp,
    )


# --- 1. closed when the stack is closed ----------------------------------------------------------


async def test_with_the_services_token_set_and_no_gateway_tokens_the_gateway_asks_for_that_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLSCOUT_AUTH_TOKEN", "services-secret-token-01")
    async with gateway_stack(_config(tmp_path)) as gw:
        anonymous = await post(gw.url, _LIST, modern=True)
        wrong = await post(gw.url, _LIST, modern=True, headers={"authorization": "Bearer nope"})
        good = await post(
            gw.url + "/team_b",
            _LIST,
            modern=True,
            headers={"authorization": "Bearer services-secret-token-01"},
        )
    assert anonymous.status_code == 401
    assert wrong.status_code == 401
    assert good.status_code == 200, good.text
    # Lists are private to the authorization context now that tokens are on.
    assert good.json()["result"]["cacheScope"] == "private"


async def test_allow_anonymous_keeps_the_gateway_open_beside_closed_services(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLSCOUT_AUTH_TOKEN", "services-secret-token-01")
    async with gateway_stack(_config(tmp_path, allow_anonymous=True)) as gw:
        anonymous = await post(gw.url, _LIST, modern=True)
    assert anonymous.status_code == 200
    assert types.JSONRPCResponse.model_validate(anonymous.json()).result["tools"]


# --- 2. every JSON text the gateway accepts: the bounded JSON rules and the JSON-RPC envelope -------

_SURROGATE = "lone UTF-16 surrogate"
_ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "raw-test", "version": "1"},
}


def _call(modern: bool, **fields: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": "text__count_words", "arguments": {"text": "a b"}}
    params.update(fields.pop("params", {}))
    if modern:
        params["_meta"] = {**_ENVELOPE, **params.get("_meta", {})}
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params, **fields}


def _text(value: dict[str, Any], **marks: str) -> bytes:
    text = json.dumps(value)
    for mark, raw in marks.items():
        text = text.replace(f'"@{mark}@"', raw)
    return text.encode()


_S = {"s": '"\\ud800"'}  # the JSON text "\ud800": a lone surrogate escape
_DEEP = {"d": "[" * 100 + "]" * 100}


def _cases(modern: bool) -> list[tuple[str, bytes, int, int, str]]:
    """(case, body, HTTP status, JSON-RPC code, words the message must hold)."""

    def c(**fields: Any) -> dict[str, Any]:
        return _call(modern, **fields)

    return [
        ("surrogate in jsonrpc", _text(c(jsonrpc="@s@"), **_S), 400, types.INVALID_PARAMS, _SURROGATE),
        ("surrogate in id", _text(c(id="@s@"), **_S), 400, types.INVALID_PARAMS, _SURROGATE),
        ("surrogate in method", _text(c(method="@s@"), **_S), 400, types.INVALID_PARAMS, _SURROGATE),
        ("surrogate in name", _text(c(params={"name": "@s@"}), **_S), 400, types.INVALID_PARAMS, _SURROGATE),
        (
            "surrogate in an argument",
            _text(c(params={"arguments": {"text": "@s@"}}), **_S),
            400,
            types.INVALID_PARAMS,
            _SURROGATE,
        ),
        (
            "surrogate in an argument's name",
            _text(c(params={"arguments": {"text": "a"}}), **_S).replace(b'"text"', b'"\\udc00"'),
            400,
            types.INVALID_PARAMS,
            _SURROGATE,
        ),
        (
            "surrogate in _meta",
            _text(c(params={"_meta": {"progressToken": "@s@"}}), **_S),
            400,
            types.INVALID_PARAMS,
            _SURROGATE,
        ),
        (
            "arguments nested too deeply",
            _text(c(params={"arguments": {"text": "@d@"}}), **_DEEP),
            400,
            types.INVALID_PARAMS,
            "nested deeper than 64",
        ),
        ("not JSON", b'{"jsonrpc": "2.0", "id": 1,', 400, types.PARSE_ERROR, "not valid JSON"),
        (
            "not UTF-8",
            _text(c(params={"arguments": {"text": "X"}})).replace(b'"X"', b'"\xff"'),
            400,
            types.PARSE_ERROR,
            "not UTF-8",
        ),
        ("a batch", json.dumps([c()]).encode(), 400, types.INVALID_REQUEST, "batch"),
        ("a number", b"42", 400, types.INVALID_REQUEST, "one JSON-RPC message"),
        (
            "no method",
            _text({k: v for k, v in c().items() if k != "method"}),
            400,
            types.INVALID_REQUEST,
            '"method"',
        ),
        ("a method that is not a string", _text(c(method=7)), 400, types.INVALID_REQUEST, '"method"'),
        (
            "no jsonrpc",
            _text({k: v for k, v in c().items() if k != "jsonrpc"}),
            400,
            types.INVALID_REQUEST,
            "jsonrpc",
        ),
        ("jsonrpc 1.0", _text(c(jsonrpc="1.0")), 400, types.INVALID_REQUEST, "jsonrpc"),
        ("a boolean id", _text(c(id=True)), 400, types.INVALID_REQUEST, '"id"'),
        ("a fractional id", _text(c(id=1.5)), 400, types.INVALID_REQUEST, '"id"'),
        ("an object id", _text(c(id={"a": 1})), 400, types.INVALID_REQUEST, '"id"'),
        (
            "params that are a list",
            _text({**c(), "params": [1]}),
            400,
            types.INVALID_PARAMS,
            '"params"',
        ),
    ]


async def test_every_json_text_the_gateway_accepts_is_held_to_the_bounded_rules_before_anything_is_sent(
    tmp_path: Path,
) -> None:
    wrong: list[str] = []
    async with gateway_stack(_config(tmp_path)) as gw:
        for endpoint in ("", "/prog", "/every"):
            for modern in (False, True):
                for case, body, status, code, words in _cases(modern):
                    answer = await post(gw.url + endpoint, body, modern=modern)
                    where = f"{endpoint or '/mcp'} {'2026-07-28' if modern else '2025-11-25'} {case}"
                    try:
                        error = answer.json()["error"]
                    except (ValueError, KeyError):
                        wrong.append(f"{where}: {answer.status_code} {answer.text[:200]}")
                        continue
                    message = error["message"]
                    if (answer.status_code, error["code"]) != (status, code) or words not in message:
                        wrong.append(f"{where}: {answer.status_code} {error}")
                    elif (
                        "\n" in message or "validation error" in message.lower() or _INTERNAL.search(message)
                    ):
                        wrong.append(f"{where}: not one sentence: {message!r}")
        calls = gw.gateway.registry.get_sample_value
        sent = sum(
            calls("toolscout_gateway_tool_calls_total", {"mode": m, "outcome": o}) or 0
            for m in ("meta", "progressive", "all")
            for o in ("ok", "tool_error", "error", "unavailable", "unknown")
        )
    assert wrong == []
    assert sent == 0  # nothing reached the pool


async def test_an_unknown_protocol_version_header_is_named_in_the_answer(tmp_path: Path) -> None:
    async with gateway_stack(_config(tmp_path)) as gw:
        answers = [
            await post(gw.url + endpoint, _LIST, headers={"mcp-protocol-version": version})
            for endpoint in ("", "/prog", "/every")
            for version in ("1999-01-01", "garbage")
        ]
    for answer in answers:
        assert answer.status_code == 400
        error = answer.json()["error"]
        assert error["code"] == types.INVALID_REQUEST
        assert error["message"].startswith("unsupported MCP-Protocol-Version")
        assert MODERN in error["message"]


# --- 4. slow and half-sent requests ---------------------------------------------------------------


async def _half_sent(port: int, *, body: bool) -> bytes:
    """Sends a POST's headers (and half its body, with ``body``), then waits for the server to
    answer or close; returns what it answered."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = (
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        "Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n"
    )
    writer.write((head + "\r\n" + '{"jsonrpc": "2.0", ').encode() if body else head.encode())
    await writer.drain()
    try:
        with anyio.fail_after(WAIT):
            return await reader.read()
    finally:
        writer.close()


async def test_requests_whose_headers_or_body_do_not_arrive_are_dropped_with_one_line_each(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    async with gateway_stack(_config(tmp_path, request_read_timeout=0.5)) as gw:
        port = gw.gateway.port
        answers = await asyncio.gather(
            *(_half_sent(port, body=True) for _ in range(10)),
            *(_half_sent(port, body=False) for _ in range(5)),
        )
        # A client that goes away mid-body.
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{")
        await writer.drain()
        writer.close()
        still = await post(gw.url, _LIST, modern=True)
        dropped = gw.gateway.registry.get_sample_value(
            "toolscout_gateway_http_rejections_total", {"reason": "body_timeout"}
        )
        seen = ""
        with anyio.fail_after(WAIT):
            while "went away before its body" not in seen:
                await anyio.sleep(0.05)  # the log line has no event to wait on
                seen += capfd.readouterr().out
    logged = seen + "".join(capfd.readouterr())
    assert [a.split(b"\r\n", 1)[0] for a in answers[:10]] == [b"HTTP/1.1 408 Request Timeout"] * 10
    assert answers[10:] == [b""] * 5  # headers never finished: closed without an answer
    assert dropped == 10
    assert still.status_code == 200
    assert logged.count("its body did not arrive in time") == 10
    assert logged.count("its request headers did not arrive in time") == 5
    assert "Traceback" not in logged


# --- 3. abandoned sessions ------------------------------------------------------------------------

_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "abandoning-client", "version": "1"},
    },
}


async def _open_session(url: str, token: str) -> httpx2.Response:
    """Opens a session with initialize and walks away (no DELETE, no GET stream)."""
    return await post(url, _INITIALIZE, headers={"authorization": f"Bearer {token}"})


async def test_abandoned_sessions_are_evicted_least_recently_used_first_instead_of_locking_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEAM_A_TOKEN", "team-a-token-000001")
    monkeypatch.setenv("TEAM_B_TOKEN", "team-b-token-000002")
    config = _config(
        tmp_path,
        tokens={"TEAM_A_TOKEN": ["*"], "TEAM_B_TOKEN": ["*"]},
        max_sessions=4,
        max_sessions_per_tenant=3,
    )
    async with gateway_stack(config) as gw:
        url = gw.gateway.toolset_url("every")
        a = [await _open_session(url, "team-a-token-000001") for _ in range(3)]
        a_ids = [r.headers.get("mcp-session-id") for r in a]
        # Team A at its quota opens one more: its least recently used idle session goes.
        a4 = await _open_session(url, "team-a-token-000001")
        first_gone = await post(
            url,
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
            headers={
                "authorization": "Bearer team-a-token-000001",
                "mcp-session-id": a_ids[0] or "",
                "mcp-protocol-version": "2025-11-25",
            },
        )
        # Team B opens two: with the second the replica is at max_sessions (4), so the oldest
        # idle session of anyone (A's second) goes.
        b = [await _open_session(url, "team-b-token-000002") for _ in range(2)]
        second_gone = await post(
            url,
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
            headers={
                "authorization": "Bearer team-a-token-000001",
                "mcp-session-id": a_ids[1] or "",
                "mcp-protocol-version": "2025-11-25",
            },
        )
        value = gw.gateway.registry.get_sample_value
        evicted = {
            r: value("toolscout_gateway_session_evictions_total", {"reason": r})
            for r in ("tenant_quota", "max_sessions")
        }
    assert [r.status_code for r in (*a, a4, *b)] == [200] * 6
    assert all(a_ids)
    assert first_gone.status_code == 404
    assert second_gone.status_code == 404
    assert evicted == {"tenant_quota": 1.0, "max_sessions": 1.0}


# --- 7. the smaller items -------------------------------------------------------------------------


async def test_origin_and_host_are_compared_by_scheme_host_and_port_exactly(tmp_path: Path) -> None:
    async with gateway_stack(_config(tmp_path)) as gw:
        port = gw.gateway.port

        async def status(**headers: str) -> int:
            return (await post(gw.url, _LIST, modern=True, headers=headers)).status_code

        answers = {
            "prefix origin": await status(origin="http://localhost:1.evil.example"),
            "other scheme": await status(origin="https://localhost:3000"),
            "origin in capitals": await status(origin="HTTP://LOCALHOST:3000"),
            "prefix host": await status(host="localhost:1.evil.example"),
            "host in capitals": await status(host=f"LocalHost:{port}"),
        }
    assert answers == {
        "prefix origin": 403,
        "other scheme": 403,
        "origin in capitals": 200,
        "prefix host": 421,
        "host in capitals": 200,
    }


async def test_readyz_says_not_ready_while_discovery_is_down(tmp_path: Path) -> None:
    async with gateway_stack(_config(tmp_path)) as gw:
        ready = f"http://127.0.0.1:{gw.gateway.port}/readyz"
        async with httpx2.AsyncClient(timeout=10) as http:

            async def until(status: int) -> httpx2.Response:
                with anyio.fail_after(WAIT):
                    while True:
                        answer = await http.get(ready)
                        if answer.status_code == status:
                            return answer
                        await anyio.sleep(0.05)  # readiness has no event to wait on from outside

            await until(200)
            await gw.stack.discovery.stop(0.1)
            answer = await until(503)
    assert answer.json() == {"status": "not ready"}


async def test_search_tools_refuses_keys_it_does_not_take_and_a_bad_meta_timeout_is_refused(
    tmp_path: Path,
) -> None:
    search = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "search_tools", "arguments": {"query": "add a note", "max_results": -1}},
    }
    bad_meta = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {
            "name": "text__slugify",
            "arguments": {"text": "a b"},
            "_meta": {**_ENVELOPE, "toolscout/timeoutSeconds": -5},
        },
    }
    unknown = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "text__nope", "arguments": {}},
    }
    async with gateway_stack(_config(tmp_path)) as gw:
        refused = (await post(gw.url, search, modern=True)).json()["result"]
        timeout = (await post(gw.url + "/every", bad_meta, modern=True)).json()
        hint = (await post(gw.url + "/every", unknown, modern=True)).json()["result"]
    assert refused["isError"] is True
    assert "'max_results' is not one of them" in refused["content"][0]["text"]
    assert timeout["error"]["code"] == types.INVALID_PARAMS
    assert "toolscout/timeoutSeconds" in timeout["error"]["message"]
    # An "all" endpoint lists no search_tools: its hint says where the tools are.
    assert hint["content"][0]["text"].endswith("See tools/list.")
