"""Tool calls leave the orchestrator with the server of the tool, as the plan named it: the tool
loop passes the server it holds as the call's ``server_hint``, with no map of names on the side."""

from __future__ import annotations

from typing import Any

from toolscout import client as tc

from orchestrator_svc.loop import ChatRequest
from orchestrator_svc.messages import Message
from orchestrator_svc.seams import ClientPool
from tests.support.fake_provider import Reply, ScriptedCall
from tests.support.orchestrator_fakes import Harness


class _Pool(tc.AsyncShardedPoolClient):
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    async def call(self, request: tc.CallRequest, **kwargs: Any) -> tc.CallToolResult:
        self.calls.append((request.name, kwargs.get("server_hint", "")))
        return tc.CallToolResult(content=(), server=kwargs.get("server_hint", ""))


async def test_the_pool_seam_hands_the_server_hint_to_the_sharded_client() -> None:
    pool = _Pool()
    seam = ClientPool(pool)
    odd = tc.CallRequest(llm_name="my__server__t_1a2b3c4d", arguments_json="{}")
    await seam.call_tool(odd, server_hint="my__server", deadline=5)
    await seam.call_tool(tc.CallRequest(llm_name="never__planned", arguments_json="{}"), deadline=5)
    assert pool.calls == [("my__server__t_1a2b3c4d", "my__server"), ("never__planned", "")]


async def test_a_chat_calls_a_loaded_tool_with_the_server_its_plan_gave(harness: Harness) -> None:
    harness.fake.script(
        Reply.calls(ScriptedCall("weather_forecast", {"city": "Paris"})), Reply.answer("sunny")
    )
    await harness.loop.run(
        ChatRequest(
            messages=[Message("user", "weather in Paris?")],
            model="gpt",
            discovered_tools=["weather_forecast"],
        )
    )
    assert [(c.llm_name, c.server_hint) for c in harness.pool.calls] == [("weather_forecast", "weather")]
