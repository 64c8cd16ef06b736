"""What the LLM is told when a tool call's fate is unknown or the pool is unreachable (issue 10)."""

from __future__ import annotations

import pytest
from toolscout.client import CallToolResult

from orchestrator_svc.loop import ChatRequest
from orchestrator_svc.messages import Message
from tests.support.fake_provider import Reply, ScriptedCall
from tests.support.orchestrator_fakes import Harness
from toolscout_kit.errors import OutcomeUnknownError, UnavailableError

OUTCOME_UNKNOWN = (
    "Error: the outcome of this call of 'weather_forecast' is unknown: the connection to the tool "
    "was lost after the call was sent, so the tool may or may not have run, and it was not run "
    "again. Check whether it took effect before calling it again."
)


def ask() -> ChatRequest:
    return ChatRequest(
        messages=[Message("user", "weather in Paris?")], model="gpt", discovered_tools=["weather_forecast"]
    )


async def test_a_tool_whose_outcome_is_unknown_is_reported_as_such_and_never_sent_again(
    harness: Harness,
) -> None:
    async def lost(args: dict[str, object]) -> CallToolResult:
        raise OutcomeUnknownError(
            "the call of tool 'forecast' was sent to MCP server 'weather', which went away before answering"
        )

    harness.pool.handlers["weather_forecast"] = lost
    harness.fake.script(
        Reply.calls(ScriptedCall("weather_forecast", {"city": "Paris"})), Reply.answer("unsure")
    )
    result = await harness.loop.run(ask())
    assert result.messages[1].content == OUTCOME_UNKNOWN
    assert result.messages[1].is_error
    assert [c.llm_name for c in harness.pool.calls] == ["weather_forecast"]
    assert result.stop_reason == "completed"


@pytest.mark.parametrize(
    "message",
    [
        "pool unavailable: failed to connect to all addresses; last error: UNKNOWN: "
        "ipv4:127.0.0.1:52205: Failed to connect to remote host: Connection refused",
        "pool unavailable: ipv6:%5B::1%5D:50051: ConnectionRefusedError: [Errno 111] refused",
        "pool unavailable: dns:///toolscout-pool.tools.svc.cluster.local:50051 is not answering",
        "pool failed: unknown: Unexpected <class 'google.protobuf.message.DecodeError'>: Error parsing",
    ],
)
async def test_a_pool_outage_puts_no_internal_address_or_exception_name_in_the_tool_result(
    harness: Harness, message: str
) -> None:
    async def down(args: dict[str, object]) -> CallToolResult:
        raise UnavailableError(message)

    harness.pool.handlers["weather_forecast"] = down
    harness.fake.script(
        Reply.calls(ScriptedCall("weather_forecast", {"city": "Paris"})), Reply.answer("sorry")
    )
    result = await harness.loop.run(ask())
    text = result.messages[1].content
    assert text.startswith("Error: ")
    for internal in ("127.0.0.1", "52205", "ipv4:", "ipv6", "::1", "svc.cluster.local", "50051"):
        assert internal not in text
    for name in ("ConnectionRefusedError", "DecodeError", "google.protobuf", "<class"):
        assert name not in text
