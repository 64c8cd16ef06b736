"""What searches of one toolset run against: its tools, their index, lookups by name.

Built once per (catalog version, toolset) with the rest of the prepared state and shared by every
request until the catalog changes.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Sequence

from discovery_svc.catalog import Tool
from discovery_svc.index import SearchIndex, normalize_name

__all__ = ["SearchScope"]


class SearchScope:
    """What searches run against: one toolset of one catalog version, built once."""

    def __init__(self, tools: Sequence[Tool], index: SearchIndex, eager: Collection[str]) -> None:
        self.tools = tuple(tools)
        self.index = index
        self.eager = frozenset(eager)
        self.by_llm_name: dict[str, Tool] = {t.llm_name: t for t in self.tools}
        self.by_server: dict[str, tuple[Tool, ...]] = {}
        by_name: dict[str, list[Tool]] = {}
        by_norm: dict[str, list[Tool]] = {}
        for tool in self.tools:
            by_name.setdefault(tool.name, []).append(tool)
            by_norm.setdefault(normalize_name(tool.name), []).append(tool)
            if tool.llm_name != tool.name:
                by_norm.setdefault(normalize_name(tool.llm_name), []).append(tool)
        grouped: dict[str, list[Tool]] = {}
        for tool in self.tools:
            grouped.setdefault(tool.server, []).append(tool)
        self.by_server = {s: tuple(ts) for s, ts in sorted(grouped.items())}
        self._by_name = {k: tuple(v) for k, v in by_name.items()}
        self._by_norm = {k: tuple(v) for k, v in by_norm.items()}

    def resolve(self, name: str) -> tuple[Tool, ...]:
        """Tools called ``name``: by LLM name, else by server tool name, else case-insensitively."""
        tool = self.by_llm_name.get(name)
        if tool is not None:
            return (tool,)
        return self._by_name.get(name) or self._by_norm.get(normalize_name(name), ())

    def closest(self, name: str, server: str | None, n: int = 3) -> tuple[str, ...]:
        """The existing LLM names closest to ``name`` (spelling first, then shared words)."""
        hits = self.index.search(name, 50, server=server)
        candidates = {h.key for h in hits}
        pool = self.tools if server is None else self.by_server.get(server, ())
        # difflib over every name costs ~20 µs a name: fine for small catalogs; beyond that only
        # the tools sharing a word with the name are compared (misspelt words still share others).
        if len(pool) <= 1000:
            candidates.update(t.llm_name for t in pool)
            candidates.update(t.name for t in pool)
        close = difflib.get_close_matches(name, sorted(candidates), n=n, cutoff=0.5)
        keys = [tools[0].llm_name for c in close if (tools := self.resolve(c))]
        keys += [h.key for h in hits]
        return tuple(dict.fromkeys(keys))[:n]
