"""Which deferral mode a model gets, and whether a native-mode request stays within the limits.

*native* declares every tool of the toolset on every request (deferred ones with
``defer_loading: true``) and answers searches with the provider's own mechanism, so ``tools`` is
byte-identical for a whole conversation: prompt caches hit, and strict models (which reject edits
to ``tools``) work. *append* adds discovered tools to ``tools`` (every provider; casual-mcp's way).
*stable* (every provider, only when configured) sends eager tools + ``search_tools`` +
``call_tool`` all conversation: searches answer with the found tools' definitions as text and the
model calls them through ``call_tool`` (discovery's cache-stable surface, :mod:`discovery_svc.surface`,
the same definitions the MCP gateway's meta mode serves).

The table below is the one place that says which models support native deferral and which are
strict. Each row matches a model id with a regular expression whose ``major``/``minor`` groups
give the model's version, and applies from version ``since`` on:

============  ===========  =====================  =======  ===============================================
capability    provider     API                    since    source
============  ===========  =====================  =======  ===============================================
native        anthropic    messages               4.5      Anthropic tool search (``defer_loading`` +
                                                           ``tool_reference``) is GA on Claude 4.5+
native        openai       responses              5.4      OpenAI: "only gpt-5.4 and later models support
                                                           tool_search" (Responses API only)
strict        anthropic    messages               5.1      Claude Fable 5.1 rejects edits to ``tools``
                                                           mid-conversation; Anthropic: later models
                                                           enforce it for everyone
============  ===========  =====================  =======  ===============================================

Chat Completions and OpenAI-compatible servers (Ollama, vLLM, ...) have no row: ``auto`` is append there
(``deferral: stable`` keeps their prompt caches).
Config extends the table without code changes: ``toolscout.orchestrator.native_deferral_models``
and ``strict_tools_models`` (regular expressions searched in the model id), or per model
``deferral: native`` / ``strict_tools: true``.

Limits (Anthropic's tool search documentation): at least one tool not deferred, at most 10,000
deferred tools, every ``tool_reference`` naming a tool present in ``tools``, at most 32 MB per
request. :func:`native_limit_problem` reports the first one a request breaks; the loop then falls
back to append mode for that conversation (strict models cannot: their ``tools`` may not change).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal, get_args

from toolscout.client import Deferral

from orchestrator_svc.history import history_loaded_tools
from orchestrator_svc.messages import LLMRequest, tool_schema
from toolscout_kit.config import ClientConfig, ModelConfig, OrchestratorSettings
from toolscout_kit.errors import ResourceExhaustedError

__all__ = [
    "DEFERRAL_TABLE",
    "FALLBACK_REASONS",
    "MAX_DEFERRED_TOOLS",
    "MAX_REQUEST_BYTES",
    "Capability",
    "ModelRule",
    "NativeDeferralLimitError",
    "NativeLimitProblem",
    "ProviderApi",
    "api_of",
    "is_strict",
    "native_limit_problem",
    "native_supported",
    "resolve_deferral",
    "resolve_for_model",
]

ProviderApi = Literal["messages", "chat_completions", "responses"]


class Capability(StrEnum):
    """What a rule of :data:`DEFERRAL_TABLE` says a model can do: native deferral, or no more than
    one tool list per conversation (strict)."""

    NATIVE = "native"
    STRICT = "strict"


MAX_DEFERRED_TOOLS = 10_000
MAX_REQUEST_BYTES = 32 * 1024 * 1024

# claude-sonnet-4-5-20250929, claude-opus-4-1, claude-3-5-sonnet-20241022, claude-fable-5-1,
# anthropic.claude-sonnet-4-5-20250929-v1:0 (Bedrock), claude-sonnet-4-5@20250929 (Vertex).
# The minor version is one or two digits not followed by another digit (never a date).
_CLAUDE = r"claude-(?:[a-z]+-)?(?P<major>\d+)(?:[-.](?P<minor>\d{1,2})(?!\d))?"
# gpt-5.4, gpt-5.4-mini, gpt-5.4-2026-03-05, gpt-6 (gpt-4o is 4.0).
_GPT = r"(?<![a-z0-9])gpt-(?P<major>\d+)(?:\.(?P<minor>\d+))?"


@dataclass(frozen=True, slots=True)
class ModelRule:
    """Models of ``provider``/``api`` whose id matches ``pattern`` (searched, case-insensitive)
    at version ``since`` or later have ``capability``."""

    capability: Capability
    provider: str
    api: ProviderApi
    pattern: str
    since: tuple[int, int]

    def matches(self, provider: str, api: ProviderApi, model_id: str) -> bool:
        if (provider, api) != (self.provider, self.api):
            return False
        found = re.search(self.pattern, model_id, re.IGNORECASE)
        if found is None:
            return False
        groups = found.groupdict()
        version = (int(groups.get("major") or 0), int(groups.get("minor") or 0))
        return version >= self.since


DEFERRAL_TABLE: tuple[ModelRule, ...] = (
    ModelRule(Capability.NATIVE, "anthropic", "messages", _CLAUDE, (4, 5)),
    ModelRule(Capability.NATIVE, "openai", "responses", _GPT, (5, 4)),
    ModelRule(Capability.STRICT, "anthropic", "messages", _CLAUDE, (5, 1)),
)

# The APIs with a native mechanism: Anthropic Messages (tool_reference) and OpenAI Responses
# (tool_search with client execution).
_NATIVE_APIS: frozenset[tuple[str, ProviderApi]] = frozenset(
    {("anthropic", "messages"), ("openai", "responses")}
)


class NativeDeferralLimitError(ResourceExhaustedError):
    """A native-mode request breaks one of the provider's documented limits (the loop should
    have fallen back to append mode; see :func:`native_limit_problem`)."""


def api_of(client: ClientConfig) -> ProviderApi:
    """The wire API a configured client speaks."""
    if client.provider == "anthropic":
        return "messages"
    if client.provider == "openai":
        return client.api
    return "chat_completions"


def native_supported(provider: str, api: ProviderApi) -> bool:
    """Whether the provider's API has a native deferral mechanism at all."""
    return (provider, api) in _NATIVE_APIS


def _any_pattern(patterns: Iterable[str], model_id: str) -> bool:
    return any(re.search(p, model_id, re.IGNORECASE) for p in patterns)


def resolve_deferral(
    provider: str,
    api: ProviderApi,
    model_id: str,
    configured: Deferral,
    *,
    native_models: Sequence[str] = (),
    table: Sequence[ModelRule] = DEFERRAL_TABLE,
) -> Deferral:
    """``native``, ``append`` or ``stable`` for one model.

    ``auto`` is native when the API has a native mechanism and the model is in ``table`` (or
    matches one of ``native_models``), else append; ``native``, ``append`` and ``stable`` are taken
    as configured (``stable`` works on every API).

    Raises:
        ValueError: ``native`` on an API without a native mechanism (config validation rejects it
            first; this guards other callers).
    """
    configured = Deferral(configured)
    if configured in (Deferral.APPEND, Deferral.STABLE):
        return configured
    if not native_supported(provider, api):
        if configured == Deferral.NATIVE:
            raise ValueError(f"{provider} {api} has no native deferral; use append or auto")
        return Deferral.APPEND
    if configured == Deferral.NATIVE:
        return configured
    in_table = any(r.capability == Capability.NATIVE and r.matches(provider, api, model_id) for r in table)
    return Deferral.NATIVE if in_table or _any_pattern(native_models, model_id) else Deferral.APPEND


def is_strict(
    provider: str,
    api: ProviderApi,
    model_id: str,
    configured: bool | None = None,
    *,
    strict_models: Sequence[str] = (),
    table: Sequence[ModelRule] = DEFERRAL_TABLE,
) -> bool:
    """Whether the model rejects any change to ``tools`` within a conversation."""
    if configured is not None:
        return configured
    in_table = any(r.capability == Capability.STRICT and r.matches(provider, api, model_id) for r in table)
    return in_table or _any_pattern(strict_models, model_id)


def resolve_for_model(
    model: ModelConfig, client: ClientConfig, settings: OrchestratorSettings
) -> tuple[Deferral, bool]:
    """(deferral mode, strict) of a configured model."""
    api = api_of(client)
    mode = resolve_deferral(
        client.provider,
        api,
        model.model,
        model.deferral,
        native_models=settings.native_deferral_models,
    )
    strict = is_strict(
        client.provider, api, model.model, model.strict_tools, strict_models=settings.strict_tools_models
    )
    return mode, strict


# --- limits ----------------------------------------------------------------------------------


FallbackReason = Literal["no_eager_tool", "too_many_deferred", "unknown_reference", "too_large"]
FALLBACK_REASONS: tuple[FallbackReason, ...] = get_args(FallbackReason)


@dataclass(frozen=True, slots=True)
class NativeLimitProblem:
    """Why a request cannot be sent in native mode (``reason`` is a metric label)."""

    reason: FallbackReason
    detail: str


def native_limit_problem(
    request: LLMRequest, api: ProviderApi, *, body: dict[str, object] | None = None
) -> NativeLimitProblem | None:
    """The first documented limit ``request`` would break in native mode, or None.

    The size is estimated cheaply (tool definitions from a sample, texts and attachments by
    length); only an estimate past half the limit pays for serialising ``body`` (the wire body,
    when the caller has built it) to measure it exactly. Only Anthropic documents the tool-count
    and size limits; for every API a referenced tool must be declared.
    """
    names = {t.llm_name for t in request.tools}
    unknown = [n for n in dict.fromkeys(history_loaded_tools(request.messages)) if n not in names]
    if unknown:
        shown = ", ".join(unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
        return NativeLimitProblem("unknown_reference", f"referenced tools not in tools: {shown}")
    if api != "messages":
        return None
    deferred = sum(1 for t in request.tools if t.llm_name in request.deferred)
    if request.tools and deferred == len(request.tools):
        return NativeLimitProblem("no_eager_tool", "every tool is deferred; at least one must not be")
    if deferred > MAX_DEFERRED_TOOLS:
        return NativeLimitProblem(
            "too_many_deferred", f"{deferred} deferred tools; at most {MAX_DEFERRED_TOOLS}"
        )
    size = _estimated_size(request)
    if size > MAX_REQUEST_BYTES // 2 and body is not None:
        size = _json_size(body)
    if size > MAX_REQUEST_BYTES:
        return NativeLimitProblem("too_large", f"request of about {size} bytes; at most {MAX_REQUEST_BYTES}")
    return None


def _json_size(value: object) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


_SIZE_SAMPLE = 64


def _estimated_size(request: LLMRequest) -> int:
    """The request's JSON size without building the wire body: tool definitions extrapolated from
    an evenly spread sample, texts and attachments by length (base64 grows binary data by 4/3)."""
    tools = request.tools
    step = max(1, len(tools) // _SIZE_SAMPLE)
    sample = tools[::step]
    per_tool = sum(_json_size([t.llm_name, t.description, tool_schema(t)]) + 60 for t in sample)
    size = len(request.system.encode()) + (per_tool * len(tools) // len(sample) if sample else 0)
    for m in request.messages:
        size += len(m.content.encode()) + len(m.reasoning.encode()) + 40
        size += sum(len(c.arguments_json.encode()) + len(c.name) + len(c.id) + 40 for c in m.tool_calls)
        size += sum(len(a.data) * 4 // 3 + len(a.text.encode()) + 40 for a in m.attachments)
        size += sum(_json_size(i.data) for i in m.native_items)
        size += sum(len(n) + 40 for n in m.loaded_tools or ())
    return size
