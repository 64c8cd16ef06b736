"""The orchestrator's Prometheus metrics. Names are a contract: dashboards and alerts use them.

Every name starts ``toolscout_orchestrator_``. The names before 0.2.0 (``toolscout_llm_*``,
``toolscout_chats_total``, …) are served too until 0.3.0 (:data:`DEPRECATED_NAMES`).

``server.py`` passes the service's own registry (the one its metrics endpoint serves); tests pass a
fresh one. Definition-token figures are counted here, once per LLM call actually made.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry

from orchestrator_svc.messages import Usage
from toolscout_kit.metrics import DeprecatedNames, MetricSet, ResultTokens
from toolscout_kit.tracing import exemplar

__all__ = ["DEPRECATED_NAMES", "INLINE_TOOLSET_LABEL", "OrchestratorMetrics"]

# Old name → attribute of OrchestratorMetrics holding the renamed metric (served until 0.3.0).
DEPRECATED_NAMES = {
    "toolscout_llm_tokens": "llm_tokens",
    "toolscout_llm_call_duration_seconds": "llm_call_duration",
    "toolscout_llm_errors": "llm_errors",
    "toolscout_chat_iterations": "chat_iterations",
    "toolscout_chats": "chats",
    "toolscout_deferred_call_rejections": "deferred_rejections",
    "toolscout_tokens_saved": "tokens_saved",
    "toolscout_definition_tokens_sent": "definition_tokens_sent",
    "toolscout_definition_tokens_all": "definition_tokens_all",
    "toolscout_native_deferral_fallbacks": "native_fallbacks",
    "toolscout_search_calls": "search_calls",
    "toolscout_discovered_tool_calls": "discovered_tool_calls",
}

_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300)
_ITERATION_BUCKETS = (0, 1, 2, 3, 4, 5, 7, 10, 15, 20, 30, 50, 100)
# Chats with an inline toolset (any number of distinct filters) share one label value.
INLINE_TOOLSET_LABEL = "_inline"


def _toolset(name: str) -> str:
    return name or "_all"


class OrchestratorMetrics:
    """The orchestrator's metrics, registered in ``registry`` (a throwaway one when None)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        m = MetricSet("toolscout_orchestrator_", registry)
        self.llm_tokens = m.counter(
            "llm_tokens", "Provider-reported LLM tokens.", "provider", "model", "type"
        )
        self.llm_call_duration = m.histogram(
            "llm_call_duration_seconds",
            "Duration of one LLM call (retries included).",
            "provider",
            "model",
            buckets=_LATENCY_BUCKETS,
        )
        self.llm_errors = m.counter(
            "llm_errors", "Failed LLM call attempts by reason.", "provider", "model", "reason"
        )
        self.chat_iterations = m.histogram(
            "chat_iterations", "Tool-loop iterations per chat.", buckets=_ITERATION_BUCKETS
        )
        self.chats = m.counter("chats", "Chats by outcome.", "model", "outcome")
        self.deferred_rejections = m.counter(
            "deferred_call_rejections",
            "Calls of deferred tools rejected because they were not loaded yet.",
            "model",
        )
        per_toolset = ("model", "toolset")
        self.tokens_saved = m.counter(
            "tokens_saved", "Tool-definition tokens not sent thanks to discovery.", *per_toolset
        )
        self.definition_tokens_sent = m.counter(
            "definition_tokens_sent", "Tool-definition tokens sent to LLMs.", *per_toolset
        )
        self.definition_tokens_all = m.counter(
            "definition_tokens_all",
            "Tool-definition tokens that sending every definition would have cost.",
            *per_toolset,
        )
        self.native_fallbacks = m.counter(
            "native_deferral_fallbacks",
            "Conversations of a model configured for native deferral sent in append mode instead, by reason.",
            "model",
            "reason",
        )
        self.search_calls = m.counter("search_calls", "search_tools calls made by models.", "model")
        self.discovered_tool_calls = m.counter(
            "discovered_tool_calls",
            "Calls of tools that were loaded through search_tools (search-to-call conversion).",
            "model",
        )
        self.result_tokens = ResultTokens(
            m,
            "Tool-result tokens by server and kind: returned (by the server), delivered (to the model, "
            "shaped), saved (returned - delivered) and read (read_result answers).",
        )
        self.result_reads = m.counter(
            "result_reads",
            "read_result calls of models, by server and outcome (ok, refused).",
            "server",
            "outcome",
        )
        DeprecatedNames(m.registry, {old: getattr(self, attr) for old, attr in DEPRECATED_NAMES.items()})

    def expect_native_models(self, models: Iterable[str], reasons: Iterable[str]) -> None:
        """Exports zero fallbacks for models configured for native deferral, so dashboards and
        alerts see the series before the first fallback happens."""
        reasons = tuple(reasons)
        for model in models:
            for reason in reasons:
                self.native_fallbacks.labels(model, reason)

    def record_llm_call(self, provider: str, model: str, seconds: float, usage: Usage) -> None:
        self.llm_call_duration.labels(provider, model).observe(seconds, exemplar())
        tokens = self.llm_tokens
        tokens.labels(provider, model, "input").inc(usage.input_tokens)
        tokens.labels(provider, model, "output").inc(usage.output_tokens)
        tokens.labels(provider, model, "cached_input").inc(usage.cached_input_tokens)
        tokens.labels(provider, model, "cache_write").inc(usage.cache_write_tokens)

    def record_result(self, server: str, returned: int, delivered: int) -> None:
        """Tokens of one tool result shaped to the chat's budget."""
        self.result_tokens.shaped(server, returned, delivered)

    def record_read(self, server: str, tokens: int, ok: bool) -> None:
        """One read_result call: its answer's tokens when the pool answered (``ok``)."""
        self.result_reads.labels(server, "ok" if ok else "refused").inc()
        if ok:
            self.result_tokens.counter.labels(server, "read").inc(tokens)

    def record_llm_error(self, provider: str, model: str, reason: str) -> None:
        self.llm_errors.labels(provider, model, reason).inc()

    def record_chat(
        self, model: str, toolset: str, outcome: str, iterations: int, sent: int, all_: int
    ) -> None:
        self.chats.labels(model, outcome).inc()
        self.chat_iterations.observe(iterations)
        ts = _toolset(toolset)
        self.definition_tokens_sent.labels(model, ts).inc(sent)
        self.definition_tokens_all.labels(model, ts).inc(all_)
        self.tokens_saved.labels(model, ts).inc(max(0, all_ - sent))
