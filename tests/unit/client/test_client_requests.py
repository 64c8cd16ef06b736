"""Toolsets and requests as values: ToolsetRef is canonical and hashable, requests take what callers have."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from toolscout import client as tc
from toolscout.client import wire
from toolscout.mcp_pool.v1 import mcp_pool_pb2 as pb


def test_an_inline_filter_written_differently_is_one_toolset() -> None:
    a = tc.ToolsetRef.of({"servers": {"weather": True, "mail": ["send_email", "list_inbox"]}})
    b = tc.ToolsetRef.inline(
        '{"description": "other words", "servers": {"mail": ["list_inbox", "send_email", "send_email"], "weather": true}}'
    )
    assert a == b
    assert hash(a) == hash(b)
    assert a.key == b.key
    assert a.key.startswith("inline:")
    assert a.is_inline
    assert json.loads(a.filter_json) == {"servers": {"mail": ["list_inbox", "send_email"], "weather": True}}
    assert a != tc.ToolsetRef.of({"servers": {"weather": True, "mail": {"exclude": ["send_email"]}}})
    assert {a: 1}[b] == 1


def test_a_name_is_a_toolset_too_and_empty_means_every_tool() -> None:
    assert tc.ToolsetRef.of("planning") == tc.ToolsetRef.named("planning") == tc.ToolsetRef(name="planning")
    assert tc.ToolsetRef.of("planning").key == "planning"
    assert not tc.ToolsetRef.of("planning").is_inline
    assert tc.ToolsetRef.of(None) == tc.ToolsetRef.of("") == tc.ToolsetRef()
    ref = tc.ToolsetRef.of({"servers": {"time": True}})
    assert tc.ToolsetRef.of(ref) is ref


@pytest.mark.parametrize("text", ["{", "[]", "1", '{"servers": ' + "[" * 5000 + "]" * 5000 + "}"])
def test_text_that_is_not_an_object_is_kept_for_discovery_to_refuse(text: str) -> None:
    assert tc.ToolsetRef.inline(text).filter_json == text


def test_a_filter_of_the_wrong_shape_is_kept_as_it_is_for_discovery_to_refuse() -> None:
    ref = tc.ToolsetRef.of({"servers": {"weather": "all", "mail": [1, 2]}})
    assert json.loads(ref.filter_json) == {"servers": {"mail": [1, 2], "weather": "all"}}


def test_requests_take_names_mappings_and_lists_and_hold_refs_and_tuples() -> None:
    plan = tc.PlanRequest(toolset="planning", discovered_tools=["a", "b"])  # type: ignore[arg-type]
    assert plan.toolset == tc.ToolsetRef(name="planning")
    assert plan.discovered_tools == ("a", "b")
    search = tc.SearchRequest("q", toolset={"servers": {"time": True}}, tool_names=["x"])  # type: ignore[arg-type]
    assert search.toolset.is_inline
    assert search.tool_names == ("x",)
    assert hash(search) == hash(tc.SearchRequest("q", toolset=search.toolset, tool_names=("x",)))


def test_requests_travel_the_wire_and_back_unchanged() -> None:
    plan = tc.PlanRequest(tc.ToolsetRef.named("p"), ("a",), "anthropic", True, False, "stable")
    assert wire.plan_request(wire.plan_request_pb(plan)) == plan
    search = tc.SearchRequest(
        "forecast",
        tc.ToolsetRef.of({"servers": {"weather": True}}),
        server_name="weather",
        tool_names=("w",),
        loaded_tools=("l",),
        max_results=3,
        offset=1,
        include_plan=True,
        discovered_tools=("d",),
        provider="openai",
        compact_text=True,
        surface="append",
    )
    assert wire.search_request(wire.search_request_pb(search)) == search
    call = tc.CallRequest.to("now", {"tz": "UTC"}, server="time", meta={"k": 1}, timeout_seconds=2.5)
    assert wire.call_request(wire.call_request_pb(call)) == call
    assert (call.name, call.tool, call.llm_name) == ("now", "now", "")
    assert tc.CallRequest.to("time__now").name == "time__now"


@pytest.mark.parametrize("copy", [None, *tc.StructuredCopy])
def test_the_structured_copy_travels_as_its_proto_enum_and_unspecified_is_none(copy: Any) -> None:
    call = dataclasses.replace(tc.CallRequest.to("time__now"), structured_copy=copy)
    message = wire.call_request_pb(call)
    assert message.structured_copy == (
        0 if copy is None else pb.StructuredCopy.Value(f"STRUCTURED_COPY_{copy.name}")
    )
    assert wire.call_request(message) == call


def test_a_structured_copy_this_side_does_not_know_is_the_default() -> None:
    message = wire.call_request_pb(tc.CallRequest.to("time__now"))
    message.structured_copy = 7  # type: ignore[assignment]  # a number of a newer peer's enum
    assert wire.call_request(message).structured_copy is None


def test_values_travel_the_wire_and_back_unchanged() -> None:
    tool = tc.Tool("s", "t", "s__t", "T", "d", '{"type":"object"}', "", '{"readOnlyHint":true}', False)
    plan = tc.ToolPlan(
        loaded_tools=(tool,),
        has_search_tool=True,
        search_tool=tool,
        manifest="m",
        manifest_placement="system_message",
        manifest_system_message="sm",
        total_tools=3,
        loaded_count=1,
        deferred_count=2,
        catalog_version="v",
        tokens=tc.TokenAccounting(10, 4, 6, "o200k_base", True),
        deferred_tool_names=("x",),
        dropped_tools=("y",),
        discovered_tools=("z",),
        deferred_tools=(tool,),
        call_tool=tool,
        surface="stable",
        found_tools=(tool,),
    )
    assert wire.tool_plan(wire.tool_plan_pb(plan)) == plan
    status = tc.ServerStatus(
        "s", "stdio", "reconnecting", 2, 1, "e", 1.5, True, "h", "i", 2.5, "2026-07-28", (0, 1), "all"
    )
    assert wire.server_status(wire.server_status_pb(status)) == status
    manifest = tc.Manifest("m", 1, 2, 3, 4, "v", (tc.ServerTokens("s", 1, 2, 3, 4),), "enc", True)
    assert wire.manifest(wire.manifest_pb(manifest)) == manifest
    stats = tc.ChatStats(
        tc.TokenUsage(1, 2, 3, 4),
        5,
        (tc.ToolCallCount("t", "s", 2, 1),),
        tc.DiscoveryStats(1, 2, 3, 4, 1, "e", True, 1, "native", "too_large"),
        2,
        1.5,
    )
    result = tc.ChatResult(
        (tc.ChatMessage("assistant", "hi"),), ("a",), stats, "iteration_limit", "err", True, "m"
    )
    assert wire.chat_result(wire.chat_result_pb(result)) == result
    for event in (
        tc.TextDelta("a"),
        tc.AssistantMessage(tc.ChatMessage("assistant", "x")),
        tc.ToolCallFinished(tc.ToolCall("1", "n", "{}"), "s", 0.5, True, "p"),
        tc.UsageUpdate(tc.TokenUsage(1)),
        tc.ChatFinished(result),
    ):
        assert wire.chat_event(wire.chat_event_pb(event)) == event


def test_a_search_answer_with_a_plan_sends_the_new_definitions_once() -> None:
    new, old = tc.Tool("s", "new", "s__new"), tc.Tool("s", "old", "s__old")
    plan = wire.tool_plan(wire.tool_plan_pb(_plan((new,))))
    result = tc.SearchResult(
        mode="query",
        matches=(tc.ToolMatch(new, score=2.0, bm25_score=2.0), tc.ToolMatch(old, already_loaded=True)),
        newly_loaded=(new,),
        result_text="Found",
        plan=plan,
    )
    message = wire.search_result_pb(result)
    assert list(message.newly_loaded) == []
    assert [t.llm_name for t in message.plan.loaded_tools] == ["s__new"]
    assert wire.search_result(message) == result
    without_plan = wire.search_result_pb(tc.SearchResult("query", result.matches, (new,), "Found"))
    assert [t.llm_name for t in without_plan.newly_loaded] == ["s__new"]


def _plan(loaded: tuple[tc.Tool, ...]) -> tc.ToolPlan:
    return tc.ToolPlan(loaded, False, None, "", "tool_description", "", 1, 1, 0, "v", tc.TokenAccounting())
