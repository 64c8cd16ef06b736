"""The tool catalog as discovery sees it: an immutable snapshot fed from the pool.

A :class:`Catalog` is built once per catalog version (the pool's content hash) and shared by
every request until the pool reports a new version, so everything derived from it (partitions,
indexes, manifests, token counts) can be cached per version.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = ["Catalog", "CatalogHolder", "Tool", "parse_json_object"]

_EMPTY_SCHEMA: Mapping[str, Any] = MappingProxyType({"type": "object", "properties": {}})


def parse_json_object(text: str) -> Mapping[str, Any] | None:
    """The JSON object in ``text``, or None when it is empty, invalid or not an object."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


@dataclass(frozen=True, slots=True)
class Tool:
    """One MCP tool, with its input schema parsed once per catalog version."""

    server: str
    name: str
    llm_name: str
    description: str = ""
    input_schema_json: str = '{"type":"object","properties":{}}'
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
            schema = parse_json_object(input_schema_json) or dict(_EMPTY_SCHEMA)
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


CatalogListener = Callable[[Catalog], None]


class CatalogHolder:
    """The current catalog; waiters can block until the first one arrives."""

    def __init__(self) -> None:
        self._current: Catalog | None = None
        self._ready = asyncio.Event()
        self._listeners: list[CatalogListener] = []

    @property
    def current(self) -> Catalog | None:
        return self._current

    def subscribe(self, listener: CatalogListener) -> None:
        """Calls ``listener`` with every new catalog (and at once if one is already here)."""
        self._listeners.append(listener)
        if self._current is not None:
            listener(self._current)

    def update(self, catalog: Catalog) -> bool:
        """Installs ``catalog``; returns False (and does nothing) when its version is unchanged."""
        if self._current is not None and self._current.version == catalog.version:
            return False
        self._current = catalog
        self._ready.set()
        for listener in self._listeners:
            listener(catalog)
        return True

    async def wait_ready(self) -> Catalog:
        """The catalog, waiting for the first one (callers bound the wait with asyncio.timeout)."""
        await self._ready.wait()
        assert self._current is not None
        return self._current
