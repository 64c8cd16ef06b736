"""Per-chat statistics as the loop counts them; returned in every response as :class:`toolscout.client.ChatStats`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from toolscout.client import ChatStats, Deferral, DiscoveryStats, ResultTokens, TokenUsage, ToolCallCount

from orchestrator_svc.messages import Usage

__all__ = ["ChatTally", "DiscoveryTally", "ResultTally", "ToolCallTally"]


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
    # The chat's mode after any fallback (see providers/deferral.py); the reason when native fell back.
    deferral: Deferral | Literal[""] = ""
    native_fallback_reason: str = ""

    @property
    def tokens_saved(self) -> int:
        return max(0, self.definition_tokens_all - self.definition_tokens_sent)


@dataclass(slots=True)
class ResultTally:
    """Tool-result tokens of one server: returned by it, delivered to the model (shaped), and
    read (read_result answers)."""

    server: str
    returned: int = 0
    delivered: int = 0
    kept: int = 0
    reads: int = 0
    read_tokens: int = 0
    estimated: bool = False

    def stats(self) -> ResultTokens:
        return ResultTokens(
            server=self.server,
            tokens_returned=self.returned,
            tokens_delivered=self.delivered,
            tokens_saved=max(self.returned - self.delivered, 0),
            results_kept=self.kept,
            reads=self.reads,
            estimated=self.estimated,
            read_tokens=self.read_tokens,
        )


@dataclass(slots=True)
class ChatTally:
    """What one running chat has counted so far (the shared :class:`ChatStats` is its final form)."""

    usage: Usage = field(default_factory=Usage)
    llm_calls: int = 0
    tool_calls: dict[tuple[str, str], ToolCallTally] = field(default_factory=dict)
    discovery: DiscoveryTally = field(default_factory=DiscoveryTally)
    iterations: int = 0
    duration_seconds: float = 0.0
    results: dict[str, ResultTally] = field(default_factory=dict)

    def result_tally(self, server: str) -> ResultTally:
        entry = self.results.get(server)
        if entry is None:
            entry = self.results[server] = ResultTally(server)
        return entry

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
            result_tokens=tuple(r.stats() for r in self.results.values()),
        )
