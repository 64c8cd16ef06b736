"""In-memory fakes of the orchestrator's discovery and pool seams (fakes, not mocks).

``FakeDiscovery`` partitions a small catalog into eager and deferred tools and answers
``search_tools`` by exact names or keyword containment; ``FakePool`` runs per-tool async handlers
and records every call. Both follow the real services' contracts closely enough for the loop.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry
from toolscout.client import (
    CallRequest,
    CallToolResult,
    ContentBlock,
    PlanRequest,
    ReadRequest,
    ResultRead,
    SearchRequest,
    SearchResult,
    TokenAccounting,
    Tool,
    ToolMatch,
    ToolPlan,
    ToolsetRef,
)

from discovery_svc.surface import READ_RESULT_TOOL
from orchestrator_svc.loop import ChatLoop
from orchestrator_svc.metrics import OrchestratorMetrics
from orchestrator_svc.prompts import SystemPrompts
from orchestrator_svc.providers.registry import ModelRegistry
from tests.support.fake_provider import FakeProvider
from toolscout_kit.config import ToolscoutConfig, parse_config
from toolscout_kit.errors import InvalidArgumentError, NotFoundError

__all__ = [
    "FakeDiscovery",
    "FakePool",
    "Harness",
    "PoolCall",
    "make_config",
    "make_loop",
    "text_result",
    "tool",
]

SEARCH_TOOL = Tool(
    server="",
    name="search_tools",
    llm_name="search_tools",
    description="Search for and load tool definitions.",
    input_schema_json=json.dumps(
        {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "server_name": {"type": "string"},
                "tool_names": {"type": "array", "items": {"type": "string"}},
            },
        }
    ),
)
TOKENS_PER_TOOL = 100


def tool(server: str, name: str, description: str = "", **properties: str) -> Tool:
    schema = {"type": "object", "properties": {k: {"type": v} for k, v in properties.items()}}
    return Tool(
        server=server,
        name=name,
        llm_name=f"{server}_{name}",
        description=description or f"{name} on {server}",
        input_schema_json=json.dumps(schema),
    )


def text_result(text: str, *, is_error: bool = False, server: str = "") -> CallToolResult:
    return CallToolResult((ContentBlock("text", text=text),), is_error=is_error, server=server)


def _search_result(text: str, newly: list[Tool] | None = None, plan: ToolPlan | None = None) -> SearchResult:
    found = tuple(newly or ())
    return SearchResult(
        mode="query",
        matches=tuple(ToolMatch(t) for t in found),
        newly_loaded=found,
        result_text=text,
        total_matches=len(found),
        plan=plan,
    )


@dataclass
class FakeDiscovery:
    eager: list[Tool]
    deferred: list[Tool]
    plans: list[list[str]] = field(default_factory=list)
    searches: list[str] = field(default_factory=list)
    # The inline toolset (JSON) of every plan and search call, in order.
    toolset_jsons: list[str] = field(default_factory=list)
    deferred_name_fetches: int = 0

    def _by_name(self) -> dict[str, Tool]:
        return {t.llm_name: t for t in self.eager + self.deferred}

    async def plan_tools(self, request: PlanRequest, *, deadline: float | None) -> ToolPlan:
        self.plans.append(list(request.discovered_tools))
        self.toolset_jsons.append(request.toolset.filter_json)
        self.deferred_name_fetches += request.include_deferred_names
        return self._plan(
            request.toolset,
            request.discovered_tools,
            request.include_deferred_names,
            request.include_deferred_tools,
        )

    def _plan(
        self,
        toolset: ToolsetRef,
        discovered: Sequence[str],
        with_deferred_names: bool,
        with_deferred_tools: bool = False,
    ) -> ToolPlan:
        if toolset.name not in ("", "all"):
            raise NotFoundError(f"unknown toolset {toolset.name!r}; toolsets: all")
        deferred = {t.llm_name: t for t in self.deferred}
        found = [deferred[n] for n in dict.fromkeys(discovered) if n in deferred]
        loaded = self.eager + found
        sent = TOKENS_PER_TOOL * (len(loaded) + (1 if self.deferred else 0))
        every = TOKENS_PER_TOOL * (len(self.eager) + len(self.deferred))
        return ToolPlan(
            loaded_tools=tuple(loaded),
            has_search_tool=bool(self.deferred),
            search_tool=SEARCH_TOOL if self.deferred else None,
            deferred_tool_names=tuple(deferred) if with_deferred_names else (),
            tokens=TokenAccounting(every, sent, max(every - sent, 0), "o200k_base"),
            discovered_tools=tuple(t.llm_name for t in found),
            catalog_version="v1",
            deferred_tools=tuple(self.deferred) if with_deferred_tools else (),
            deferred_count=len(self.deferred) - len(found),
            read_result_tool=READ_RESULT_TOOL,
            read_result_tokens=TOKENS_PER_TOOL,
        )

    async def search_tools(self, request: SearchRequest, *, deadline: float | None) -> SearchResult:
        self.toolset_jsons.append(request.toolset.filter_json)
        outcome = await self._search(request.arguments_json, request.loaded_tools)
        if not request.include_plan:
            return outcome
        wanted = [*request.discovered_tools, *(t.llm_name for t in outcome.newly_loaded)]
        plan = self._plan(request.toolset, wanted, with_deferred_names=False)
        return _search_result(outcome.result_text, list(outcome.newly_loaded), plan)

    async def _search(self, arguments_json: str, loaded: Sequence[str]) -> SearchResult:
        self.searches.append(arguments_json)
        try:
            args = json.loads(arguments_json or "{}")
        except json.JSONDecodeError as err:
            raise InvalidArgumentError(f"search_tools arguments are not valid JSON: {err.msg}") from None
        if not isinstance(args, dict) or not (args.get("query") or args.get("tool_names")):
            raise InvalidArgumentError("search_tools needs 'query' or 'tool_names'")
        names = args.get("tool_names")
        if names is not None and not isinstance(names, list):
            raise InvalidArgumentError("tool_names must be a list of strings")
        if names:
            matches = [t for t in self.deferred if t.llm_name in names]
        else:
            words = str(args["query"]).lower().split()
            matches = [
                t
                for t in self.deferred
                if any(w in (t.llm_name + " " + t.description).lower() for w in words)
            ]
        if not matches:
            return _search_result("No tools found matching the search. Try different keywords.")
        lines = [f"Found {len(matches)} tools:"]
        for t in matches:
            mark = " (already loaded)" if t.llm_name in loaded else ""
            lines.append(f"- {t.llm_name} [{t.server}]{mark}: {t.description}")
        lines.append("These tools are now loaded and available to call.")
        return _search_result("\n".join(lines), [t for t in matches if t.llm_name not in loaded])


@dataclass
class PoolCall:
    llm_name: str
    arguments_json: str
    meta_json: str
    time_limit: float | None
    server_hint: str = ""


Handler = Callable[[dict[str, Any]], Awaitable[CallToolResult]]


@dataclass
class FakePool:
    handlers: dict[str, Handler] = field(default_factory=dict)
    calls: list[PoolCall] = field(default_factory=list)
    started: asyncio.Condition = field(default_factory=asyncio.Condition)
    cancelled: list[str] = field(default_factory=list)

    async def wait_for_calls(self, count: int, within: float = 10.0) -> None:
        async with asyncio.timeout(within), self.started:
            await self.started.wait_for(lambda: len(self.calls) >= count)

    async def call_tool(
        self, request: CallRequest, *, server_hint: str = "", deadline: float | None
    ) -> CallToolResult:
        llm_name = request.llm_name
        async with self.started:
            self.calls.append(
                PoolCall(llm_name, request.arguments_json, request.meta_json, deadline, server_hint)
            )
            self.started.notify_all()
        handler = self.handlers.get(llm_name)
        if handler is None:
            return text_result(f"ok from {llm_name}", server=llm_name.split("_", 1)[0])
        try:
            return await handler(json.loads(request.arguments_json or "{}"))
        except asyncio.CancelledError:
            self.cancelled.append(llm_name)
            raise

    async def read_result(self, request: ReadRequest, *, deadline: float | None) -> ResultRead:
        # This fake keeps no results (its handlers return none over a budget).
        raise NotFoundError(f"no result handle {request.handle!r}")


@dataclass
class Harness:
    fake: FakeProvider
    discovery: FakeDiscovery
    pool: FakePool
    loop: ChatLoop
    registry: CollectorRegistry
    config: ToolscoutConfig

    def metric(self, name: str, **labels: str) -> float:
        return self.registry.get_sample_value(name, labels) or 0.0


def make_config(fake: FakeProvider, templates: Path, **orchestrator: object) -> ToolscoutConfig:
    return parse_config(
        {
            "clients": {
                "oai": {
                    "provider": "openai",
                    "base_url": fake.openai_base_url,
                    "api_key": "sk-test-secret-key-123456",
                },
                "claude": {
                    "provider": "anthropic",
                    "base_url": fake.anthropic_base_url,
                    "api_key": "ak-test",
                },
            },
            "models": {
                "gpt": {"client": "oai", "model": "gpt-test"},
                "sonnet": {"client": "claude", "model": "claude-test"},
                "templated": {"client": "oai", "model": "gpt-test", "template": "tools"},
            },
            "toolscout": {"orchestrator": {"templates_dir": str(templates), **orchestrator}},
        }
    )


def make_loop(
    config: ToolscoutConfig, discovery: FakeDiscovery, pool: FakePool, registry: CollectorRegistry
) -> ChatLoop:
    settings = config.toolscout.orchestrator
    return ChatLoop(
        models=ModelRegistry(config),
        discovery=discovery,
        pool=pool,
        prompts=SystemPrompts(Path(settings.templates_dir), settings.default_system_prompt),
        settings=settings,
        metrics=OrchestratorMetrics(registry),
    )
