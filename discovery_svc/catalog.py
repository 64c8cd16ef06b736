"""The tool catalog as discovery sees it: an immutable snapshot fed from the pool.

A :class:`Catalog` is built once per catalog version (the pool's content hash) and shared by
every request until the pool reports a new version, so everything derived from it (partitions,
indexes, manifests, token counts) can be cached per version.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from toolscout.client import EMPTY_INPUT_SCHEMA_JSON

from toolscout_kit.json_text import json_object_or_none

__all__ = ["Catalog", "Tool"]

_EMPTY_SCHEMA: Mapping[str, Any] = MappingProxyType(json.loads(EMPTY_INPUT_SCHEMA_JSON))


@dataclass(frozen=True, slots=True)
class Tool:
    """One MCP tool, with its input schema parsed once per catalog version."""

    server: str
    name: str
    llm_name: str
    description: str = ""
    input_schema_json: str = EMPTY_INPUT_SCHEMA_JSON
    title: str = ""
    output_schema_json: str = ""
    annotations_json: str = ""
    available: bool = True
    # Parsed from input_schema_json; never part of equality (it is derived).
    input_schema: Mapping[str, Any] = field(default_factory=lambda: _EMPTY_SCHEMA, compare=False, repr=False)

    @classmethod
    def create(
        cls,
        *,
        server: str,
        name: str,
        llm_name: str,
        description: str = "",
        input_schema: Mapping[str, Any] | None = None,
        input_schema_json: str | None = None,
        title: str = "",
        output_schema_json: str = "",
        annotations_json: str = "",
        available: bool = True,
    ) -> Tool:
        """A tool from either a schema object or its JSON text (an invalid schema becomes empty)."""
        if input_schema_json is None:
            schema: Mapping[str, Any] = (
                dict(input_schema) if input_schema is not None else dict(_EMPTY_SCHEMA)
            )
            input_schema_json = json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
        else:
            schema = json_object_or_none(input_schema_json) or dict(_EMPTY_SCHEMA)
        return cls(
            server=server,
            name=name,
            llm_name=llm_name,
            description=description,
            input_schema_json=input_schema_json,
            title=title,
            output_schema_json=output_schema_json,
            annotations_json=annotations_json,
            available=available,
            input_schema=schema,
        )


class Catalog:
    """An immutable catalog snapshot with lookups by LLM name and by server."""

    __slots__ = ("_by_llm_name", "_by_server", "tools", "version")

    def __init__(self, version: str, tools: Iterable[Tool]) -> None:
        self.version = version
        # The pool sends tools sorted by (server, name); sort anyway so order never depends on it.
        self.tools: tuple[Tool, ...] = tuple(sorted(tools, key=lambda t: (t.server, t.name)))
        self._by_llm_name: dict[str, Tool] = {t.llm_name: t for t in self.tools}
        by_server: dict[str, list[Tool]] = {}
        for tool in self.tools:
            by_server.setdefault(tool.server, []).append(tool)
        self._by_server: dict[str, tuple[Tool, ...]] = {s: tuple(ts) for s, ts in by_server.items()}

    def __len__(self) -> int:
        return len(self.tools)

    @property
    def servers(self) -> Sequence[str]:
        """Servers with at least one tool, sorted."""
        return sorted(self._by_server)

    def by_llm_name(self, llm_name: str) -> Tool | None:
        return self._by_llm_name.get(llm_name)

    def server_tools(self, server: str) -> tuple[Tool, ...]:
        return self._by_server.get(server, ())
