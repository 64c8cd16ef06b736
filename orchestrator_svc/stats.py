"""Per-chat statistics as the loop counts them; returned in every response as :class:`toolscout.client.ChatStats`."""

from __future__ import annotations

from dataclasses import dataclass, field

from toolscout.client import ChatStats, DiscoveryStats, TokenUsage, ToolCallCount

from orchestrator_svc.messages import Usage

__all__ = ["ChatTally", "DiscoveryTally", "ToolCallTally"]


@dataclass(slots=True)
class ToolCallTally:
    tool: str
    server: str
    calls: int = 0
    errors: int = 0


@dataclass(slots=True)
class DiscoveryTally:
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
class ChatTally:
    """What one running chat has counted so far (the shared :class:`ChatStats` is its final form)."""

    usage: Usage = field(default_factory=Usage)
    llm_calls: int = 0
    tool_calls: dict[tuple[str, str], ToolCallTally] = field(default_factory=dict)
    discovery: DiscoveryTally = field(default_factory=DiscoveryTally)
    iterations: int = 0
    duration_seconds: float = 0.0

    def count_tool(self, tool: str, server: str, *, error: bool) -> None:
        entry = self.tool_calls.get((tool, server))
        if entry is None:
            entry = self.tool_calls[(tool, server)] = ToolCallTally(tool, server)
        entry.calls += 1
        entry.errors += int(error)

    def stats(self) -> ChatStats:
        u, d = self.usage, self.discovery
        return ChatStats(
            usage=TokenUsage(u.input_tokens, u.output_tokens, u.cached_input_tokens, u.cache_write_tokens),
            llm_calls=self.llm_calls,
            tool_calls=tuple(
                ToolCallCount(c.tool, c.server, c.calls, c.errors) for c in self.tool_calls.values()
            ),
            discovery=DiscoveryStats(
                search_calls=d.search_calls,
                tools_discovered=d.tools_discovered,
                definition_tokens_sent=d.definition_tokens_sent,
                definition_tokens_all=d.definition_tokens_all,
                tokens_saved=d.tokens_saved,
                encoding=d.encoding,
                estimate=d.estimate,
                deferred_call_rejections=d.deferred_call_rejections,
                deferral=d.deferral,
                native_fallback_reason=d.native_fallback_reason,
            ),
            iterations=self.iterations,
            duration_seconds=self.duration_seconds,
        )
