"""What the loop needs from discovery and the pool, as plain-Python interfaces.

The adapters over the client library live in :mod:`orchestrator_svc.downstream`; unit tests use
in-memory fakes. Both raise toolscout_kit domain errors only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from orchestrator_svc.messages import Attachment, ToolDef

__all__ = ["DiscoverySeam", "PoolSeam", "SearchOutcome", "TokenCounts", "ToolOutcome", "ToolPlan"]


@dataclass(frozen=True, slots=True)
class TokenCounts:
    all_definitions: int = 0
    sent: int = 0
    encoding: str = ""
    estimate: bool = False


@dataclass(frozen=True, slots=True)
class ToolPlan:
    # Eagerly loaded tools first, then discovered ones in the order given (stable for prompt caches).
    loaded_tools: list[ToolDef]
    search_tool: ToolDef | None = None
    # Non-empty when discovery puts the manifest in a system message instead of the tool description.
    manifest_system_message: str = ""
    # Every deferred tool of the toolset; filled only when asked for (it can be large).
    deferred_names: frozenset[str] = frozenset()
    tokens: TokenCounts = field(default_factory=TokenCounts)
    dropped: list[str] = field(default_factory=list)
    # The discovered tools asked for that are deferred tools of the toolset (now loaded), in order.
    discovered: list[str] = field(default_factory=list)
    catalog_version: str = ""
    # Filled only when asked for: every deferred tool of the toolset (flagged ``deferred``).
    deferred_tools: list[ToolDef] = field(default_factory=list)
    # Deferred tools of the toolset not among ``discovered``.
    deferred_count: int = 0


@dataclass(frozen=True, slots=True)
class SearchOutcome:
    result_text: str
    newly_loaded: list[ToolDef] = field(default_factory=list)
    # The plan after this search (the discovered tools given, then the ones it loaded).
    plan: ToolPlan | None = None


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    # Every content block (text blocks included, in order).
    content: list[Attachment]
    structured_content_json: str = ""
    is_error: bool = False
    server: str = ""
    truncated: bool = False


class DiscoverySeam(Protocol):
    async def plan_tools(
        self,
        *,
        toolset: str,
        discovered: Sequence[str],
        provider: str,
        time_limit: float | None,
        with_deferred_names: bool = False,
        with_deferred_tools: bool = False,
        toolset_json: str = "",
    ) -> ToolPlan:
        """``deferred_names`` / ``deferred_tools`` are filled only when asked for (they can be large).
        ``toolset_json``: an inline toolset instead of ``toolset`` (discovery validates it).

        Raises NotFoundError (unknown toolset), UnavailableError.
        """
        ...

    async def search_tools(
        self,
        *,
        toolset: str,
        arguments_json: str,
        loaded: Sequence[str],
        time_limit: float | None,
        discovered: Sequence[str] = (),
        provider: str = "",
        compact_text: bool = False,
        toolset_json: str = "",
    ) -> SearchOutcome:
        """One search; with ``provider`` the outcome carries the plan after it (one round trip).
        ``compact_text``: the provider loads found definitions itself, so the text leaves them out.

        Raises InvalidArgumentError / NotFoundError with a message written for the LLM.
        """
        ...


class PoolSeam(Protocol):
    async def call_tool(
        self, *, llm_name: str, arguments_json: str, meta_json: str, time_limit: float | None
    ) -> ToolOutcome:
        """A failing tool is data (``is_error``); raises NotFoundError, UnavailableError, ..."""
        ...
