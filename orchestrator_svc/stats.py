"""Per-chat statistics, returned in every response."""

from __future__ import annotations

from dataclasses import dataclass, field

from orchestrator_svc.messages import Usage

__all__ = ["ChatStats", "DiscoveryStats", "ToolCallCount"]


@dataclass(slots=True)
class ToolCallCount:
    tool: str
    server: str
    calls: int = 0
    errors: int = 0


@dataclass(slots=True)
class DiscoveryStats:
    search_calls: int = 0
    tools_discovered: int = 0
    definition_tokens_sent: int = 0
    definition_tokens_all: int = 0
    encoding: str = ""
    estimate: bool = False
    deferred_call_rejections: int = 0
    # "native" or "append" (see providers/deferral.py); the reason when native fell back.
    deferral: str = ""
    native_fallback_reason: str = ""

    @property
    def tokens_saved(self) -> int:
        return max(0, self.definition_tokens_all - self.definition_tokens_sent)


@dataclass(slots=True)
class ChatStats:
    usage: Usage = field(default_factory=Usage)
    llm_calls: int = 0
    tool_calls: dict[tuple[str, str], ToolCallCount] = field(default_factory=dict)
    discovery: DiscoveryStats = field(default_factory=DiscoveryStats)
    iterations: int = 0
    duration_seconds: float = 0.0

    def count_tool(self, tool: str, server: str, *, error: bool) -> None:
        entry = self.tool_calls.get((tool, server))
        if entry is None:
            entry = self.tool_calls[(tool, server)] = ToolCallCount(tool, server)
        entry.calls += 1
        entry.errors += int(error)
