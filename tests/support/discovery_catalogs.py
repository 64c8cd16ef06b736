"""Catalogs and configs for discovery tests and benchmarks (plain domain objects, no sockets)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from discovery_svc.catalog import Catalog, Tool
from toolscout_kit.config import ToolscoutConfig, parse_config

__all__ = ["catalog", "config", "load_jsonl_tools", "make_tool", "synthetic_tools"]


def make_tool(
    server: str,
    name: str,
    description: str = "",
    params: Mapping[str, Any] | None = None,
    required: Sequence[str] = (),
) -> Tool:
    """A tool named ``{server}_{name}`` for the LLM; ``params`` maps parameter name to its schema."""
    schema: dict[str, Any] = {"type": "object", "properties": dict(params or {})}
    if required:
        schema["required"] = list(required)
    return Tool.create(
        server=server, name=name, llm_name=f"{server}_{name}", description=description, input_schema=schema
    )


def catalog(tools: Iterable[Tool], version: str = "v1") -> Catalog:
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


def synthetic_tools(n: int, per_server: int = 25) -> list[Tool]:
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


def load_jsonl_tools(path: str | Path) -> list[Tool]:
    """Tools from a ``../shared/data`` file, named ``{server}_{name}`` like the pool names them."""
    tools = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            tools.append(
                make_tool(d["server"], d["name"], d.get("description") or "", None)
                if not d.get("input_schema")
                else Tool.create(
                    server=d["server"],
                    name=d["name"],
                    llm_name=f"{d['server']}_{d['name']}",
                    description=d.get("description") or "",
                    input_schema=d["input_schema"],
                )
            )
    return tools
