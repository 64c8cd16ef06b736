"""Per-chat statistics as the loop counts them; returned in every response as :class:`toolscout.client.ChatStats`."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from toolscout.client import ChatStats, Deferral, DiscoveryStats, ResultTokens, TokenUsage, ToolCallCount

from orchestrator_svc.messages import Usage

__all__ = ["ChatTally", "ToolCallTally"]


@dataclass(slots=True)
class ToolCallTally:
    tool: str
    server: str
    calls: int = 0
    errors: int = 0


@dataclass(slots=True)
class ChatTally:
    """What one running chat has counted so far (the shared :class:`ChatStats` is its final form)."""

    usage: Usage = field(default_factory=Usage)
    llm_calls: int = 0
    tool_calls: dict[tuple[str, str], ToolCallTally] = field(default_factory=dict)
    # The shared figures themselves, replaced by the counting methods below (one field list).
    discovery: DiscoveryStats = field(default_factory=DiscoveryStats)
    iterations: int = 0
    duration_seconds: float = 0.0
    results: dict[str, ResultTokens] = field(default_factory=dict)

    def count_result(
        self, server: str, returned: int, delivered: int, *, kept: bool, estimated: bool
    ) -> None:
        """Tool-result tokens of one call shaped to a budget: returned by ``server``, delivered to the
        model, whether a handle kept the rest."""
        r = self.results.get(server) or ResultTokens(server)
        self.results[server] = replace(
            r,
            tokens_returned=r.tokens_returned + returned,
            tokens_delivered=r.tokens_delivered + delivered,
            tokens_saved=max(r.tokens_returned + returned - r.tokens_delivered - delivered, 0),
            results_kept=r.results_kept + int(kept),
            estimated=r.estimated or estimated,
        )

    def count_read(self, server: str, tokens: int) -> None:
        """One read_result answer of ``tokens`` from ``server``'s kept result."""
        r = self.results.get(server) or ResultTokens(server)
        self.results[server] = replace(r, reads=r.reads + 1, read_tokens=r.read_tokens + tokens)

    def count_tool(self, tool: str, server: str, *, error: bool) -> None:
        entry = self.tool_calls.get((tool, server))
        if entry is None:
            entry = self.tool_calls[(tool, server)] = ToolCallTally(tool, server)
        entry.calls += 1
        entry.errors += int(error)

    def set_deferral(self, mode: Deferral, fallback_reason: str = "") -> None:
        """The chat's mode (after any fallback: see providers/deferral.py); the reason when native fell back."""
        self.discovery = replace(self.discovery, deferral=mode, native_fallback_reason=fallback_reason)

    def count_definitions(self, sent: int, all_definitions: int, encoding: str, estimate: bool) -> None:
        """One LLM call's tool-definition tokens: ``sent``, and what sending every definition would cost."""
        d = self.discovery
        total_sent = d.definition_tokens_sent + sent
        total_all = d.definition_tokens_all + all_definitions
        self.discovery = replace(
            d,
            definition_tokens_sent=total_sent,
            definition_tokens_all=total_all,
            tokens_saved=max(0, total_all - total_sent),
            encoding=encoding,
            estimate=estimate,
        )

    def count_search(self) -> None:
        self.discovery = replace(self.discovery, search_calls=self.discovery.search_calls + 1)

    def count_discovered(self, tools: int) -> None:
        self.discovery = replace(self.discovery, tools_discovered=self.discovery.tools_discovered + tools)

    def count_deferred_rejection(self) -> None:
        d = self.discovery
        self.discovery = replace(d, deferred_call_rejections=d.deferred_call_rejections + 1)

    def stats(self) -> ChatStats:
        u = self.usage
        return ChatStats(
            usage=TokenUsage(u.input_tokens, u.output_tokens, u.cached_input_tokens, u.cache_write_tokens),
            llm_calls=self.llm_calls,
            tool_calls=tuple(
                ToolCallCount(c.tool, c.server, c.calls, c.errors) for c in self.tool_calls.values()
            ),
            discovery=self.discovery,
            iterations=self.iterations,
            duration_seconds=self.duration_seconds,
            result_tokens=tuple(self.results.values()),
        )
