"""Result handles across turns: the conversation id and the handles are rebuilt from each request."""

from __future__ import annotations

import time

from orchestrator_svc.chat import ChatRequest
from orchestrator_svc.history import discovery_candidates, result_handles
from orchestrator_svc.loop import conversation_id
from orchestrator_svc.messages import Message, ToolCall
from tests.support.fake_provider import Reply, ScriptedCall
from tests.support.orchestrator_fakes import TOKENS_PER_TOOL, Harness


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


def _history(expires: float) -> list[Message]:
    return [
        Message("user", "what time is it?"),
        Message("assistant", "", [ToolCall("c1", "clock_now", "{}")]),
        Message(
            "tool",
            "[preview]",
            tool_call_id="c1",
            name="clock_now",
            result_handle="r0-x",
            handle_expires_unix=expires,
        ),
        Message("assistant", "It is late."),
        Message("user", "and the rest of that result?"),
    ]


async def test_read_result_is_offered_only_while_a_handle_of_the_history_is_live(harness: Harness) -> None:
    harness.fake.script(Reply.answer("ok"), Reply.answer("ok"), Reply.answer("ok"))
    live = await harness.loop.run(ChatRequest(messages=_history(time.time() + 600), model="gpt"))
    gone = await harness.loop.run(ChatRequest(messages=_history(time.time() - 1), model="gpt"))
    none = await harness.loop.run(ChatRequest(messages=[Message("user", "hi")], model="gpt"))
    with_read, expired, fresh = harness.fake.requests
    assert with_read.tool_names[-1] == "read_result"
    assert "read_result" not in expired.tool_names
    assert "read_result" not in fresh.tool_names
    # Its definition is counted when it is sent.
    sent = [c.stats.discovery.definition_tokens_sent for c in (live, gone, none)]
    assert sent[0] == sent[1] + TOKENS_PER_TOOL == sent[2] + TOKENS_PER_TOOL


async def test_a_read_of_an_expired_handle_is_answered_with_the_pools_reason(harness: Harness) -> None:
    harness.fake.script(
        Reply.calls(ScriptedCall("read_result", {"handle": "r0-x", "pattern": "late"}, id="r1")),
        Reply.answer("Gone."),
    )
    outcome = await harness.loop.run(ChatRequest(messages=_history(time.time() - 1), model="gpt"))
    (read,) = (m for m in outcome.messages if m.role == "tool")
    assert read.is_error
    # The handle is the conversation's, so the pool is asked (this fake pool keeps no results).
    assert read.content == "Error: no result handle 'r0-x'"
    assert harness.metric("toolscout_orchestrator_result_reads_total", server="", outcome="refused") == 1
