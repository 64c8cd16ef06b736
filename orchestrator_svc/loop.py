"""The tool loop: PlanTools → LLM → tool calls (concurrently) → results in call order → repeat.

Discovered tools join the tool list from the next LLM call on, appended in a stable order so
provider prompt caches keep hitting; with ``deferral: stable`` the tool list never changes
(eager tools, search_tools and call_tool from discovery's stable surface) and found tools are
called through call_tool. The whole chat is bounded by the caller's deadline, and
cancelling the task running :meth:`ChatLoop.run` cancels the in-flight LLM request and tool calls.

Tool results are shaped to ``toolscout.results.budget_tokens`` by the pool; one over it reaches
the model as a preview whose handle is bound to the chat's principal (the caller's
``x-toolscout-principal``, ``""`` when none is named) and conversation
(:func:`conversation_id`). While the history shows a handle that has not expired, discovery's
``read_result`` joins the end of the tool list in every deferral mode (a strict model, whose
tools may not change, gets it on every request).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import time
from collections.abc import Sequence
from typing import Literal, cast

from opentelemetry.trace import Span
from toolscout.client import (
    SEARCH_TOOL_NAME,
    Deferral,
    PlanRequest,
    SearchRequest,
    Tool,
    ToolPlan,
    ToolSurface,
)

from orchestrator_svc.chat import (
    AssistantMessageEvent,
    ChatEvent,
    ChatOutcome,
    ChatRequest,
    EventSink,
    ReasoningDeltaEvent,
    StopReason,
    TextDeltaEvent,
    ToolCallFinishedEvent,
    ToolCallStartedEvent,
    ToolsDiscoveredEvent,
    UsageEvent,
)
from orchestrator_svc.deferred import DeferredTools, DeferredToolsCache
from orchestrator_svc.errors import ChatDeadlineError, InvalidChatError
from orchestrator_svc.history import (
    discovery_candidates,
    history_loaded_tools,
    recorded_searches,
    result_handles,
)
from orchestrator_svc.messages import LLMRequest, Message, ToolCall
from orchestrator_svc.metrics import INLINE_TOOLSET_LABEL, OrchestratorMetrics
from orchestrator_svc.native import NativeDeferral
from orchestrator_svc.prompts import SystemPrompts
from orchestrator_svc.providers.registry import ModelRegistry, ResolvedModel
from orchestrator_svc.seams import DiscoverySeam, PoolSeam
from orchestrator_svc.spans import (
    chat_attributes,
    chat_result_attributes,
    llm_attributes,
    llm_result_attributes,
    output_messages,
)
from orchestrator_svc.stats import ChatTally
from orchestrator_svc.tool_calls import ChatContext, ToolCallRunner, ToolServices
from toolscout_kit.config import RESULT_FORMATS, OrchestratorSettings, ResultFormat, ResultsSettings
from toolscout_kit.errors import (
    InvalidArgumentError,
    NotFoundError,
)
from toolscout_kit.json_text import JsonTextError, parse_json_object
from toolscout_kit.logging import get_logger
from toolscout_kit.tokens import encoding_for
from toolscout_kit.tracing import NO_TRACING, SpanKind, Tracing

__all__ = [
    "AssistantMessageEvent",
    "ChatEvent",
    "ChatLoop",
    "ChatOutcome",
    "ChatRequest",
    "EventSink",
    "ReasoningDeltaEvent",
    "TextDeltaEvent",
    "ToolCallFinishedEvent",
    "ToolCallStartedEvent",
    "ToolsDiscoveredEvent",
    "UsageEvent",
    "conversation_id",
]

_log = get_logger(__name__)
_ROLES = frozenset({"system", "user", "assistant", "tool"})
# Kept with every result handle of the conversation: an id, not a document.
_MAX_CONVERSATION_ID = 256


def conversation_id(request: ChatRequest) -> str:
    """The conversation result handles are bound to: the caller's ``conversation_id``, else a hash
    of what stays the same on every turn of a conversation (the toolset and the first user
    message). The orchestrator keeps no state, so it is rebuilt from each request."""
    if request.conversation_id:
        return request.conversation_id
    first = next((m.content for m in request.messages if m.role == "user"), "")
    seed = "\x00".join(("conversation", request.toolset.name, request.toolset.filter_json, first))
    return "h-" + hashlib.sha256(seed.encode()).hexdigest()[:32]


def _validate(request: ChatRequest) -> ResultFormat:
    if not request.messages:
        raise InvalidChatError("messages must not be empty")
    for i, m in enumerate(request.messages):
        if m.role not in _ROLES:
            raise InvalidChatError(
                f"messages[{i}].role: {m.role!r} is not one of system, user, assistant, tool"
            )
        if m.role == "tool" and not m.tool_call_id:
            raise InvalidChatError(f"messages[{i}]: a tool message needs tool_call_id")
    if request.max_iterations < 0:
        raise InvalidChatError("max_iterations must not be negative")
    if len(request.conversation_id) > _MAX_CONVERSATION_ID:
        raise InvalidChatError(f"conversation_id must be at most {_MAX_CONVERSATION_ID} characters")
    try:
        parse_json_object(request.meta_json, "meta_json")
    except JsonTextError as err:
        raise InvalidChatError(err.message) from None
    fmt = request.tool_result_format
    if fmt and fmt not in RESULT_FORMATS:
        raise InvalidChatError(f"tool_result_format {fmt!r} is not one of {', '.join(RESULT_FORMATS)}")
    return cast(ResultFormat, fmt)


class _Chat:
    """The state of one running chat."""

    def __init__(
        self,
        loop: ChatLoop,
        request: ChatRequest,
        resolved: ResolvedModel,
        fmt: ResultFormat,
        deadline: float | None,
        events: EventSink | None,
    ) -> None:
        self.loop = loop
        self.request = request
        self.resolved = resolved
        self.fmt = fmt
        self.deadline = deadline
        self.events = events
        self.stats = ChatTally()
        self.new_messages: list[Message] = []
        # An explicit system prompt replaces system messages of the history.
        history = request.messages
        if request.system:
            history = [m for m in history if m.role != "system"]
        self.history_has_system = any(m.role == "system" for m in history)
        self.conversation = list(history)
        self.discovered: list[str] = []
        self.plan = ToolPlan()
        self.tools_disabled = False
        self.native = NativeDeferral(resolved, self.stats, loop.metrics)
        # Discovery's cache-stable surface: tools = eager + search_tools + call_tool all chat.
        self.stable = resolved.deferral == Deferral.STABLE
        # The provider's cache routing key for this conversation (OpenAI prompt_cache_key): derived
        # from what stays the same across its turns, never from user ids.
        first = next((m.content for m in request.messages if m.role == "user"), "")
        seed = "\x00".join((resolved.name, request.toolset.name, request.toolset.filter_json, first))
        # A client may turn it off (``prompt_cache_key: false``) for a server that rejects it.
        self.cache_key = (
            hashlib.sha256(seed.encode()).hexdigest()[:32] if resolved.client.prompt_cache_key else ""
        )
        budget = loop.results.budget_tokens
        context = ChatContext(
            model=resolved.name,
            toolset=request.toolset,
            meta_json=request.meta_json,
            result_format=fmt,
            max_result_chars=loop.settings.max_tool_result_chars,
            stats=self.stats,
            provider=resolved.client.provider,
            deadline=deadline,
            events=events,
            stable=self.stable,
            result_budget=budget,
            token_encoding=encoding_for(resolved.client.provider).name,
            principal=request.principal,
            conversation=conversation_id(request),
        )
        self.tools = ToolCallRunner(context, loop.tool_services)

    def remaining(self) -> float | None:
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    async def emit(self, event: ChatEvent) -> None:
        if self.events is not None:
            await self.events(event)

    async def replan(self, discovered: list[str] | None = None) -> None:
        """Plans the tool list for ``discovered`` (default: the chat's) and keeps what discovery kept."""
        wanted = self.discovered if discovered is None else discovered
        request = PlanRequest(
            self.request.toolset,
            tuple(wanted),
            self.resolved.client.provider,
            surface=ToolSurface.STABLE if self.stable else "",
            principal=self.request.principal,
        )
        self.plan = await self.loop.discovery.plan_tools(request, deadline=self.remaining())
        self.discovered = list(self.plan.discovered_tools)

    async def start(self) -> None:
        """One PlanTools for the tools this conversation already discovered.

        Searches of the history recorded what they loaded; only another client's history, without
        those records, costs a replay per search.
        """
        recorded, unrecorded = recorded_searches(self.request.messages)
        found_by_search = {**recorded, **await self._replay(unrecorded)}
        candidates = discovery_candidates(
            self.request.messages, self.request.discovered_tools, found_by_search
        )
        # Tools the provider's own search loaded (native `search: provider`) count too.
        candidates += [n for n in history_loaded_tools(self.request.messages) if n not in candidates]
        await self.replan(candidates)
        await self.native.prepare(self.plan, len(self.discovered), self.deferred)

    async def _replay(self, calls: list[ToolCall]) -> dict[str, list[str]]:
        """What each of these earlier searches loaded (same catalog, same answer)."""

        async def replay(call: ToolCall) -> list[str]:
            request = SearchRequest(
                toolset=self.request.toolset,
                arguments_json=call.arguments_json or "{}",
                principal=self.request.principal,
            )
            try:
                outcome = await self.loop.discovery.search_tools(request, deadline=self.remaining())
            except (InvalidArgumentError, NotFoundError):
                return []  # the catalog changed since; that search no longer loads anything
            return [t.llm_name for t in outcome.newly_loaded]

        found = await asyncio.gather(*(replay(c) for c in calls))
        return {c.id: names for c, names in zip(calls, found, strict=True)}

    async def deferred(self, *, definitions: bool = False) -> DeferredTools:
        """The toolset's deferred tools at the plan's catalog version (fetched once per version)."""
        return await self.loop.deferred_tools.get(
            self.request.toolset,
            catalog_version=self.plan.catalog_version,
            principal=self.request.principal,
            provider=self.resolved.client.provider,
            deadline=self.remaining(),
            definitions=definitions,
        )

    def read_tool(self) -> list[Tool]:
        """``[read_result]`` while the conversation holds a live result handle (a strict model:
        whenever results are shaped, since its tools may not change), else ``[]``."""
        tool = self.plan.read_result_tool
        if tool is None or self.loop.results.budget_tokens <= 0:
            return []
        if self.resolved.strict_tools:
            return [tool]
        now = time.time()
        live = any(expires > now for expires in result_handles(self.conversation).values())
        return [tool] if live else []

    def loaded_tools(self) -> list[Tool]:
        """What the model can call: eager tools, then search_tools, then discovered tools in
        discovery order (each call's list extends the previous one, so prompt caches survive).
        On the stable surface: eager tools, search_tools and call_tool (the plan sends no others)."""
        discovered = set(self.discovered)
        eager = [t for t in self.plan.loaded_tools if t.llm_name not in discovered]
        found = [t for t in self.plan.loaded_tools if t.llm_name in discovered]
        search = [self.plan.search_tool] if self.plan.search_tool is not None else []
        call = [self.plan.call_tool] if self.plan.call_tool is not None else []
        return eager + search + call + found + self.read_tool()

    def tools_to_send(self) -> list[Tool]:
        """Append mode: the loaded tools. Native mode: the eager tools and search_tools, then every
        deferred tool (catalog order, discovered ones too), declared deferred: the same list all chat."""
        if not self.native.active:
            return self.loaded_tools()
        discovered = set(self.discovered)
        eager = [t for t in self.plan.loaded_tools if t.llm_name not in discovered]
        search = [self.plan.search_tool] if self.plan.search_tool is not None else []
        return eager + search + list(self.native.tools) + self.read_tool()

    def system_prompt(self, tools: list[Tool]) -> str:
        if self.history_has_system and not self.request.system:
            system = ""
        else:
            system = self.loop.prompts.resolve(
                explicit=self.request.system, template=self.resolved.config.template, tools=tools
            )
        offers_search = any(t.llm_name == SEARCH_TOOL_NAME for t in tools)
        manifest = self.plan.manifest_system_message if offers_search else ""
        return "\n\n".join(p for p in (system, manifest) if p)

    def llm_request(self) -> LLMRequest:
        sent = [] if self.tools_disabled else self.tools_to_send()
        model_cfg = self.resolved.config
        # The template sees what is in the model's context: deferred definitions are not.
        in_context = [] if self.tools_disabled else self.loaded_tools()
        return LLMRequest(
            model=model_cfg.model,
            system=self.system_prompt(in_context),
            messages=self.conversation,
            tools=sent,
            max_tokens=model_cfg.max_tokens,
            temperature=model_cfg.temperature,
            timeout=self.remaining(),
            vision=model_cfg.vision,
            deferral=Deferral.NATIVE
            if self.native.active
            else (Deferral.STABLE if self.stable else Deferral.APPEND),
            deferred=self.native.names,
            search=model_cfg.search,
            prompt_cache=model_cfg.prompt_cache,
            cache_key=self.cache_key,
        )

    async def call_llm(self) -> Message:
        request = self.llm_request()
        if self.native.falls_back(request):
            request = self.llm_request()
        tokens = self.plan.tokens
        sent = tokens.sent_tokens if request.tools else 0
        if any(t is self.plan.read_result_tool for t in request.tools):
            sent += self.plan.read_result_tokens
        self.stats.count_definitions(sent, tokens.all_definitions_tokens, tokens.encoding, tokens.estimate)
        provider = self.resolved.provider
        metrics = self.loop.metrics

        async def on_delta(kind: Literal["text", "reasoning"], text: str) -> None:
            await self.emit(TextDeltaEvent(text) if kind == "text" else ReasoningDeltaEvent(text))

        def on_error(reason: str) -> None:
            metrics.record_llm_error(provider.provider, self.resolved.name, reason)

        tracing = self.loop.tracing
        with tracing.span(
            f"chat {request.model}",
            kind=SpanKind.CLIENT,
            attributes=llm_attributes(request, provider.provider),
        ) as span:
            started = time.monotonic()
            result = await provider.complete(
                request, stream=on_delta if self.events else None, on_error=on_error
            )
            metrics.record_llm_call(
                provider.provider, self.resolved.name, time.monotonic() - started, result.usage
            )
            if span.is_recording():
                span.set_attributes(llm_result_attributes(result))
                tracing.content(span, "gen_ai.output.messages", output_messages(result))
        self.stats.llm_calls += 1
        self.stats.usage.add(result.usage)
        self.tools_disabled = self.tools_disabled or result.tools_disabled
        calls = self._unique_ids(result.tool_calls)
        message = Message(
            "assistant", result.text, calls, reasoning=result.reasoning, native_items=result.native_items
        )
        self.append(message)
        await self.emit(AssistantMessageEvent(message))
        await self.emit(UsageEvent(dataclasses.replace(self.stats.usage)))
        if result.loaded_tools:
            # The provider's own search loaded these during the call: callable from now on.
            await self.add_discovered(result.loaded_tools, None)
        return message

    def _unique_ids(self, calls: list[ToolCall]) -> list[ToolCall]:
        # Some local servers send empty or repeated ids; results must map back to exactly one call.
        seen = {c.id for m in self.conversation for c in m.tool_calls}
        out = []
        for i, c in enumerate(calls):
            cid = c.id
            if not cid or cid in seen:
                cid = f"call_{self.stats.llm_calls}_{i}"
            seen.add(cid)
            out.append(ToolCall(cid, c.name, c.arguments_json))
        return out

    def append(self, message: Message) -> None:
        self.conversation.append(message)
        self.new_messages.append(message)

    async def run_tools(self, calls: list[ToolCall]) -> None:
        done = await self.tools.run(
            calls,
            self.plan,
            self.discovered,
            native=self.native.active,
            handles=result_handles(self.conversation),
        )
        for message in done.messages:
            self.append(message)
        await self.add_discovered(done.found, done.plan)

    async def add_discovered(self, found: Sequence[str], plan: ToolPlan | None) -> None:
        """Loads newly found tools; ``plan`` is a search's answer for exactly these, if any."""
        new = [n for n in dict.fromkeys(found) if n not in self.discovered]
        if not new:
            return
        wanted = [*self.discovered, *new]
        if plan is not None and list(plan.discovered_tools) == wanted:
            # The search already answered with the plan for the next call: no extra round trip.
            self.plan = plan
            self.discovered = list(plan.discovered_tools)
        else:
            # Several searches of one message loaded tools: plan their union once.
            await self.replan(wanted)
        self.stats.count_discovered(len(new))
        await self.emit(ToolsDiscoveredEvent(new))

    def result(self, stop: StopReason, error: str = "") -> ChatOutcome:
        return ChatOutcome(
            messages=self.new_messages,
            loaded_tools=list(self.discovered),
            stats=self.stats,
            stop_reason=stop,
            model=self.resolved.name,
            error=error,
            tools_disabled_fallback=self.tools_disabled,
        )


class ChatLoop:
    """Runs chats; one instance serves every request (it holds no per-chat state)."""

    def __init__(
        self,
        *,
        models: ModelRegistry,
        discovery: DiscoverySeam,
        pool: PoolSeam,
        prompts: SystemPrompts,
        settings: OrchestratorSettings,
        metrics: OrchestratorMetrics,
        tracing: Tracing = NO_TRACING,
        results: ResultsSettings | None = None,
        per_user: bool = False,
    ) -> None:
        """``per_user``: the config has ``per_user`` servers (each principal's deferred tools are
        then fetched for them)."""
        self.models = models
        # Result shaping (toolscout.results): budget_tokens 0 turns it off.
        self.results = results if results is not None else ResultsSettings()
        self.discovery = discovery
        self.pool = pool
        self.prompts = prompts
        self.settings = settings
        self.metrics = metrics
        self.tracing = tracing
        self.deferred_tools = DeferredToolsCache(discovery, per_user=per_user)
        self.tool_services = ToolServices(discovery, pool, self.deferred_tools, metrics, tracing)

    async def run(
        self, request: ChatRequest, *, time_limit: float | None = None, events: EventSink | None = None
    ) -> ChatOutcome:
        """Runs the loop to an answer or the iteration limit, in a ``chat`` span.

        Raises:
            InvalidChatError, UnknownModelError, ChatDeadlineError, provider errors
            (see :mod:`orchestrator_svc.errors`), and discovery errors (NotFoundError for an
            unknown toolset). ``asyncio.CancelledError`` when the caller cancels.
        """
        with self.tracing.span("chat", attributes=chat_attributes(request)) as span:
            last = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
            self.tracing.content(span, "gen_ai.input.messages", [{"role": "user", "content": last}])
            return await self._run(request, time_limit, events, span)

    async def _run(
        self, request: ChatRequest, time_limit: float | None, events: EventSink | None, span: Span
    ) -> ChatOutcome:
        fmt = _validate(request) or self.settings.result_format
        resolved = self.models.resolve(request.model)
        started = time.monotonic()
        deadline = None if time_limit is None else started + time_limit
        chat = _Chat(self, request, resolved, fmt, deadline, events)
        outcome = "error"
        try:
            async with asyncio.timeout(time_limit):
                result = await self._loop(chat, request.max_iterations or self.settings.max_iterations)
            outcome = result.stop_reason
            return result
        except TimeoutError:
            outcome = "deadline"
            raise ChatDeadlineError(
                f"chat exceeded its deadline after {chat.stats.llm_calls} LLM calls and "
                f"{sum(c.calls for c in chat.stats.tool_calls.values())} tool calls"
            ) from None
        except ChatDeadlineError:
            outcome = "deadline"
            raise
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        finally:
            chat.stats.duration_seconds = time.monotonic() - started
            disc = chat.stats.discovery
            span.set_attributes(chat_result_attributes(chat.stats, outcome))
            self.metrics.record_chat(
                resolved.name,
                INLINE_TOOLSET_LABEL if request.toolset.is_inline else request.toolset.name,
                outcome,
                chat.stats.iterations,
                disc.definition_tokens_sent,
                disc.definition_tokens_all,
            )
            _log.info(
                "chat_finished",
                model=resolved.name,
                outcome=outcome,
                llm_calls=chat.stats.llm_calls,
                iterations=chat.stats.iterations,
                seconds=round(chat.stats.duration_seconds, 4),
            )

    async def _loop(self, chat: _Chat, max_iterations: int) -> ChatOutcome:
        await chat.start()
        while True:
            message = await chat.call_llm()
            if not message.tool_calls:
                return chat.result("completed")
            chat.stats.iterations += 1
            await chat.run_tools(message.tool_calls)
            if chat.stats.iterations >= max_iterations:
                error = (
                    f"iteration limit reached: the model still asked for tools after {max_iterations} "
                    "iterations; the messages so far are returned"
                )
                return chat.result("iteration_limit", error)
