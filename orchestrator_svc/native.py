"""One chat's deferral mode and, in native mode, the deferred definitions it declares.

Native deferral declares every deferred definition of the toolset on every request (withheld from
the model's context until a search loads it), so that ``tools`` never changes during the
conversation. A documented provider limit (:func:`~orchestrator_svc.providers.deferral.native_limit_problem`)
sends the chat back to append mode, except for a strict model, whose tools may not change: its
chat stops with the reason. The loop asks this object what to declare; the rules of which model
gets which mode are in :mod:`orchestrator_svc.providers.deferral`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from toolscout.client import Deferral, Tool, ToolPlan

from orchestrator_svc.deferred import DeferredTools
from orchestrator_svc.messages import LLMRequest
from orchestrator_svc.metrics import OrchestratorMetrics
from orchestrator_svc.providers.deferral import (
    MAX_DEFERRED_TOOLS,
    NativeDeferralLimitError,
    NativeLimitProblem,
    native_limit_problem,
)
from orchestrator_svc.providers.registry import ResolvedModel
from orchestrator_svc.stats import ChatTally
from toolscout_kit.logging import get_logger
from toolscout_kit.tracing import add_event

__all__ = ["NativeDeferral"]

_log = get_logger(__name__)

# Fetches the toolset's deferred tools (with their definitions, once per catalog version).
FetchDeferred = Callable[..., Awaitable[DeferredTools]]


class NativeDeferral:
    """The deferral state of one chat: its mode, and the deferred definitions native mode declares."""

    def __init__(self, resolved: ResolvedModel, stats: ChatTally, metrics: OrchestratorMetrics) -> None:
        self._resolved = resolved
        self._stats = stats
        self._metrics = metrics
        self.mode: Deferral = resolved.deferral
        self.tools: tuple[Tool, ...] = ()
        self.names: frozenset[str] = frozenset()
        stats.set_deferral(self.mode)

    @property
    def active(self) -> bool:
        """Whether requests declare the deferred tools now (native mode with something deferred)."""
        return bool(self.tools)

    async def prepare(self, plan: ToolPlan, discovered: int, fetch: FetchDeferred) -> None:
        """Fetches the deferred definitions native mode declares (once per catalog version), or falls
        back when there are more than a provider takes.

        Raises:
            NativeDeferralLimitError: too many deferred tools for a strict model.
        """
        if self.mode != Deferral.NATIVE or plan.search_tool is None:
            return  # nothing deferred: the plan is the whole toolset either way
        if plan.deferred_count + discovered > MAX_DEFERRED_TOOLS:
            detail = f"{plan.deferred_count + discovered} deferred tools; at most {MAX_DEFERRED_TOOLS}"
            self.fall_back(NativeLimitProblem("too_many_deferred", detail))
            return
        deferred = await fetch(definitions=True)
        self.tools = deferred.definitions or ()
        self.names = frozenset(t.llm_name for t in self.tools)

    def falls_back(self, request: LLMRequest) -> bool:
        """Whether ``request`` breaks a documented limit of native mode, which then falls back
        (build the request again: it is in append mode now).

        Raises:
            NativeDeferralLimitError: the model is strict.
        """
        if request.deferral != Deferral.NATIVE:
            return False
        problem = native_limit_problem(request, self._resolved.api)
        if problem is None:
            return False
        self.fall_back(problem)
        return True

    def fall_back(self, problem: NativeLimitProblem) -> None:
        """Append mode for the rest of this chat; a strict model cannot take it (its tools may
        not change), so its chat stops with the reason.

        Raises:
            NativeDeferralLimitError: the model is strict.
        """
        model = self._resolved.name
        if self._resolved.strict_tools:
            raise NativeDeferralLimitError(
                f"model {model!r} needs native tool deferral (it rejects changes to its tools), but "
                f"this conversation exceeds a provider limit: {problem.detail}"
            )
        _log.warning("native_deferral_fallback", model=model, reason=problem.reason, detail=problem.detail)
        add_event("fallback", {"to": str(Deferral.APPEND), "reason": problem.reason})
        self._metrics.native_fallbacks.labels(model, problem.reason).inc()
        self.mode = Deferral.APPEND
        self.tools, self.names = (), frozenset()
        self._stats.set_deferral(Deferral.APPEND, problem.reason)
