"""The console's access rules: who sees which toolsets and servers, who may chat, CSRF, origins,
and where the console is served by default."""

from __future__ import annotations

import pytest
from starlette.requests import Request

from mcp_gateway_svc.console.access import Access, Sessions, csrf_ok, same_origin
from mcp_gateway_svc.front import Tenants
from toolscout_kit.config import GatewaySettings, ToolSetConfig

TOOL_SETS = {
    "weather_only": ToolSetConfig(servers={"weather": True}),
    "planning": ToolSetConfig(servers={"weather": True, "time": ["get_current_time"]}),
}
ENV = {"ADMIN": "a" * 20, "TENANT": "t" * 20}


def _request(headers: dict[str, str] | None = None) -> Request:
    raw = [(k.lower().encode(), v.encode()) for k, v in {"host": "127.0.0.1:8000", **(headers or {})}.items()]
    return Request(
        {"type": "http", "method": "POST", "path": "/console/chat/send", "headers": raw, "scheme": "http"}
    )


def _access(chat: list[str]) -> Access:
    tenants = Tenants({"ADMIN": ["*"], "TENANT": ["weather_only", "missing"]}, env=ENV)
    return Access(tenants, TOOL_SETS, chat)


def test_a_tenant_sees_only_its_configured_toolsets_and_their_servers() -> None:
    access = _access(["ADMIN"])
    viewer = access.viewer(_request({"authorization": "Bearer " + ENV["TENANT"]}), None)
    assert viewer is not None
    assert viewer.toolsets == ("weather_only",)
    assert viewer.servers == frozenset({"weather"})
    assert not viewer.may_use_toolset("")
    assert not viewer.may_use_toolset("planning")
    assert not viewer.may_chat


def test_a_token_for_every_toolset_sees_every_tool_and_may_chat_when_listed() -> None:
    access = _access(["ADMIN"])
    viewer = access.viewer(_request({"authorization": "Bearer " + ENV["ADMIN"]}), None)
    assert viewer is not None
    assert viewer.toolsets == ("", "planning", "weather_only")
    assert viewer.servers is None
    assert viewer.may_see_server("anything")
    assert viewer.may_chat


def test_without_a_token_or_session_nobody_is_let_in_when_tokens_are_configured() -> None:
    access = _access(["*"])
    assert access.viewer(_request(), None) is None
    assert access.viewer(_request({"authorization": "Bearer wrong"}), None) is None
    session = access.sessions.new(access.sign_in(ENV["TENANT"]))
    viewer = access.viewer(_request(), session)
    assert viewer is not None
    assert viewer.tenant.principal == "TENANT"
    assert viewer.may_chat
    assert access.sign_in("wrong") is None
    assert access.sign_in("") is None


def test_without_tokens_the_local_user_sees_everything_and_chat_follows_the_setting() -> None:
    open_access = Access(Tenants({}, env={}), TOOL_SETS, ["*"])
    viewer = open_access.viewer(_request(), None)
    assert viewer is not None
    assert viewer.servers is None
    assert viewer.may_chat
    assert not viewer.signed_in
    closed = Access(Tenants({}, env={}), TOOL_SETS, [])
    viewer = closed.viewer(_request(), None)
    assert viewer is not None
    assert not viewer.may_chat


def test_csrf_needs_the_sessions_own_token() -> None:
    sessions = Sessions()
    session = sessions.new()
    assert csrf_ok(session, session.csrf)
    assert not csrf_ok(session, None)
    assert not csrf_ok(session, "")
    assert not csrf_ok(session, sessions.new().csrf)
    assert not csrf_ok(None, session.csrf)


@pytest.mark.parametrize(
    ("headers", "ok"),
    [
        ({}, True),
        ({"origin": "http://127.0.0.1:8000"}, True),
        ({"origin": "http://127.0.0.1:8000", "sec-fetch-site": "same-origin"}, True),
        ({"origin": "https://127.0.0.1:8000"}, True),
        ({"origin": "http://127.0.0.1:8001"}, False),
        ({"origin": "http://evil.example"}, False),
        ({"origin": "null"}, False),
        ({"sec-fetch-site": "cross-site"}, False),
        ({"sec-fetch-site": "same-site"}, False),
    ],
)
def test_posts_from_another_origin_are_told_apart(headers: dict[str, str], ok: bool) -> None:
    assert same_origin(_request(headers)) is ok


def test_sessions_are_bounded_and_forgotten_when_idle() -> None:
    sessions = Sessions(max_sessions=2, idle_seconds=3600)
    first, second, third = sessions.new(), sessions.new(), sessions.new()
    assert sessions.get(first.sid) is None
    assert sessions.get(second.sid) is second
    assert sessions.get(third.sid) is third
    idle = Sessions(idle_seconds=0.0)
    gone = idle.new()
    gone.seen -= 1.0
    assert idle.get(gone.sid) is None


@pytest.mark.parametrize(
    ("listen", "setting", "served"),
    [
        ("127.0.0.1:50054", "auto", True),
        ("localhost:0", "auto", True),
        ("[::1]:50054", "auto", True),
        ("0.0.0.0:50054", "auto", False),
        ("10.0.0.5:50054", "auto", False),
        ("0.0.0.0:50054", "on", True),
        ("127.0.0.1:50054", "off", False),
    ],
)
def test_the_console_is_served_on_loopback_by_default_and_elsewhere_only_when_on(
    listen: str, setting: str, served: bool
) -> None:
    assert GatewaySettings(console=setting).console_enabled(listen) is served  # type: ignore[arg-type]
