"""The discovered tools of a conversation, rebuilt from its history."""

from __future__ import annotations

from orchestrator_svc.history import discovery_candidates, recorded_searches
from orchestrator_svc.messages import Message, ToolCall
from toolscout_kit.call_tool import not_loaded_error

DEFERRED = frozenset({"weather_forecast", "weather_alerts", "files_read"})


def rebuild_discovered(
    messages: list[Message],
    explicit: list[str],
    deferred: frozenset[str],
    found: dict[str, list[str]] | None = None,
) -> list[str]:
    # Discovery keeps the candidates that are deferred tools of the toolset, in order.
    return [n for n in discovery_candidates(messages, explicit, found) if n in deferred]


def successful_searches(messages: list[Message]) -> list[ToolCall]:
    recorded, unrecorded = recorded_searches(messages)
    assert recorded == {}
    return unrecorded


def test_history_rebuild_uses_explicit_names_calls_and_search_results_in_order() -> None:
    messages = [
        Message("user", "hi"),
        Message("assistant", "", [ToolCall("s1", "search_tools", '{"query": "x"}')]),
        # The text also names a tool the search did not load: only the replayed result counts.
        Message("tool", "Found weather_alerts (closest: weather_forecast)", tool_call_id="s1"),
        Message("assistant", "", [ToolCall("c1", "files_read", "{}"), ToolCall("c2", "clock_now", "{}")]),
        Message("tool", "contents", tool_call_id="c1", name="files_read"),
    ]
    assert successful_searches(messages) == [messages[1].tool_calls[0]]
    found = rebuild_discovered(
        messages, ["weather_forecast", "unknown"], DEFERRED, {"s1": ["weather_alerts"]}
    )
    assert found == ["weather_forecast", "weather_alerts", "files_read"]
    assert rebuild_discovered(messages, [], DEFERRED, {"s1": ["weather_alerts"]}) == [
        "weather_alerts",
        "files_read",
    ]


def test_recorded_search_results_need_no_replay() -> None:
    messages = [
        Message("assistant", "", [ToolCall("s1", "search_tools", '{"query": "x"}')]),
        Message("tool", "Found weather_alerts", tool_call_id="s1", loaded_tools=["weather_alerts"]),
        Message("assistant", "", [ToolCall("s2", "search_tools", '{"query": "y"}')]),
        Message("tool", "Found nothing new", tool_call_id="s2", loaded_tools=[]),
        Message("assistant", "", [ToolCall("s3", "search_tools", '{"query": "z"}')]),
        Message("tool", "Found files_read", tool_call_id="s3"),
    ]
    recorded, unrecorded = recorded_searches(messages)
    assert recorded == {"s1": ["weather_alerts"], "s2": []}
    assert unrecorded == [messages[4].tool_calls[0]]


def test_history_rebuild_ignores_failed_searches_and_rejected_calls() -> None:
    messages = [
        Message("assistant", "", [ToolCall("s1", "search_tools", "{}"), ToolCall("c1", "files_read", "{}")]),
        Message("tool", "Error: no tool named weather_alerts", tool_call_id="s1", is_error=True),
        Message("tool", not_loaded_error("files_read"), tool_call_id="c1", is_error=True, not_loaded=True),
    ]
    assert successful_searches(messages) == []
    assert rebuild_discovered(messages, [], DEFERRED) == []


def test_a_refused_call_is_told_by_its_mark_not_by_its_text() -> None:
    messages = [
        Message(
            "assistant", "", [ToolCall("c1", "files_read", "{}"), ToolCall("c2", "weather_alerts", "{}")]
        ),
        # Refused (marked), whatever its words: a client may have shown it translated.
        Message("tool", "Fehler: zuerst suchen", tool_call_id="c1", is_error=True, not_loaded=True),
        # A tool that ran and failed with the same words is still a tool that was loaded.
        Message("tool", not_loaded_error("weather_alerts"), tool_call_id="c2", is_error=True),
    ]
    assert rebuild_discovered(messages, [], DEFERRED) == ["weather_alerts"]
