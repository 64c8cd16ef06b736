"""Protobuf ⇄ dataclass conversion and default deadlines."""

from __future__ import annotations

import dataclasses
import json

import pytest
from toolscout.client import types as t
from toolscout.client import wire as conv
from toolscout.client._base import DEFAULT_DEADLINES, Deadlines
from toolscout.mcp_pool.v1 import mcp_pool_pb2
from toolscout.orchestrator.v1 import orchestrator_pb2


def test_enums_become_lowercase_names_and_unknown_numbers_survive() -> None:
    status = conv.server_status(
        mcp_pool_pb2.ServerStatus(name="a", state=mcp_pool_pb2.SERVER_STATE_RECONNECTING)
    )
    assert status.state == "reconnecting"
    assert conv._enum_name(mcp_pool_pb2.ServerState, 99, "SERVER_STATE_") == "99"


def test_call_tool_request_uses_llm_name_unless_a_server_is_given() -> None:
    by_llm = conv.call_request_pb(
        t.CallRequest.to("time_now", {"tz": "UTC"}, server="", meta=None, timeout_seconds=0)
    )
    assert (by_llm.llm_name, by_llm.server, by_llm.tool) == ("time_now", "", "")
    assert json.loads(by_llm.arguments_json) == {"tz": "UTC"}
    by_server = conv.call_request_pb(
        t.CallRequest.to("now", '{"tz": 1}', server="time", meta={"k": 1}, timeout_seconds=3)
    )
    assert (by_server.llm_name, by_server.server, by_server.tool) == ("", "time", "now")
    assert by_server.arguments_json == '{"tz": 1}'
    assert json.loads(by_server.meta_json) == {"k": 1}
    assert by_server.timeout_seconds == 3


def test_chat_request_accepts_a_plain_string_as_one_user_message() -> None:
    req = conv.chat_request("hi", "m", {"toolset": "ts", "discovered_tools": ["a"]})
    assert [(m.role, m.content) for m in req.messages] == [("user", "hi")]
    assert list(req.discovered_tools) == ["a"]
    assert req.toolset == "ts"


def test_messages_round_trip_through_protobuf() -> None:
    msg = t.ChatMessage(
        role="assistant",
        content="x",
        tool_calls=(t.ToolCall(id="1", name="n", arguments_json="{}"),),
        reasoning="r",
        attachments=(t.ContentBlock(type="image", data=b"\x89PNG", mime_type="image/png"),),
    )
    assert conv.chat_message(conv.chat_message_pb(msg)) == msg


def test_a_refusal_mark_survives_the_round_trip_of_a_history() -> None:
    refused = t.ChatMessage(
        role="tool", content="search first", tool_call_id="c1", is_error=True, not_loaded=True
    )
    assert conv.chat_message(conv.chat_message_pb(refused)) == refused


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (orchestrator_pb2.ChatEvent(text_delta=orchestrator_pb2.TextDelta(text="a")), t.TextDelta("a")),
        (
            orchestrator_pb2.ChatEvent(reasoning_delta=orchestrator_pb2.ReasoningDelta(text="r")),
            t.ReasoningDelta("r"),
        ),
        (
            orchestrator_pb2.ChatEvent(tools_discovered=orchestrator_pb2.ToolsDiscovered(tools=["x"])),
            t.ToolsDiscovered(("x",)),
        ),
        (
            orchestrator_pb2.ChatEvent(usage=orchestrator_pb2.TokenUsage(input_tokens=3)),
            t.UsageUpdate(t.TokenUsage(input_tokens=3)),
        ),
        (
            orchestrator_pb2.ChatEvent(
                tool_call_started=orchestrator_pb2.ToolCallStarted(
                    call=orchestrator_pb2.ToolCall(id="1", name="n"), server="s"
                )
            ),
            t.ToolCallStarted(t.ToolCall("1", "n"), "s"),
        ),
        (orchestrator_pb2.ChatEvent(), None),
    ],
)
def test_each_chat_event_kind_converts_to_its_dataclass(
    event: orchestrator_pb2.ChatEvent, expected: object
) -> None:
    assert conv.chat_event(event) == expected


def test_final_event_carries_the_whole_chat_result_and_its_answer_text() -> None:
    final = orchestrator_pb2.ChatResponse(
        messages=[orchestrator_pb2.Message(role="assistant", content="done")],
        loaded_tools=["a"],
        stop_reason=orchestrator_pb2.STOP_REASON_ITERATION_LIMIT,
        stats=orchestrator_pb2.ChatStats(discovery=orchestrator_pb2.DiscoveryStats(tokens_saved=5)),
    )
    event = conv.chat_event(orchestrator_pb2.ChatEvent(final=final))
    assert isinstance(event, t.ChatFinished)
    assert event.result.stop_reason == "iteration_limit"
    assert event.result.text == "done"
    assert event.result.stats.discovery.tokens_saved == 5
    json.dumps(dataclasses.asdict(event.result))


def test_tool_json_fields_parse_on_demand() -> None:
    tool = t.Tool(server="s", name="n", llm_name="s_n", input_schema_json='{"type":"object"}')
    assert tool.input_schema == {"type": "object"}
    assert tool.output_schema == {}


def test_default_deadlines_cover_every_method_and_chat_gets_the_longest() -> None:
    finite = {k: v for k, v in DEFAULT_DEADLINES.items() if v is not None}
    assert max(finite, key=lambda k: finite[k]) in {"Chat", "StreamChat"}
    assert DEFAULT_DEADLINES["WatchCatalog"] is None
    deadlines = Deadlines({"ListTools": 1.0})
    assert deadlines.resolve("ListTools", None) == 1.0
    assert deadlines.resolve("ListTools", 7.0) == 7.0
    assert deadlines.call_tool(None, 300.0) == 305.0
    with pytest.raises(ValueError, match="Nope"):
        Deadlines({"Nope": 1.0})


def test_every_tool_surface_is_one_proto_enum_value_and_back() -> None:
    from toolscout.discovery.v1 import discovery_pb2

    names = {
        n.removeprefix("TOOL_SURFACE_").lower() for n in discovery_pb2.ToolSurface.DESCRIPTOR.values_by_name
    }
    assert names - {"unspecified"} == {s.value for s in t.ToolSurface}
    for surface in t.ToolSurface:
        request = conv.plan_request(conv.plan_request_pb(t.PlanRequest(surface=surface)))
        assert request.surface is surface
        plan = conv.tool_plan(conv.tool_plan_pb(t.ToolPlan(surface=surface)))
        assert plan.surface is surface
    # A plain string is read as its member; "" stays the server's default, on the wire too.
    assert t.SearchRequest(surface="stable").surface is t.ToolSurface.STABLE
    assert conv.search_request(conv.search_request_pb(t.SearchRequest())).surface == ""
    with pytest.raises(ValueError, match="unknown tool surface 'meta'"):
        t.PlanRequest(surface="meta")
    # A surface this side does not know (a newer peer's number) reads as the default.
    newer = discovery_pb2.PlanToolsRequest(surface=7)
    assert conv.plan_request(newer).surface == ""
    assert conv.tool_plan(discovery_pb2.PlanToolsResponse(surface=7)).surface is t.ToolSurface.APPEND


def test_deferral_modes_travel_as_their_lowercase_names() -> None:
    for mode in t.Deferral:
        info = conv.model_info(conv.model_info_pb(t.ModelInfo("m", "c", "openai", "gpt", deferral=mode)))
        assert info.deferral is mode
        stats = t.ChatStats(discovery=t.DiscoveryStats(deferral=mode))
        message = conv.chat_stats_pb(stats)
        assert message.discovery.deferral == mode.value
        assert conv.chat_stats(message).discovery.deferral is mode
    assert conv.model_info(orchestrator_pb2.ModelInfo(deferral="")).deferral == ""
    # A mode this side does not know (a newer peer) reads as not reported.
    assert conv.model_info(orchestrator_pb2.ModelInfo(deferral="someday")).deferral == ""
    # str enums: JSON of a value carries the same bytes as the plain strings did.
    assert json.dumps(dataclasses.asdict(t.DiscoveryStats(deferral=t.Deferral.STABLE)))[-60:].endswith(
        '"deferral": "stable", "native_fallback_reason": ""}'
    )


def test_tool_surfaces_map_to_the_proto_enum_and_unknown_names_are_refused() -> None:
    from toolscout.client import wire as conv
    from toolscout.discovery.v1 import discovery_pb2

    assert conv.surface("") == discovery_pb2.TOOL_SURFACE_UNSPECIFIED
    assert conv.surface("stable") == discovery_pb2.TOOL_SURFACE_STABLE
    assert conv.surface("append") == discovery_pb2.TOOL_SURFACE_APPEND
    with pytest.raises(ValueError, match="unknown tool surface 'meta'"):
        conv.surface("meta")
    plan = discovery_pb2.PlanToolsResponse(surface=discovery_pb2.TOOL_SURFACE_STABLE)
    plan.call_tool.llm_name = "call_tool"
    converted = conv.tool_plan(plan)
    assert converted.surface == "stable"
    assert converted.call_tool is not None
    assert converted.call_tool.llm_name == "call_tool"
    assert conv.tool_plan(discovery_pb2.PlanToolsResponse()).surface == "append"


def test_a_content_block_goes_back_to_the_mcp_json_its_server_sent() -> None:
    from toolscout.client import ContentBlock

    image = ContentBlock(
        type="image",
        data=b"\x00\x01",
        mime_type="image/png",
        raw_json='{"type":"image","mimeType":"image/png"}',
    )
    assert image.to_mcp() == {"type": "image", "mimeType": "image/png", "data": "AAE="}
    blob = ContentBlock(
        type="resource", data=b"\x00", raw_json='{"type":"resource","resource":{"uri":"a:b"}}'
    )
    assert blob.to_mcp() == {"type": "resource", "resource": {"uri": "a:b", "blob": "AA=="}}
    text = ContentBlock(type="text", text="hi")
    assert text.to_mcp() == {"type": "text", "text": "hi"}


def test_a_tools_task_support_is_read_from_its_definitions_execution() -> None:
    required = t.Tool(
        server="s", name="t", llm_name="s__t", extra_json='{"execution":{"taskSupport":"required"}}'
    )
    assert required.task_support == "required"
    assert required.task_support == "required"  # again, as every call asks
    assert t.Tool(server="s", name="t", llm_name="s__t").task_support == ""
    assert (
        t.Tool(
            server="s", name="t", llm_name="s__t", extra_json='{"execution":{"taskSupport":3}}'
        ).task_support
        == ""
    )
    assert (
        t.Tool(server="s", name="t", llm_name="s__t", extra_json='{"execution":"optional"}').task_support
        == ""
    )


def test_strings_with_lone_surrogates_reach_the_wire_with_the_replacement_character() -> None:
    # What a JSON "\\ud800" escape decodes to: protobuf refuses it, so each becomes U+FFFD (and two
    # halves of a pair the character they encode); a message without one is built as it is.
    block = t.ContentBlock("text", text="a\ud800b", raw_json='{"type":"text","x":"\udfff"}')
    result = t.CallToolResult(
        content=(block,), structured_content_json='{"t":"\ud83d\ude00"}', meta_json='{"m":"\ud800"}'
    )
    message = conv.call_tool_result_pb(result)
    assert (message.content[0].text, message.content[0].raw_json) == (
        "a\ufffdb",
        '{"type":"text","x":"\ufffd"}',
    )
    assert (message.structured_content_json, message.meta_json) == ('{"t":"😀"}', '{"m":"\ufffd"}')
    log = conv.relayed_log_pb(t.RelayedLog("info", "l\ud800", '"\ud800"'))
    assert (log.logger, log.data_json) == ("l\ufffd", '"\ufffd"')
    assert conv.relayed_request_pb(t.RelayedRequest(1, "m", '{"a":"\udc00"}')).params_json == '{"a":"\ufffd"}'
    assert conv.call_progress_pb(t.CallProgress(1.0, None, "\ud800")).message == "\ufffd"
    assert conv.well_formed("plain é") == "plain é"
