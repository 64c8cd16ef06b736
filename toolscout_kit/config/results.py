"""``toolscout.results``: tool results shaped to a token budget, the rest behind a handle."""

from __future__ import annotations

from pydantic import Field, field_validator

from toolscout_kit.config._base import Strict, check_result_budget

__all__ = ["ResultsSettings"]


class ResultsSettings(Strict):
    """Tool results shaped to a token budget (``toolscout.results``): a result over the budget a
    caller asks for (``CallTool.result_budget_tokens``) becomes a preview plus a handle that
    ``ReadResult`` reads."""

    # The orchestrator's budget for one tool result reaching the model (0: no shaping; results pass
    # whole, cut only at orchestrator.max_tool_result_chars). A server's result_budget caps it.
    budget_tokens: int = Field(default=10_000, ge=0)
    # The preview of a result over the budget (at most the budget).
    preview_tokens: int = Field(default=1000, ge=50)

    @field_validator("budget_tokens")
    @classmethod
    def _budget_is_budget(cls, tokens: int) -> int:
        return check_result_budget(tokens)

    # How long the pool keeps a result behind its handle, and how many bytes of them it keeps (the
    # oldest are dropped first; reading one then says it expired).
    handle_ttl: float = Field(default=900.0, gt=0)
    handle_store_bytes: int = Field(default=256_000_000, ge=1_000_000)
    # A result whose caller has it shaped to a budget is kept whole up to this many bytes (instead
    # of being cut at pool.max_result_bytes): its preview stands for all of it and ReadResult reaches
    # its end. Past it, pool.result_overflow applies. Stdio servers' reply lines may be this long.
    max_kept_bytes: int = Field(default=64_000_000, ge=1024)
