"""ChatTotals: the running totals of several chats' stats (the console's and the CLI's)."""

from __future__ import annotations

from toolscout.client import (
    ChatStats,
    ChatTotals,
    DiscoveryStats,
    ResultTokens,
    TokenUsage,
    ToolCallCount,
)


def _stats(sent: int, everything: int, saved: int) -> ChatStats:
    return ChatStats(
        usage=TokenUsage(input_tokens=10, output_tokens=2, cached_input_tokens=4, cache_write_input_tokens=1),
        llm_calls=2,
        tool_calls=(ToolCallCount("a", "s", calls=2), ToolCallCount("b", "s", calls=1)),
        discovery=DiscoveryStats(
            search_calls=1, definition_tokens_sent=sent, definition_tokens_all=everything, tokens_saved=saved
        ),
        result_tokens=(ResultTokens("s", tokens_returned=900, tokens_delivered=100, read_tokens=50),),
    )


def test_totals_sum_every_count_of_each_chat_added() -> None:
    totals = ChatTotals()
    totals.add(_stats(100, 400, 300))
    totals.add(_stats(500, 400, 0))
    assert totals == ChatTotals(
        chats=2,
        llm_calls=4,
        search_calls=2,
        tool_calls=6,
        input_tokens=20,
        output_tokens=4,
        cached_input_tokens=8,
        cache_write_input_tokens=2,
        definition_tokens_all=800,
        definition_tokens_sent=600,
        tokens_saved=300,
        result_tokens_returned=1800,
        result_tokens_delivered=300,
    )
