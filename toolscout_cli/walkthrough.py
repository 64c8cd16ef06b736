"""``toolscout up --walkthrough``: a guided first look at the running stack for a newcomer.

It runs the same commands a person would type (servers, tools, manifest, search, call, tokens)
against the stack just started, printing each command line first so it can be repeated.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Sequence

from toolscout.client import ModelInfo, Tool, ToolscoutClient, ToolscoutClientError

from toolscout_cli.commands import COMMANDS
from toolscout_cli.connection import Targets
from toolscout_cli.output import Output

__all__ = ["run_walkthrough"]

Handler = Callable[[argparse.Namespace, ToolscoutClient, Targets, Output], int]


def _ns(**values: object) -> argparse.Namespace:
    base: dict[str, object] = {
        "toolset": None,
        "toolset_json": None,
        "server": None,
        "provider": None,
        "tool": None,
        "limit": None,
    }
    base.update(offset=None, llm_text=False, args="", call_timeout=None)
    base.update(values)
    return argparse.Namespace(**base)


def _required(tool: Tool) -> list[str]:
    required = tool.input_schema.get("required", [])
    return [str(r) for r in required] if isinstance(required, list) else []


def _pick_call(ts: ToolscoutClient, candidates: list[Tool]) -> tuple[Tool, dict[str, object]] | None:
    # A tool that needs no arguments is safe to call in a demo; the time server's is the classic.
    for tool in candidates:
        if not _required(tool) and tool.available:
            return tool, {}
    for tool in ts.pool.list_tools().tools:
        if tool.name == "get_current_time" and _required(tool) == ["timezone"]:
            return tool, {"timezone": "UTC"}
    for tool in ts.pool.list_tools().tools:
        if not _required(tool) and tool.available:
            return tool, {}
    return None


def _query_for(tools: list[Tool]) -> str:
    # Search for something that is actually deferred, phrased like a user would.
    for tool in tools:
        words = [w for w in tool.description.split()[:4] if w.isalpha()]
        if words:
            return " ".join(words).lower()
    return tools[0].name.replace("_", " ") if tools else "time"


def run_walkthrough(targets: Targets, out: Output, cli: str) -> None:
    """Prints the walkthrough; each step's failure is reported and the next step still runs."""
    with targets.connect() as ts:

        def step(title: str, command: str, handler: Handler, args: argparse.Namespace) -> None:
            out.line("")
            out.line(f"── {title}")
            out.line(f"$ {cli} {command}")
            try:
                handler(args, ts, targets, out)
            except ToolscoutClientError as err:
                out.line(f"(failed: {err.message})")

        step("MCP servers and their state", "servers", COMMANDS["servers"], _ns())
        step(
            "Tools: loaded ones are sent to the LLM, deferred ones are found with search_tools",
            "tools",
            COMMANDS["tools"],
            _ns(),
        )
        step("The manifest: what the LLM is told is deferred", "manifest", COMMANDS["manifest"], _ns())
        plan = ts.discovery.plan_tools(include_deferred_names=True)
        deferred_names = set(plan.deferred_tool_names)
        catalog = ts.pool.list_tools().tools
        deferred = [t for t in catalog if t.llm_name in deferred_names]
        query = _query_for(deferred or list(catalog))
        step(
            "A search, as the LLM's search_tools runs it",
            f'search "{query}"',
            COMMANDS["search"],
            _ns(query=query),
        )
        hits = ts.discovery.search_tools(query).matches
        if hits:
            found = hits[0].tool.llm_name
            step(
                "What a tool takes: every argument, nested ones too, and an example call",
                f"describe {found}",
                COMMANDS["describe"],
                _ns(tool=found, invocation=cli),
            )
        picked = _pick_call(ts, [m.tool for m in hits])
        if picked is not None:
            tool, arguments = picked
            args_json = json.dumps(arguments)
            step(
                "A tool call through the pool",
                f"call {tool.llm_name} --args '{args_json}'",
                COMMANDS["call"],
                _ns(tool=tool.llm_name, args=args_json),
            )
        step("What discovery saves on every LLM call", "tokens", COMMANDS["tokens"], _ns())
        models = ts.orchestrator.list_models()
    out.line("")
    out.line("── Chat")
    if not models:
        out.line("No models configured: add `clients` and `models` to the config to chat.")
        out.line("")
        return
    model, key_env = _chat_model(models, targets)
    out.line(f'$ {cli} chat "What time is it in Tokyo?" --model {model.name}')
    if key_env and not os.environ.get(key_env):
        # The stack, not the CLI, calls the provider: the key belongs in the stack's environment.
        out.line(f"  {model.name} needs {key_env} in the environment of the stack: set it in this terminal")
        out.line("  before starting the stack (or point the model's client at a local OpenAI-compatible")
        out.line("  server, e.g. Ollama, with its base_url).")
    out.line("")


def _chat_model(models: Sequence[ModelInfo], targets: Targets) -> tuple[ModelInfo, str]:
    """The model to suggest, and the environment variable its key must come from ("" when the
    config holds the key, or its client's base_url makes one optional)."""

    def key_env(model: ModelInfo) -> str:
        client = targets.config.clients.get(model.client) if targets.config else None
        if client is None:
            return ""
        return client.key_env if client.needs_api_key and client.api_key is None else ""

    # A model with a key at hand runs as shown; otherwise the OpenAI one (the key most people have).
    ready = [m for m in models if key_env(m) and os.environ.get(key_env(m))]
    openai = [m for m in models if m.provider == "openai"]
    model = (ready or openai or list(models))[0]
    return model, key_env(model)
