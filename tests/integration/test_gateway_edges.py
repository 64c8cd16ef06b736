"""The MCP front door at its edges: bad input, tenants, catalog changes, servers that die, replicas.

Real pool and discovery on 127.0.0.1:0 with real MCP server processes; the gateway in front; clients
are the ``mcp`` SDK and raw HTTP (for bytes no SDK would send).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import IncomingMessage
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ToolsListChanged, listen

from tests.support.gateway import MODERN, RoundRobin, gateway_stack, post, start_gateway
from tests.support.mcp_servers import MISBEHAVING_SERVER, example_server_config, free_port, misbehaving_config
from tests.support.stack import running_stack
from toolscout_kit.config import ToolscoutConfig, parse_config

WAIT = 30.0
_INTERNAL = re.compile(r"Traceback|File \"|ipv4:|127\.0\.0\.1:\d+|\.py\b")


def _text(result: types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))


def _config(tmp: Path, servers: dict[str, Any] | None = None, **gateway: Any) -> ToolscoutConfig:
    return parse_config(
        {
            "servers": servers
            or {
                "text": example_server_config("text"),
                "weather": example_server_config("weather", defer_loading=True),
                "notes": example_server_config("notes", defer_loading=True),
            },
            "tool_discovery": {"enabled": True},
            "tool_sets": {
                "team_a": {"servers": {"weather": True}},
                "team_b": {"servers": {"notes": True}},
            },
            "toolscout": {"gateway": gateway},
        },
        base_dir=tmp,
    )


# --- bad input ---------------------------------------------------------------------------------

_BAD_INPUT = [
    # (name, body, modern, HTTP status, JSON-RPC error code)
    ("not json", b"{not json", False, 400, types.PARSE_ERROR),
    ("not json (2026)", b"{not json", True, 400, types.PARSE_ERROR),
    ("a batch", [{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}], True, 400, types.INVALID_REQUEST),
    ("no jsonrpc member", {"id": 1, "method": "tools/list"}, True, 400, types.INVALID_REQUEST),
    (
        "an unknown method",
        {"jsonrpc": "2.0", "id": 1, "method": "tools/destroy", "params": {}},
        True,
        404,
        types.METHOD_NOT_FOUND,
    ),
    (
        "tools/call without a name",
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"arguments": {}}},
        True,
        400,
        types.INVALID_PARAMS,
    ),
    (
        "arguments that are not an object",
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "call_tool", "arguments": [1]},
        },
        False,
        200,
        types.INVALID_PARAMS,
    ),
]


@pytest.mark.parametrize(
    ("case", "body", "modern", "status", "code"), _BAD_INPUT, ids=[c[0] for c in _BAD_INPUT]
)
async def test_malformed_json_rpc_gets_the_specifications_error_codes_and_no_internals(
    tmp_path: Path, case: str, body: Any, modern: bool, status: int, code: int
) -> None:
    async with gateway_stack(_config(tmp_path)) as gw:
        answer = await post(gw.url, body, modern=modern)
        # The gateway keeps serving after it.
        listed = await post(
            gw.url, {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}, modern=True
        )
    error = _error(answer.text)
    assert (answer.status_code, error["code"]) == (status, code), answer.text
    assert not _INTERNAL.search(answer.text)
    assert listed.status_code == 200


def _error(text: str) -> dict[str, Any]:
    # A JSON answer, or one SSE event carrying it (the handshake revisions' stateless transport).
    payload = text
    if text.startswith("event:"):
        payload = next(line[5:].strip() for line in text.splitlines() if line.startswith("data:"))
    body = json.loads(payload)
    error: dict[str, Any] = body["error"]
    return error


async def test_http_level_refusals_come_before_any_parsing(tmp_path: Path) -> None:
    big = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"pad": "x" * 5000}}
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    async with gateway_stack(_config(tmp_path, max_body_bytes=4096)) as gw:
        too_big = await post(gw.url, big, modern=True)
        bad_origin = await post(gw.url, request, modern=True, headers={"origin": "https://evil.example"})
        good_origin = await post(gw.url, request, modern=True, headers={"origin": "http://localhost:3000"})
        bad_host = await post(gw.url, request, modern=True, headers={"host": "attacker.example:80"})
        unknown = await post(gw.url.replace("/mcp", "/mcp/nope"), request, modern=True)
        elsewhere = await post(gw.url.replace("/mcp", "/admin"), request, modern=True)
        value = gw.gateway.registry.get_sample_value
        rejected = {
            r: value("toolscout_gateway_http_rejections_total", {"reason": r})
            for r in ("too_large", "bad_origin", "bad_host", "unknown_toolset")
        }
    assert too_big.status_code == 413
    assert bad_origin.status_code == 403
    assert good_origin.status_code == 200
    assert bad_host.status_code == 421
    assert unknown.status_code == 404
    assert "unknown toolset 'nope'" in unknown.text
    assert elsewhere.status_code == 404
    assert rejected == {"too_large": 1.0, "bad_origin": 1.0, "bad_host": 1.0, "unknown_toolset": 1.0}


# --- tenants -----------------------------------------------------------------------------------


async def test_tokens_are_required_and_bind_tenants_to_their_toolsets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEAM_A_TOKEN", "a-secret-token-0001")
    monkeypatch.setenv("ADMIN_TOKEN", "admin-secret-token-02")
    config = _config(tmp_path, tokens={"TEAM_A_TOKEN": ["team_a"], "ADMIN_TOKEN": ["*"]})
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    team_a = {"authorization": "Bearer a-secret-token-0001"}
    async with gateway_stack(config) as gw:
        base = gw.url
        missing = await post(base + "/team_a", request, modern=True)
        wrong = await post(base + "/team_a", request, modern=True, headers={"authorization": "Bearer nope"})
        other = await post(base + "/team_b", request, modern=True, headers=team_a)
        everything = await post(base, request, modern=True, headers=team_a)
        no_such = await post(base + "/nope", request, modern=True, headers=team_a)
        admin = await post(
            base, request, modern=True, headers={"authorization": "Bearer admin-secret-token-02"}
        )
        async with httpx2.AsyncClient(headers=team_a, timeout=30) as http:
            transport = streamable_http_client(base + "/team_a", http_client=http)
            async with Client(transport, mode="legacy") as client:
                names = [t.name for t in (await client.list_tools()).tools]
                by_name = await client.call_tool("search_tools", {"tool_names": ["notes__add_note"]})
                by_query = await client.call_tool("search_tools", {"query": "add a note with tags"})
                called = await client.call_tool(
                    "call_tool", {"name": "notes__add_note", "arguments": {"title": "x"}}
                )
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"] == 'Bearer realm="toolscout"'
    assert wrong.status_code == 401
    assert 'error="invalid_token"' in wrong.headers["www-authenticate"]
    # Another team's toolset, every tool, and a toolset that does not exist look the same.
    assert (other.status_code, everything.status_code, no_such.status_code) == (403, 403, 403)
    assert admin.status_code == 200
    assert names == ["search_tools", "call_tool", "read_result"]
    # Team B's tools never appear in an answer to team A, not even as a suggestion: only the name
    # team A itself sent comes back, as not found.
    for result in (by_name, by_query, called):
        shown = (_text(result) + json.dumps(result.structured_content or {})).replace("notes__add_note", "")
        assert "notes__" not in shown
        assert "server: notes" not in shown
    assert "'notes__add_note' (no similar names)" in _text(by_name)
    assert called.is_error
    assert "Unknown tool 'notes__add_note'" in _text(called)


async def test_a_gateway_token_variable_that_is_not_set_refuses_to_start(tmp_path: Path) -> None:
    config = _config(tmp_path, tokens={"TS_GATEWAY_UNSET_TOKEN": ["team_a"]})
    async with running_stack(config, orchestrator=False) as stack:
        with pytest.raises(Exception, match="TS_GATEWAY_UNSET_TOKEN is not set"):
            await start_gateway(config, stack)


# --- catalog changes ---------------------------------------------------------------------------


async def test_a_catalog_change_reaches_sessions_listen_streams_and_meta_search_at_once(
    tmp_path: Path,
) -> None:
    servers = {"fixture": misbehaving_config()}
    config = parse_config(
        {
            "servers": servers,
            "tool_discovery": {"enabled": True, "defer_all": True},
            "tool_sets": {"fx": {"servers": {"fixture": True}}},
            "toolscout": {"gateway": {"modes": {"fx": "all"}}},
        },
        base_dir=tmp_path,
    )
    changed = anyio.Event()

    async def handler(message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with gateway_stack(config) as gw:
        url = gw.gateway.toolset_url("fx")
        with anyio.fail_after(WAIT):
            async with (
                Client(url, mode="legacy", message_handler=handler) as legacy,
                Client(url, mode=MODERN) as modern,
            ):
                before = {t.name for t in (await legacy.list_tools()).tools}
                async with listen(modern.session, tools_list_changed=True) as subscription:
                    # The MCP server adds a tool and says so; the pool re-lists, discovery plans again.
                    await legacy.call_tool("fixture__add_tool", {})
                    await changed.wait()
                    event = await subscription.__anext__()
                after = {t.name for t in (await legacy.list_tools()).tools}
                modern_after = {t.name for t in (await modern.list_tools(cache_mode="refresh")).tools}
            async with Client(gw.url, mode=MODERN) as meta:
                found = await meta.call_tool("search_tools", {"tool_names": ["fixture__extra"]})
    assert "fixture__extra" not in before
    assert event == ToolsListChanged()
    assert "fixture__extra" in after
    assert "fixture__extra" in modern_after
    assert "fixture__extra" in _text(found)


# --- servers that die --------------------------------------------------------------------------


async def test_a_server_killed_mid_call_runs_the_tool_once_and_a_down_servers_tool_names_it(
    tmp_path: Path,
) -> None:
    calls = tmp_path / "calls"
    gone = tmp_path / "gone"
    # Starts the fixture unless the file "gone" exists: then it fails to start, and stays down.
    launcher = (
        "import os, sys; "
        f"sys.exit(3) if os.path.exists({str(gone)!r}) else "
        f"os.execv(sys.executable, [sys.executable, {str(MISBEHAVING_SERVER)!r}, '--call-log', {str(calls)!r}])"
    )
    servers = {"fixture": {"command": sys.executable, "args": ["-c", launcher]}}
    config = parse_config(
        {"servers": servers, "toolscout": {"pool": {"blip_grace": 0, "initial_backoff": 0.1}}},
        base_dir=tmp_path,
    )
    async with gateway_stack(config) as gw, Client(gw.url, mode="legacy") as client:
        gone.write_text("")
        crashed = await client.call_tool("fixture__crash", {})
        with anyio.fail_after(WAIT):
            while True:
                down = await client.call_tool("fixture__echo", {"text": "hi"})
                if "was not run" in _text(down):
                    break
                await anyio.sleep(0.1)
    assert crashed.is_error
    assert _text(crashed).count("may or may not have run") == 1, _text(crashed)
    assert "it was not run again" in _text(crashed)
    assert calls.read_text().splitlines() == ["crash"]  # once: never retried
    assert down.is_error
    text = _text(down)
    assert "'fixture__echo' was not run" in text
    assert "fixture" in text
    assert re.search(r"reconnecting|failed|starting", text)
    assert not _INTERNAL.search(text)


# --- two replicas ------------------------------------------------------------------------------


async def test_a_progressive_session_works_through_a_balancer_over_two_replicas(tmp_path: Path) -> None:
    peers = [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]
    # Each replica reaches the other through `peers` (in Kubernetes: a headless Service's name).
    config = _config(tmp_path, modes={"team_a": "progressive"}, peers=peers)
    async with running_stack(config, orchestrator=False) as stack:
        first = await start_gateway(config, stack, replica_id="aaaa0001", listen=peers[0])
        second = await start_gateway(config, stack, replica_id="bbbb0002", listen=peers[1])
        try:
            changed = anyio.Event()

            async def handler(message: IncomingMessage) -> None:
                if isinstance(message, types.ToolListChangedNotification):
                    changed.set()

            async with RoundRobin(peers) as balancer:
                url = f"http://127.0.0.1:{balancer.port}/mcp/team_a"
                with anyio.fail_after(WAIT):
                    async with Client(url, mode="legacy", message_handler=handler) as client:
                        await client.call_tool("search_tools", {"query": "forecast"})
                        lists = [[t.name for t in (await client.list_tools()).tools] for _ in range(4)]
                        called = await client.call_tool(
                            "weather__get_forecast", {"location": {"city": "London"}}
                        )
                hits = list(balancer.hits)
            forwarded = [
                g.registry.get_sample_value("toolscout_gateway_forwarded_requests_total", {"outcome": "ok"})
                or 0
                for g in (first, second)
            ]
        finally:
            await first.stop(0.5)
            await second.stop(0.5)
    assert all(h > 2 for h in hits)  # both replicas were hit
    assert all(names == ["search_tools", "call_tool", "weather__get_forecast"] for names in lists)
    assert _text(called).startswith("London forecast")
    assert sum(forwarded) > 0
