"""Catalogs and configs for discovery tests and benchmarks (plain domain objects, no sockets)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from discovery_svc.catalog import Catalog, ParsedTool
from discovery_svc.engine import DiscoveryEngine
from discovery_svc.hybrid_stage import hybrid_stage_from_config
from discovery_svc.metrics import DiscoveryMetrics
from mcp_pool_svc.naming import NameTable
from tests.support.mcp_servers import REPO_ROOT
from toolscout_kit.config import ToolscoutConfig, parse_config

# The example config's catalog as its servers list it (tests/e2e checks it against the running
# servers) and the documented queries, each with the tool it must find first (none: off-topic).
EXAMPLE_CONFIG = REPO_ROOT / "examples" / "casual_mcp_config.json"
EXAMPLE_TOOLS = REPO_ROOT / "bench" / "data" / "example.tools.jsonl"
EXAMPLE_QUERIES = REPO_ROOT / "bench" / "data" / "example.queries.jsonl"
# The real tool catalogs and query sets beside the project.
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"

__all__ = [
    "EXAMPLE_QUERIES",
    "SHARED_DATA",
    "catalog",
    "config",
    "example_catalog",
    "example_config",
    "example_engine",
    "example_queries",
    "load_jsonl_tools",
    "make_tool",
    "synthetic_tools",
]


def make_tool(
    server: str,
    name: str,
    description: str = "",
    params: Mapping[str, Any] | None = None,
    required: Sequence[str] = (),
) -> ParsedTool:
    """A tool named ``{server}_{name}`` for the LLM; ``params`` maps parameter name to its schema."""
    schema: dict[str, Any] = {"type": "object", "properties": dict(params or {})}
    if required:
        schema["required"] = list(required)
    return ParsedTool.create(
        server=server, name=name, llm_name=f"{server}_{name}", description=description, input_schema=schema
    )


def catalog(tools: Iterable[ParsedTool], version: str = "v1") -> Catalog:
    return Catalog(version, tools)


def config(data: Mapping[str, Any] | None = None, **discovery: Any) -> ToolscoutConfig:
    """A config from a casual-mcp style document; ``discovery`` sets toolscout.discovery keys."""
    doc = dict(data or {})
    if discovery:
        doc.setdefault("toolscout", {})["discovery"] = discovery
    return parse_config(doc, env={})


_VERBS = ["get", "list", "create", "update", "delete", "search", "send", "fetch", "export", "sync"]
_NOUNS = [
    "invoice", "customer", "ticket", "message", "calendar event", "file", "issue", "order", "report",
    "contact", "repository", "payment", "shipment", "alert", "dashboard", "document", "user", "page",
]  # fmt: skip


def synthetic_tools(n: int, per_server: int = 25) -> list[ParsedTool]:
    """``n`` plausible tools over ``n / per_server`` servers (deterministic)."""
    tools = []
    for i in range(n):
        server = f"service-{i // per_server:05d}"
        # Coprime strides spread verbs and nouns without a random generator.
        verb, noun = _VERBS[(i * 7 + 3) % len(_VERBS)], _NOUNS[(i * 11 + i // per_server) % len(_NOUNS)]
        name = f"{verb}_{noun.replace(' ', '_')}_{i % per_server}"
        desc = f"{verb.capitalize()} a {noun} in {server}. Returns the {noun} record with its id and status."
        params = {
            "id": {"type": "string", "description": f"The {noun} id."},
            "limit": {"type": "integer", "description": "Maximum number of results."},
        }
        tools.append(make_tool(server, name, desc, params, required=["id"]))
    return tools


def load_jsonl_tools(path: str | Path) -> list[ParsedTool]:
    """Tools from a ``../shared/data`` file, named ``{server}_{name}`` like the pool names them."""
    tools = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            tools.append(
                make_tool(d["server"], d["name"], d.get("description") or "", None)
                if not d.get("input_schema")
                else ParsedTool.create(
                    server=d["server"],
                    name=d["name"],
                    llm_name=f"{d['server']}_{d['name']}",
                    description=d.get("description") or "",
                    input_schema=d["input_schema"],
                )
            )
    return tools


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def example_catalog() -> Catalog:
    """The example config's 24 tools, named as the pool names them."""
    rows = _read_jsonl(EXAMPLE_TOOLS)
    names = NameTable((r["server"], r["name"]) for r in rows)
    tools = [
        ParsedTool.create(
            server=r["server"],
            name=r["name"],
            llm_name=names.name_for(r["server"], r["name"]),
            description=r["description"],
            input_schema=r["input_schema"],
        )
        for r in rows
    ]
    return Catalog("example", tools)


def example_queries() -> list[dict[str, Any]]:
    return _read_jsonl(EXAMPLE_QUERIES)


def example_config(mode: str, cache_dir: Path) -> ToolscoutConfig:
    """examples/casual_mcp_config.json with ``toolscout.search.mode`` set (embeddings in ``cache_dir``)."""
    doc = json.loads(EXAMPLE_CONFIG.read_text(encoding="utf-8"))
    doc.setdefault("toolscout", {})["search"] = {"mode": mode, "cache_dir": str(cache_dir)}
    return parse_config(doc, env={}, base_dir=EXAMPLE_CONFIG.parent)


async def example_engine(mode: str, cache_dir: Path, wait: float = 60.0) -> DiscoveryEngine:
    """A discovery engine on the example catalog, searching with ``mode``; with hybrid search, once
    the tools are embedded (at most ``wait`` seconds). Close it when done."""
    config = example_config(mode, cache_dir)
    metrics = DiscoveryMetrics()
    hybrid = hybrid_stage_from_config(config, metrics)
    engine = DiscoveryEngine(config, metrics=metrics, hybrid=hybrid)
    engine.set_catalog(example_catalog())
    await engine.warm()
    if hybrid is not None:
        async with asyncio.timeout(wait):
            await engine.wait_hybrid_ready()
    return engine
