"""Result handles across turns: the conversation id and the handles are rebuilt from each request."""

from __future__ import annotations

from orchestrator_svc.chat import ChatRequest
from orchestrator_svc.history import discovery_candidates, result_handles
from orchestrator_svc.loop import conversation_id
from orchestrator_svc.messages import Message, ToolCall


def _turn(*extra: Message, first: str = "summarise the logs", **kw: str) -> ChatRequest:
    return ChatRequest(messages=[Message("user", first), *extra], model="gpt", **kw)


def test_the_derived_conversation_id_is_the_same_on_every_turn_and_differs_by_first_message() -> None:
    later = _turn(Message("assistant", "done"), Message("user", "and the errors?"))
    assert conversation_id(_turn()) == conversation_id(later)
    assert conversation_id(_turn()).startswith("h-")
    assert conversation_id(_turn(first="something else")) != conversation_id(_turn())
    assert conversation_id(_turn(toolset="ops")) != conversation_id(_turn())
    assert conversation_id(_turn(conversation_id="ticket-42")) == "ticket-42"


def test_the_handles_come_from_the_tool_results_the_orchestrator_marked() -> None:
    history = [
        Message("user", "q"),
        Message("assistant", "", [ToolCall("c1", "logs__tail", "{}"), ToolCall("c2", "read_result", "{}")]),
        Message("tool", "preview", tool_call_id="c1", result_handle="r0-abc", handle_expires_unix=100.0),
        Message("tool", "page", tool_call_id="c2"),
    ]
    assert result_handles(history) == {"r0-abc": 100.0}
    # read_result is the orchestrator's own tool, never a catalog tool to load again.
    assert discovery_candidates(history, []) == ["logs__tail"]
