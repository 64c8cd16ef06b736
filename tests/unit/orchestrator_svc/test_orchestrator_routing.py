"""Tool calls leave the orchestrator with the server of the tool, as the plans named it."""

from __future__ import annotations

from typing import Any

from toolscout import client as tc

from orchestrator_svc.downstream import ClientDiscovery, ClientPool, Routes


class _Discovery(tc.AsyncDiscoveryClient):
    def __init__(self, plan: tc.ToolPlan) -> None:
        self._answer = plan

    async def plan(self, request: tc.PlanRequest, **kwargs: Any) -> tc.ToolPlan:
        return self._answer


class _Pool(tc.AsyncShardedPoolClient):
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    async def call(self, request: tc.CallRequest, **kwargs: Any) -> tc.CallToolResult:
        self.calls.append((request.name, kwargs.get("server_hint", "")))
        return tc.CallToolResult(content=(), server=kwargs.get("server_hint", ""))


def _plan(*tools: tc.Tool, deferred: tuple[tc.Tool, ...] = ()) -> tc.ToolPlan:
    return tc.ToolPlan(
        loaded_tools=tools,
        has_search_tool=False,
        search_tool=None,
        manifest="",
        manifest_placement="",
        manifest_system_message="",
        total_tools=len(tools),
        loaded_count=len(tools),
        deferred_count=0,
        catalog_version="v",
        tokens=tc.TokenAccounting(),
        deferred_tools=deferred,
    )


async def test_a_call_carries_the_server_the_plan_gave_its_llm_name() -> None:
    routes = Routes()
    odd = tc.Tool(server="my__server", name="t", llm_name="my__server__t_1a2b3c4d")
    deferred = tc.Tool(server="later", name="u", llm_name="later__u")
    discovery = ClientDiscovery(_Discovery(_plan(odd, deferred=(deferred,))), routes)
    pool = _Pool()
    await discovery.plan_tools(tc.PlanRequest(provider="openai"), deadline=5)
    for name in (odd.llm_name, deferred.llm_name, "never__planned"):
        await ClientPool(pool, routes).call_tool(
            tc.CallRequest(llm_name=name, arguments_json="{}"), deadline=5
        )
    assert pool.calls == [(odd.llm_name, "my__server"), (deferred.llm_name, "later"), ("never__planned", "")]
