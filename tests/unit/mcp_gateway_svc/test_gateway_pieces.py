"""The gateway's plain-Python pieces: tenants, Host/Origin checks, tool lists, result translation,
sessions. (Over HTTP with real clients: tests/integration/test_gateway_*.py.)"""

from __future__ import annotations

import base64

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError
from prometheus_client import CollectorRegistry
from toolscout.client import CallToolResult, ContentBlock, GatewayMode, TokenAccounting, Tool, ToolPlan

from mcp_gateway_svc.calls import call_meta, mcp_result
from mcp_gateway_svc.front import Guard, Tenants, _endpoint_key
from mcp_gateway_svc.metrics import GatewayMetrics
from mcp_gateway_svc.sessions import SessionRegistry
from mcp_gateway_svc.tool_lists import listed_tools, mcp_tool, signature
from mcp_gateway_svc.views import ToolsetView
from toolscout_kit.errors import ConfigError
from toolscout_kit.status import outcome_unknown_text


def _tool(name: str, server: str = "s") -> Tool:
    return Tool(
        server=server,
        name=name,
        llm_name=f"{server}__{name}",
        description=f"{name} it.",
        input_schema_json='{"type":"object","properties":{"x":{"type":"string"}}}',
    )


SEARCH = Tool(server="", name="search_tools", llm_name="search_tools", description="Search (stable).")
APPEND_SEARCH = Tool(server="", name="search_tools", llm_name="search_tools", description="Search.")
CALL = Tool(server="", name="call_tool", llm_name="call_tool", description="Call.")


def _view(eager: list[Tool], deferred: list[Tool], *, search: bool = True) -> ToolsetView:
    plan = ToolPlan(
        loaded_tools=tuple(eager),
        has_search_tool=search,
        search_tool=SEARCH if search else None,
        manifest="",
        manifest_placement="tool_description",
        manifest_system_message="",
        total_tools=0,
        loaded_count=0,
        deferred_count=0,
        catalog_version="v1",
        tokens=TokenAccounting(),
        deferred_tools=tuple(deferred),
        call_tool=CALL if search else None,
        surface="stable",
    )
    return ToolsetView.from_plan(plan)


# --- tool lists --------------------------------------------------------------------------------


def test_each_mode_lists_what_it_promises() -> None:
    eager, a, b = _tool("e"), _tool("a"), _tool("b")
    view = _view([eager], [a, b])
    assert listed_tools(view, "meta") == [eager, SEARCH, CALL]
    assert listed_tools(view, "meta", ["s__a"]) == [eager, SEARCH, CALL]  # loaded tools never join meta
    assert listed_tools(view, "progressive", ["s__b", "s__a", "s__b", "s__e", "gone"], APPEND_SEARCH) == [
        eager,
        APPEND_SEARCH,
        CALL,
        b,
        a,
    ]
    assert listed_tools(view, "all") == [eager, a, b]
    # Nothing deferred: no search tool, every mode lists the tools themselves.
    plain = _view([eager, a], [], search=False)
    assert listed_tools(plain, "meta") == listed_tools(plain, "progressive") == [eager, a]


def test_the_signature_changes_exactly_when_the_list_does() -> None:
    view = _view([_tool("e")], [_tool("a")])
    assert signature(listed_tools(view, "meta")) == signature(
        listed_tools(_view([_tool("e")], [_tool("a")]), "meta")
    )
    assert signature(listed_tools(view, "all")) != signature(
        listed_tools(_view([_tool("e")], [_tool("z")]), "all")
    )


def test_a_catalog_tool_becomes_its_mcp_definition() -> None:
    tool = Tool(
        server="s",
        name="t",
        llm_name="s__t",
        title="T",
        description="Does t.",
        input_schema_json='{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}',
        output_schema_json='{"type":"object"}',
        annotations_json='{"readOnlyHint":true}',
    )
    mcp = mcp_tool(tool)
    assert (mcp.name, mcp.title, mcp.description) == ("s__t", "T", "Does t.")
    assert mcp.input_schema["required"] == ["a"]
    assert mcp.output_schema == {"type": "object"}
    assert mcp.annotations is not None
    assert mcp.annotations.read_only_hint is True


# --- results -----------------------------------------------------------------------------------


def test_a_pool_result_goes_back_as_the_mcp_server_sent_it() -> None:
    png = b"\x89PNG\r\n"
    result = CallToolResult(
        content=(
            ContentBlock(
                type="text", text="hello", raw_json='{"type":"text","annotations":{"priority":0.5}}'
            ),
            ContentBlock(
                type="image",
                data=png,
                mime_type="image/png",
                raw_json='{"type":"image","mimeType":"image/png"}',
            ),
            ContentBlock(
                type="resource",
                text="body",
                uri="file:///a",
                raw_json='{"type":"resource","resource":{"uri":"file:///a","mimeType":"text/plain"}}',
            ),
            ContentBlock(
                type="resource_link",
                uri="file:///b",
                name="b",
                raw_json='{"type":"resource_link","uri":"file:///b","name":"b"}',
            ),
        ),
        structured_content_json='{"n":1}',
        is_error=True,
    )
    mcp = mcp_result(result)
    dumped = mcp.model_dump(by_alias=True, mode="json", exclude_none=True)
    assert dumped["content"][0] == {"type": "text", "text": "hello", "annotations": {"priority": 0.5}}
    assert dumped["content"][1] == {
        "type": "image",
        "data": base64.b64encode(png).decode(),
        "mimeType": "image/png",
    }
    assert dumped["content"][2]["resource"] == {"uri": "file:///a", "mimeType": "text/plain", "text": "body"}
    assert dumped["content"][3]["uri"] == "file:///b"
    assert dumped["structuredContent"] == {"n": 1}
    assert dumped["isError"] is True


def test_call_meta_passes_the_callers_meta_on_without_the_protocols_own_keys() -> None:
    meta, timeout = call_meta(
        {
            "progressToken": 7,
            "io.modelcontextprotocol/clientInfo": {},
            "toolscout/timeoutSeconds": 2.5,
            "trace": "x",
        }
    )
    assert meta == {"trace": "x"}
    assert timeout == 2.5
    assert call_meta(None) == ({}, 0.0)


@pytest.mark.parametrize("bad", [True, -1, 0, "5", None, float("inf"), [3]])
def test_a_timeout_in_meta_that_is_not_seconds_above_0_is_refused_not_ignored(bad: object) -> None:
    with pytest.raises(MCPError) as refused:
        call_meta({"toolscout/timeoutSeconds": bad})
    assert refused.value.code == types.INVALID_PARAMS
    assert "toolscout/timeoutSeconds must be a number of seconds above 0" in refused.value.message


def test_the_outcome_unknown_text_says_the_tool_may_have_run_without_internal_addresses() -> None:
    text = outcome_unknown_text("s__t", "the call was sent to ipv4:127.0.0.1:50051 and lost.")
    assert "may or may not have run" in text
    assert "127.0.0.1" not in text


# --- tenants and the HTTP guard ----------------------------------------------------------------


def test_a_token_variable_that_is_not_set_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="TEAM_TOKEN is not set"):
        Tenants({"TEAM_TOKEN": ["a"]}, env={})


def test_tokens_identify_their_tenant_and_the_toolsets_it_may_use() -> None:
    tenants = Tenants({"A": ["x"], "ADMIN": ["*"]}, env={"A": "token-a-0001", "ADMIN": "token-admin"})
    a = tenants.authenticate("Bearer token-a-0001")
    admin = tenants.authenticate("bearer token-admin")
    assert a is not None
    assert admin is not None
    assert (a.principal, a.may_use("x"), a.may_use("y"), a.may_use("")) == ("A", True, False, False)
    assert (admin.may_use("y"), admin.may_use("")) == (True, True)
    assert tenants.authenticate("Bearer token-a-0002") is None
    assert tenants.authenticate("Basic token-a-0001") is None
    assert tenants.authenticate(None) is None
    assert not Tenants({}, env={}).enabled


def test_a_loopback_listener_accepts_local_hosts_and_origins_only() -> None:
    guard = Guard.from_settings("127.0.0.1:50054", ["http://localhost:*", "https://app.example"], None)
    assert guard.host_ok("127.0.0.1:50054")
    assert guard.host_ok("localhost:1")
    assert not guard.host_ok("evil.example:50054")
    assert not guard.host_ok(None)
    assert guard.origin_ok(None)
    assert guard.origin_ok("http://localhost:3000")
    assert guard.origin_ok("https://app.example")
    assert not guard.origin_ok("https://app.example.evil")
    # Scheme, host and port exactly; the host in any case; `:*` is a port, not a text prefix.
    assert guard.host_ok("LOCALHOST:8080")
    assert not guard.host_ok("localhost:1.evil.example")
    assert not guard.host_ok("localhost:*")
    assert not guard.host_ok("localhost:1/path")
    assert guard.origin_ok("HTTP://LocalHost:3000")
    assert not guard.origin_ok("http://localhost:1.evil.example")
    assert not guard.origin_ok("https://localhost:3000")
    assert not guard.origin_ok("https://app.example:8443")
    assert not guard.origin_ok("http://user@localhost:3000")
    assert not guard.origin_ok("http://localhost.evil:3000")
    # Behind a Service the Host is the Service's name: any, unless configured.
    assert Guard.from_settings("0.0.0.0:50054", [], None).host_ok("toolscout-gateway:50054")
    assert not Guard.from_settings("0.0.0.0:50054", [], ["gw.example"]).host_ok("other")


@pytest.mark.parametrize(
    ("path", "key"),
    [
        ("/mcp", ""),
        ("/mcp/", ""),
        ("/mcp/team", "team"),
        ("/mcp/team/", "team"),
        ("/mcp/a/b", None),
        ("/x", None),
    ],
)
def test_endpoint_paths(path: str, key: str | None) -> None:
    assert _endpoint_key(path) == key


# --- sessions ----------------------------------------------------------------------------------


def test_sessions_are_counted_by_mode_and_idle_ones_are_forgotten() -> None:
    registry = CollectorRegistry()
    sessions = SessionRegistry(GatewayMetrics(registry), idle_timeout=10)
    busy = sessions.open("a", endpoint="", mode="all", principal="")
    sessions.open("b", endpoint="", mode="progressive", principal="")
    gauge = registry.get_sample_value
    assert gauge("toolscout_gateway_open_sessions", {"mode": "all"}) == 1
    with sessions.serving(busy):
        # A request in flight (a GET stream) keeps its session however long it lasts.
        assert sessions.reap(now=busy.last_seen + 1000) == 1
    assert sessions.get("a") is busy
    assert sessions.get("b") is None
    assert gauge("toolscout_gateway_open_sessions", {"mode": "progressive"}) == 0
    sessions.close("a")
    assert len(sessions) == 0


def test_tool_calls_and_requests_are_counted_per_label_values_on_every_call() -> None:
    registry = CollectorRegistry()
    metrics = GatewayMetrics(registry)
    for outcome, seconds in (("ok", 0.002), ("ok", 0.003), ("tool_error", 0.001)):
        metrics.tool_call(GatewayMode.META, outcome, seconds)
    metrics.tool_call(GatewayMode.ALL, "ok", 0.004)
    for method in ("tools/call", "tools/call", "made/up", "other"):
        metrics.request(method, GatewayMode.META, "ok")

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(f"toolscout_gateway_{name}", labels)

    assert value("tool_calls_total", mode="meta", outcome="ok") == 2
    assert value("tool_calls_total", mode="meta", outcome="tool_error") == 1
    assert value("tool_calls_total", mode="all", outcome="ok") == 1
    assert value("tool_call_duration_seconds_count", outcome="ok") == 3
    assert value("tool_call_duration_seconds_sum", outcome="ok") == pytest.approx(0.009)
    assert value("requests_total", method="tools/call", mode="meta", outcome="ok") == 2
    assert value("requests_total", method="other", mode="meta", outcome="ok") == 2
