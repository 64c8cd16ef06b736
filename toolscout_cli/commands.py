"""The commands that query a running stack: servers, tools, toolsets, models, manifest, search,
call and tokens. Each returns its exit code; failures raise and are reported by ``__main__``."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from typing import Any

from toolscout.client import (
    CallToolResult,
    ServerStatus,
    Tool,
    ToolPlan,
    ToolscoutClient,
    ToolscoutClientError,
    UnavailableError,
)

from toolscout_cli.connection import (
    EXIT_ERROR,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    Targets,
    toolset_arg,
)
from toolscout_cli.not_found import unknown
from toolscout_cli.output import Output, truncate
from toolscout_cli.tool_help import describe, find_tool, report_argument_problems, show_expected_shape
from toolscout_kit.arguments import argument_problems
from toolscout_kit.json_text import JsonTextError, parse_json

__all__ = ["COMMANDS"]


def _servers(args: argparse.Namespace, ts: ToolscoutClient, targets: Targets, out: Output) -> int:
    out.listing(
        "servers",
        ts.pool.list_servers(),
        empty="No MCP servers configured.",
        headers=("Server", "Transport", "State", "Tools", "Restarts", "Deferred", "Serialized", "Last error"),
        row=lambda s: (
            s.name,
            s.transport,
            s.state,
            s.tool_count,
            s.restarts,
            "yes" if s.defer_loading else "no",
            _serialized(s),
            truncate(s.last_error, 200) or "-",
        ),
    )
    return EXIT_OK


def _serialized(s: ServerStatus) -> str:
    """Which of the server's tools run one at a time (serialize_writes), and why."""
    if not s.serialize_writes:
        return "off"
    if not s.serialized_tools:
        return "-"
    why = f" ({s.unannotated_tools} unannotated)" if s.unannotated_tools else ""
    return f"{s.serialized_tools} of {s.tool_count}{why}"


def _discovery_enabled(targets: Targets, deferred: int) -> bool:
    # casual-mcp shows the Status column only when discovery is on; without a config, infer it.
    if targets.config is not None:
        return targets.config.tool_discovery.enabled
    return deferred > 0


def _toolset_tools(ts: ToolscoutClient, toolset: str, server: str) -> tuple[list[Tool], dict[str, str], Any]:
    """Every tool of the toolset (catalog order) with its status, and the plan it came from."""
    plan = ts.discovery.plan_tools(toolset, include_deferred_names=True)
    catalog = ts.pool.list_tools([server] if server else [])
    status = {t.llm_name: "loaded" for t in plan.loaded_tools}
    status.update({name: "deferred" for name in plan.deferred_tool_names})
    tools = [t for t in catalog.tools if t.llm_name in status]
    return tools, status, plan


def _tools(args: argparse.Namespace, ts: ToolscoutClient, targets: Targets, out: Output) -> int:
    tools, status, plan = _toolset_tools(ts, args.toolset or "", args.server or "")
    show_status = _discovery_enabled(targets, plan.deferred_count)
    if out.json_mode:
        out.json(
            {
                "tools": [
                    {
                        "name": t.llm_name,
                        "server": t.server,
                        "tool": t.name,
                        "status": status[t.llm_name],
                        "available": t.available,
                        "description": t.description,
                        "input_schema": t.input_schema,
                    }
                    for t in tools
                ],
                "loaded": sum(1 for t in tools if status[t.llm_name] == "loaded"),
                "deferred": sum(1 for t in tools if status[t.llm_name] == "deferred"),
                "catalog_version": plan.catalog_version,
            }
        )
        return EXIT_OK
    if not tools:
        out.line("No tools.")
        return EXIT_OK
    headers = ["Name", "Server"] + (["Status"] if show_status else []) + ["Description"]
    rows = [
        [t.llm_name, t.server]
        + ([status[t.llm_name]] if show_status else [])
        + [t.description if t.available else f"(unavailable) {t.description}"]
        for t in tools
    ]
    out.table(headers, rows)
    loaded = sum(1 for t in tools if status[t.llm_name] == "loaded")
    out.note(f"{len(tools)} tools: {loaded} loaded, {len(tools) - loaded} deferred")
    return EXIT_OK


def _toolsets(args: argparse.Namespace, ts: ToolscoutClient, targets: Targets, out: Output) -> int:
    def servers(info: Any) -> str:
        parts = []
        for s in info.servers:
            parts.append(s.server if s.mode == "all" else f"{s.server} ({s.mode}: {', '.join(s.tools)})")
        return "; ".join(parts)

    out.listing(
        "toolsets",
        ts.orchestrator.list_toolsets(),
        empty="No toolsets configured (every tool is available to every chat).",
        headers=("Toolset", "Description", "Servers"),
        row=lambda t: (t.name, t.description or "-", servers(t)),
    )
    return EXIT_OK


def _models(args: argparse.Namespace, ts: ToolscoutClient, targets: Targets, out: Output) -> int:
    out.listing(
        "models",
        ts.orchestrator.list_models(),
        empty="No models configured.",
        headers=("Model", "Provider", "Provider model", "Client", "Deferral", "Template", "Endpoint"),
        row=lambda m: (
            m.name,
            m.provider,
            m.model,
            m.client,
            m.deferral + (" (strict)" if m.strict_tools else ""),
            m.template or "-",
            m.base_url or "-",
        ),
    )
    return EXIT_OK


def _manifest(args: argparse.Namespace, ts: ToolscoutClient, targets: Targets, out: Output) -> int:
    manifest = ts.discovery.get_manifest(toolset_arg(args), provider=args.provider or "")
    if out.json_mode:
        out.json(manifest)
        return EXIT_OK
    out.line(manifest.manifest or "(nothing is deferred: every tool is loaded, no manifest is sent)")
    out.note(
        f"{manifest.tokens} tokens (budget {manifest.budget_tokens}) · {manifest.deferred_tools} deferred tools "
        f"on {manifest.deferred_servers} servers · catalog {manifest.catalog_version[:12]}"
    )
    return EXIT_OK


def _search(args: argparse.Namespace, ts: ToolscoutClient, targets: Targets, out: Output) -> int:
    if not (args.query or args.server or args.tool):
        raise CliError("search needs a QUERY, --server or --tool", EXIT_USAGE)
    result = ts.discovery.search_tools(
        args.query or "",
        toolset=toolset_arg(args),
        server_name=args.server or "",
        tool_names=args.tool or (),
        max_results=args.limit or 0,
        offset=args.offset or 0,
    )
    matches = result.matches
    code = EXIT_NOT_FOUND if result.not_found else EXIT_OK
    if out.json_mode:
        out.json(result)
        return code
    if args.llm_text:
        out.line(result.result_text)
        return code
    for missing in result.not_found:
        out.note(f"toolscout: {unknown('tool', missing.name, (), missing.closest)}")
    if not matches:
        out.line("No tools found.")
        return code
    scores = _readable_scores([m.score for m in matches if not m.exact_name])
    explain = bool(getattr(args, "explain", False))
    rows = []
    for i, m in enumerate(matches, 1):
        row: list[object] = [
            i,
            m.tool.llm_name,
            m.tool.server,
            "exact name" if m.exact_name else next(scores),
        ]
        if explain:
            row += [_part(m.bm25_score, 2), _part(m.similarity, 3)]
        rows.append((*row, ("(loaded) " if m.already_loaded else "") + m.tool.description))
    header = ("#", "Tool", "Server", "Score", *(("BM25", "Cosine") if explain else ()), "Description")
    out.table(header, rows)
    first = (args.offset or 0) + 1 if result.mode == "server" else 1
    shown = f"{first}-{first + len(matches) - 1}" if first > 1 else str(len(matches))
    ranked = f" · ranked by {result.ranking}" if result.ranking else ""
    out.note(f"{shown} of {result.total_matches} matches · mode {result.mode}{ranked}")
    return code


def _readable_scores(scores: list[float]) -> Iterator[str]:
    """Scores with as many decimals (2-6) as it takes for different scores to print differently."""
    for decimals in range(2, 7):
        texts = [f"{s:.{decimals}f}" for s in scores]
        if all(a != b or x == y for a, b, x, y in zip(texts, texts[1:], scores, scores[1:], strict=False)):
            break
    return iter(texts)


def _part(value: float | None, decimals: int) -> str:
    return "-" if value is None else f"{value:.{decimals}f}"


def _render_result(result: CallToolResult, out: Output) -> None:
    for block in result.content:
        if block.type == "text":
            out.line(block.text)
        elif block.type == "resource" and block.text:
            out.line(f"[resource {block.uri}]\n{block.text}")
        elif block.type == "resource_link":
            out.line(f"[resource link {block.name or ''} {block.uri}]".replace("  ", " "))
        else:
            out.line(f"[{block.type} {block.mime_type or ''} {len(block.data)} bytes]".replace("  ", " "))
    if not result.content and result.structured_content_json:
        out.line(json.dumps(result.structured_content, indent=2, ensure_ascii=False))
    if result.truncated:
        out.note("(the result was truncated by the pool's size limit)")


def _call(args: argparse.Namespace, ts: ToolscoutClient, targets: Targets, out: Output) -> int:
    try:
        arguments = parse_json(args.args, "--args") if args.args else {}
    except JsonTextError as err:
        raise CliError(err.message.replace("--args: not", "--args is not"), EXIT_USAGE) from None
    if not isinstance(arguments, dict):
        raise CliError('--args must be a JSON object, e.g. \'{"timezone": "UTC"}\'', EXIT_USAGE)
    # Arguments that cannot fit the tool's schema are not sent: the problem is said once, here,
    # instead of by the tool, by us and again in the shape we print. (An unknown tool goes to the
    # pool, whose NOT_FOUND names the closest tools.)
    try:
        tool = find_tool(ts, args.tool, args.server or "")
    except UnavailableError:
        # A sharded pool with a shard down cannot list every tool; the call still goes to the owner,
        # whose pool checks the arguments the same way.
        tool = None
    problems = argument_problems(tool.input_schema, arguments) if tool is not None else []
    if tool is not None and problems:
        if out.json_mode:
            raise CliError(
                f"the arguments do not fit what {tool.llm_name} takes: {'; '.join(problems)}", EXIT_USAGE
            )
        report_argument_problems(args, tool, problems, out)
        return EXIT_USAGE
    result = ts.pool.call_tool(
        args.tool, arguments, server=args.server or "", timeout_seconds=args.call_timeout or 0
    )
    if out.json_mode:
        out.json(result)
    else:
        _render_result(result, out)
    if result.is_error:
        out.note(f"toolscout: the tool {args.tool} reported an error")
        # The tool found fault with arguments that looked right here (a range, a format): its own
        # message above says what; add what it takes.
        if not out.json_mode and tool is not None and "validation error" in result.text.lower():
            show_expected_shape(args, tool, out)
        return EXIT_ERROR
    return EXIT_OK


# Per server: tools, deferred tools, definition tokens of all its tools, of those sent.
_ServerTokens = dict[str, dict[str, int]]
# Per server: tool-result tokens returned, delivered, results kept (None: the pool did not answer).
_ResultTokens = dict[str, tuple[int, int, int]] | None


def _tokens(args: argparse.Namespace, ts: ToolscoutClient, targets: Targets, out: Output) -> int:
    # Every figure comes from discovery, counted in one encoding (the --provider's), so the
    # per-server rows add up to the totals (which also include search_tools and the manifest).
    provider = args.provider or "openai"
    plan = ts.discovery.plan_tools(args.toolset or "", provider=provider)
    manifest = ts.discovery.get_manifest(args.toolset or "", provider=provider)
    per_server = {
        s.server: {
            "tools": s.tools,
            "deferred": s.deferred_tools,
            "all": s.all_tokens,
            "sent": s.loaded_tokens,
        }
        for s in manifest.servers
    }
    results = _result_tokens(ts, out)
    if out.json_mode:
        out.json(_tokens_json(args.toolset or "", provider, plan, per_server, results))
        return EXIT_OK
    # Result tokens first: the definitions' TOTAL stays the last line (scripts read it).
    _result_table(results, out)
    _definition_table(plan, per_server, out)
    approx = " · an estimate: not the provider's own tokenizer" if plan.tokens.estimate else ""
    out.note(f"tool-definition tokens per LLM call for {provider}, counted in {plan.tokens.encoding}{approx}")
    return EXIT_OK


def _overhead_and_saved(plan: ToolPlan, per_server: _ServerTokens) -> tuple[int, int]:
    """The tokens of search_tools and the manifest, and those saved in all (negative when
    search_tools and the manifest cost more than the deferred definitions)."""
    totals = plan.tokens
    loaded_sent = sum(r["sent"] for r in per_server.values())
    return max(totals.sent_tokens - loaded_sent, 0), totals.all_definitions_tokens - totals.sent_tokens


def _tokens_json(
    toolset: str, provider: str, plan: ToolPlan, per_server: _ServerTokens, results: _ResultTokens
) -> dict[str, Any]:
    totals = plan.tokens
    overhead, saved = _overhead_and_saved(plan, per_server)
    return {
        "toolset": toolset,
        "provider": provider,
        "encoding": totals.encoding,
        "estimate": totals.estimate,
        "servers": [
            {
                "server": name,
                "tools": r["tools"],
                "deferred_tools": r["deferred"],
                "tokens_without_discovery": r["all"],
                "tokens_with_discovery": r["sent"],
                "tokens_saved": r["all"] - r["sent"],
            }
            for name, r in sorted(per_server.items())
        ],
        "discovery_overhead_tokens": overhead,
        "total": {
            "tokens_without_discovery": totals.all_definitions_tokens,
            "tokens_with_discovery": totals.sent_tokens,
            "tokens_saved": saved,
        },
        # Tool-result tokens since the pool started (None: the pool did not answer).
        "results": None
        if results is None
        else [
            {
                "server": name,
                "tokens_returned": r[0],
                "tokens_delivered": r[1],
                "tokens_saved": max(r[0] - r[1], 0),
                "results_kept": r[2],
            }
            for name, r in sorted(results.items())
        ],
    }


def _definition_table(plan: ToolPlan, per_server: _ServerTokens, out: Output) -> None:
    totals = plan.tokens
    overhead, saved = _overhead_and_saved(plan, per_server)
    rows: list[tuple[Any, ...]] = [
        (name, r["tools"], r["deferred"], r["all"], r["sent"], r["all"] - r["sent"])
        for name, r in sorted(per_server.items())
    ]
    if plan.has_search_tool:
        rows.append(("search_tools + manifest", "-", "-", 0, overhead, -overhead))
    pct = 100.0 * saved / totals.all_definitions_tokens if totals.all_definitions_tokens else 0.0
    rows.append(
        (
            "TOTAL (estimate)" if totals.estimate else "TOTAL",
            sum(r["tools"] for r in per_server.values()),
            plan.deferred_count,
            totals.all_definitions_tokens,
            totals.sent_tokens,
            f"{saved} ({pct:.0f}%)",
        )
    )
    out.table(
        ("Server", "Tools", "Deferred", "Without discovery", "With discovery", "Saved"), rows, wrap_last=False
    )


def _result_tokens(ts: ToolscoutClient, out: Output) -> dict[str, tuple[int, int, int]] | None:
    """Per server, tool-result tokens returned / delivered and results kept behind a handle since
    the pool started (the sharded client sums a server's shards); None when the pool does not answer."""
    try:
        statuses = ts.pool.list_servers()
    except ToolscoutClientError as err:
        out.note(f"toolscout: tool-result tokens unknown: the pool did not answer ({err.message})")
        return None
    return {
        s.name: (s.result_tokens_returned, s.result_tokens_delivered, s.results_kept)
        for s in statuses
        if s.result_tokens_returned
    }


def _result_table(results: dict[str, tuple[int, int, int]] | None, out: Output) -> None:
    if results is None:
        return
    if not results:
        out.note("no tool results shaped to a budget since the pool started")
        return
    rows: list[tuple[Any, ...]] = [
        (name, r[0], r[1], max(r[0] - r[1], 0), r[2]) for name, r in sorted(results.items())
    ]
    returned = sum(r[0] for r in results.values())
    delivered = sum(r[1] for r in results.values())
    pct = 100.0 * (returned - delivered) / returned if returned else 0.0
    rows.append(
        (
            "TOTAL",
            returned,
            delivered,
            f"{returned - delivered} ({pct:.0f}%)",
            sum(r[2] for r in results.values()),
        )
    )
    out.table(("Server", "Result tokens returned", "Delivered", "Saved", "Kept"), rows, wrap_last=False)
    out.note("tool-result tokens since the pool started (results shaped to a budget: orchestrator, gateway)")


COMMANDS = {
    "servers": _servers,
    "tools": _tools,
    "describe": describe,
    "toolsets": _toolsets,
    "models": _models,
    "manifest": _manifest,
    "search": _search,
    "call": _call,
    "tokens": _tokens,
}
