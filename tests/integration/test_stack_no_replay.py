"""Nothing replays a chat or a tool call that may have had an effect (issue 10, item 1).

The three services in process on 127.0.0.1:0, a real MCP server process and the fake provider;
the caller is the client library with its default retry policy.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from toolscout import client as tc

from tests.support.fake_provider import FakeProvider, RecordedRequest, Reply, ScriptedCall
from tests.support.mcp_servers import misbehaving_config
from tests.support.stack import running_stack
from toolscout_kit.config import parse_config


async def test_a_chat_whose_provider_fails_after_the_tool_ran_is_not_replayed(tmp_path: Path) -> None:
    calls = tmp_path / "calls"

    def respond(request: RecordedRequest) -> Reply:
        # The tool call first; once its result is in the conversation, the provider is down (503).
        if request.body["messages"][-1]["role"] == "user":
            return Reply.calls(ScriptedCall("fixture__echo", {"text": "written"}))
        return Reply.error(503, "overloaded")

    async with FakeProvider() as fake:
        fake.responder = respond
        config = parse_config(
            {
                "clients": {
                    "oai": {
                        "provider": "openai",
                        "base_url": fake.openai_base_url,
                        "api_key": "k",
                        "max_retries": 0,
                    }
                },
                "models": {"gpt": {"client": "oai", "model": "gpt-test"}},
                "servers": {"fixture": misbehaving_config("--call-log", str(calls))},
            },
            base_dir=tmp_path,
        )
        async with running_stack(config) as stack:
            assert stack.orchestrator is not None
            async with tc.AsyncOrchestratorClient.connect(stack.orchestrator.address) as orchestrator:
                with pytest.raises(tc.UnavailableError):
                    await orchestrator.chat("store this", model="gpt", deadline=60)
    assert calls.read_text().splitlines() == ["echo"]


async def test_a_tool_whose_server_dies_mid_call_runs_once_and_the_llm_is_told_it_may_have_run(
    tmp_path: Path,
) -> None:
    calls = tmp_path / "calls"
    marker = str(tmp_path / "marker")

    def respond(request: RecordedRequest) -> Reply:
        if request.body["messages"][-1]["role"] == "user":
            return Reply.calls(ScriptedCall("fixture__crash_once", {"marker": marker}))
        return Reply.answer("noted")

    async with FakeProvider() as fake:
        fake.responder = respond
        config = parse_config(
            {
                "clients": {"oai": {"provider": "openai", "base_url": fake.openai_base_url, "api_key": "k"}},
                "models": {"gpt": {"client": "oai", "model": "gpt-test"}},
                "servers": {"fixture": misbehaving_config("--call-log", str(calls))},
            },
            base_dir=tmp_path,
        )
        async with running_stack(config) as stack:
            assert stack.orchestrator is not None
            async with tc.AsyncOrchestratorClient.connect(stack.orchestrator.address) as orchestrator:
                result = await orchestrator.chat("do it", model="gpt", deadline=60)
        tool_message = fake.requests[-1].body["messages"][-1]
    assert calls.read_text().splitlines() == ["crash_once"]
    assert tool_message["role"] == "tool"
    assert "may or may not have run" in tool_message["content"]
    assert result.messages[-1].content == "noted"
