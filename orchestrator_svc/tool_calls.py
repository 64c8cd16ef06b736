"""Running the tool calls of one assistant message: search_tools via discovery, the rest via the pool.

Every call of a message runs concurrently; the results come back in call order. Tool failures,
malformed arguments, deferred tools called before they were loaded and unknown tools all become
error *results* the model can act on; only chat-ending errors (the chat's deadline, cancellation,
bugs) escape.

With ``deferral: stable`` the model calls found tools through ``call_tool`` (``{"name",
"arguments"}``), whose contract :mod:`toolscout_kit.call_tool` owns (this module adapts it): the
named tool must be an eager one or one a search of the conversation found (else the deferred-call
guard's error), and its arguments are checked once against its input schema (the definition comes
with the plan: ``ToolPlan.found_tools``) before the pool runs it; a misfit is answered with the
expected shape, so the model can correct itself. Every refusal's sentence is the kit's.

Pool calls ask for the chat's result budget (``toolscout.results.budget_tokens``, counted in the
provider's encoding, the structured copy of a duplicated result): a result over it comes back as
a preview and a handle, recorded on the tool message (``result_handle``). ``read_result`` calls
read such handles through the pool's ``ReadResult``, only handles the conversation was given
(:mod:`toolscout_kit.result_tool` reads the arguments and writes the refusals).

The chat and the runner talk in one direction: the chat calls :meth:`ToolCallRunner.run` with
what the round needs (the plan the model saw, the discovered tools, native deferral, the result
handles) and consumes the :class:`ToolRound` it returns; the runner never calls back into the
chat. It writes the call events to the chat's event sink and counts into the chat's tally.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolscout.client import (
    CALL_TOOL_NAME,
    READ_RESULT_NAME,
    SEARCH_TOOL_NAME,
    CallRequest,
    SearchRequest,
    StructuredCopy,
    Tool,
    ToolPlan,
    ToolsetRef,
    ToolSurface,
)

from orchestrator_svc.chat import ChatEvent, EventSink, ToolCallFinishedEvent, ToolCallStartedEvent
from orchestrator_svc.deferred import DeferredToolsCache
from orchestrator_svc.errors import ChatDeadlineError
from orchestrator_svc.messages import Attachment, Message, ToolCall
from orchestrator_svc.metrics import OrchestratorMetrics
from orchestrator_svc.results import cap_text, format_result, outcome_text
from orchestrator_svc.seams import DiscoverySeam, PoolSeam
from orchestrator_svc.stats import ChatTally
from toolscout_kit.call_tool import (
    CallTarget,
    Refusal,
    RefusalKind,
    UnknownHint,
    check_arguments,
    not_loaded,
    parse_arguments,
    read_call,
    unknown_tool,
)
from toolscout_kit.config import ResultFormat
from toolscout_kit.errors import (
    CancelledError,
    DeadlineExceededError,
    InvalidArgumentError,
    NotFoundError,
    OutcomeUnknownError,
    ToolscoutError,
)
from toolscout_kit.result_tool import no_handle_text, read_arguments, read_refused_text
from toolscout_kit.status import outcome_unknown_text, without_internals
from toolscout_kit.tracing import NO_TRACING, Tracing

__all__ = ["ChatContext", "ToolCallRunner", "ToolRound", "ToolServices"]

_PREVIEW_CHARS = 2000
# A downstream deadline this close to the chat's is the chat's deadline.
_DEADLINE_SLACK = 0.25


@dataclass(frozen=True, slots=True)
class ChatContext:
    """What tool calls need to know about the chat they run in (data; no callbacks into the chat)."""

    model: str
    toolset: ToolsetRef
    meta_json: str
    result_format: ResultFormat
    max_result_chars: int
    stats: ChatTally
    # The chat's provider: plans returned by searches count tokens in its encoding.
    provider: str
    # The chat's deadline (time.monotonic(); None: no deadline).
    deadline: float | None
    # Where the calls' started and finished events go (None: the caller streams no events).
    events: EventSink | None
    # ``deferral: stable``: found tools are called through call_tool, searches use the stable
    # surface (their results carry each found tool's input schema).
    stable: bool = False
    # Result shaping: the budget of one result (0: none), its encoding, and who may read a handle.
    result_budget: int = 0
    token_encoding: str = ""
    principal: str = ""
    conversation: str = ""

    def remaining(self) -> float | None:
        """Seconds left before the chat's deadline (None: no deadline)."""
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())


@dataclass(frozen=True, slots=True)
class ToolServices:
    """What every chat's tool calls run on (one set per :class:`~orchestrator_svc.loop.ChatLoop`):
    discovery, the pool, the toolsets' deferred tools (a call of one not loaded is refused as
    such), metrics and tracing."""

    discovery: DiscoverySeam
    pool: PoolSeam
    deferred: DeferredToolsCache
    metrics: OrchestratorMetrics
    tracing: Tracing = NO_TRACING


@dataclass(frozen=True, slots=True)
class _Turn:
    """What one round of calls runs against: the plan the model saw; whether the chat is in
    native deferral (the provider loads found definitions itself, so search results leave their
    parameters out); the result handles the conversation was given (handle -> expiry, Unix s)."""

    plan: ToolPlan
    native: bool
    handles: Mapping[str, float]


@dataclass(frozen=True, slots=True)
class _Ran:
    """What a pool call gave the model: the text, attachments, whether it failed, the server that
    ran it, and the handle of the whole result when the text is a preview."""

    text: str
    attachments: list[Attachment]
    is_error: bool
    server: str
    handle: str = ""
    expires: float = 0.0
    # Refused as a deferred tool no search had found (history: it was never loaded).
    not_loaded: bool = False

    @classmethod
    def refused(cls, refusal: Refusal, server: str) -> _Ran:
        return cls(refusal.text, [], True, server, not_loaded=refusal.kind is RefusalKind.NOT_LOADED)


@dataclass(frozen=True, slots=True)
class _Callable:
    """What the model could call, from the plan it saw: the tools in its list (by name), the
    definitions of tools found earlier (stable mode: called through call_tool), and whether
    search_tools was offered."""

    loaded: dict[str, Tool]
    found: dict[str, Tool]
    has_search: bool


@dataclass(frozen=True, slots=True)
class ToolRound:
    """The outcome of running one assistant message's tool calls."""

    # One result message per call, in call order.
    messages: list[Message]
    # Tools the searches among the calls loaded, in call order.
    found: list[str]
    # The plan a search answered with, when exactly one search loaded tools (else None).
    plan: ToolPlan | None


class ToolCallRunner:
    """Runs tool calls for one chat."""

    def __init__(self, chat: ChatContext, services: ToolServices) -> None:
        self._chat = chat
        self._discovery = services.discovery
        self._pool = services.pool
        self._deferred = services.deferred
        self._metrics = services.metrics
        self._tracing = services.tracing
        self._turn = _Turn(ToolPlan(), False, {})

    async def run(
        self,
        calls: Sequence[ToolCall],
        plan: ToolPlan,
        discovered: Sequence[str],
        *,
        native: bool = False,
        handles: Mapping[str, float] | None = None,
    ) -> ToolRound:
        """Runs every call of one assistant message concurrently (one round at a time per chat).

        Which tools may be called is decided against ``plan`` (the tool list the model saw), so a
        search in the same message does not let a sibling call of a not-yet-loaded tool through,
        whatever the order of the calls. ``discovered`` are the chat's discovered tools so far;
        ``native``: the chat is in native deferral now; ``handles``: the result handles the
        conversation was given so far (handle -> expiry, Unix seconds).
        """
        self._turn = _Turn(plan, native, dict(handles or {}))
        tools = _Callable(
            {t.llm_name: t for t in plan.loaded_tools},
            {t.llm_name: t for t in plan.found_tools},
            plan.search_tool is not None,
        )
        found: list[list[str]] = [[] for _ in calls]
        plans: list[ToolPlan | None] = [None for _ in calls]
        try:
            async with asyncio.TaskGroup() as group:
                tasks = [
                    group.create_task(
                        self._traced(c, self._run_one(c, tools, discovered, found[i], plans, i))
                    )
                    for i, c in enumerate(calls)
                ]
        except BaseExceptionGroup as group:
            # Only chat-ending errors escape a call (deadline, cancel, bugs): report the first as is.
            raise group.exceptions[0] from None
        loading = [i for i, names in enumerate(found) if names]
        return ToolRound(
            [task.result() for task in tasks],
            [n for names in found for n in names],
            plans[loading[0]] if len(loading) == 1 else None,
        )

    async def _traced(self, call: ToolCall, work: Awaitable[Message]) -> Message:
        """``work`` (running ``call``) in an ``execute_tool`` span: its search or pool call is the child."""
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
        }
        tracing = self._tracing
        with tracing.span(f"execute_tool {call.name}", attributes=attributes) as span:
            tracing.content(span, "gen_ai.tool.call.arguments", call.arguments_json)
            message = await work
            if message.is_error:
                span.set_attribute("error.type", "tool_error")
            tracing.content(span, "gen_ai.tool.call.result", message.content)
            return message

    async def _run_one(
        self,
        call: ToolCall,
        tools: _Callable,
        discovered: Sequence[str],
        found: list[str],
        plans: list[ToolPlan | None],
        index: int,
    ) -> Message:
        chat = self._chat
        is_search = call.name == SEARCH_TOOL_NAME and tools.has_search
        through = chat.stable and call.name == CALL_TOOL_NAME and tools.has_search
        # A call through call_tool runs (and is counted as) the tool it names.
        target = read_call(call.arguments_json) if through else None
        run = call
        if isinstance(target, CallTarget):
            run = ToolCall(call.id, target.name, json.dumps(target.arguments))
        loaded = tools.loaded
        server = "" if is_search else (loaded[run.name].server if run.name in loaded else "")
        await self._emit(ToolCallStartedEvent(call, server))
        started = time.monotonic()
        loaded_by_search: list[str] | None = None
        if is_search:
            text, is_error, plans[index] = await self._search(call, loaded, discovered, found)
            ran = _Ran(text, [], is_error, server)
            loaded_by_search = None if is_error else list(found)
        elif run.name == READ_RESULT_NAME and run.name not in loaded:
            text, is_error, read_server = await self._read(run)
            ran = _Ran(text, [], is_error, read_server)
        elif isinstance(target, Refusal):
            ran = _Ran.refused(target, server)
        else:
            ran = await self._run_tool(run, target, tools, discovered, server)
        text, is_error, server = ran.text, ran.is_error, ran.server
        chat.stats.count_tool(run.name, server, error=is_error)
        await self._emit(
            ToolCallFinishedEvent(call, server, time.monotonic() - started, is_error, text[:_PREVIEW_CHARS])
        )
        return Message(
            "tool",
            text,
            tool_call_id=call.id,
            name=call.name,
            attachments=ran.attachments,
            is_error=is_error,
            loaded_tools=loaded_by_search,
            not_loaded=ran.not_loaded,
            result_handle=ran.handle,
            handle_expires_unix=ran.expires,
        )

    async def _run_tool(
        self,
        run: ToolCall,
        target: CallTarget | None,
        tools: _Callable,
        discovered: Sequence[str],
        server: str,
    ) -> _Ran:
        """A catalog tool's call (``target``: read from a call_tool call): run by the pool, or refused."""
        chat = self._chat
        tool = tools.loaded.get(run.name)
        # Stable mode: a found tool is not in the tool list; called through call_tool (or by its
        # name, as some local models do) it runs with arguments checked against its schema.
        check = target is not None
        if chat.stable and tool is None and run.name in discovered:
            tool, check = tools.found.get(run.name), True
        if tool is None:
            return _Ran.refused(await self._not_callable(run.name, tools), server)
        was_discovered = run.name in discovered
        arguments = target.arguments if target is not None else parse_arguments(run.name, run.arguments_json)
        if isinstance(arguments, Refusal):
            self._count_discovered(was_discovered)
            return _Ran.refused(arguments, tool.server)
        misfit = check_arguments(tool, arguments) if check else None
        if misfit is not None:
            return _Ran.refused(misfit, server)
        self._count_discovered(was_discovered)
        return await self._call_pool(run, tool.server, arguments)

    async def _not_callable(self, name: str, tools: _Callable) -> Refusal:
        """The refusal of a tool that is not in the tool list: deferred (not yet found), or unknown."""
        chat = self._chat
        if await self._is_deferred(name):
            chat.stats.count_deferred_rejection()
            self._metrics.deferred_rejections.labels(chat.model).inc()
            return not_loaded(name)
        hint = UnknownHint.SEARCH if tools.has_search else UnknownHint.NONE
        return unknown_tool(name, hint, available=list(tools.loaded))

    def _count_discovered(self, was_discovered: bool) -> None:
        if was_discovered:
            self._metrics.discovered_tool_calls.labels(self._chat.model).inc()

    async def _search(
        self, call: ToolCall, loaded: dict[str, Tool], discovered: Sequence[str], found: list[str]
    ) -> tuple[str, bool, ToolPlan | None]:
        """The result text, whether it is an error, and the plan after the search."""
        chat = self._chat
        chat.stats.count_search()
        self._metrics.search_calls.labels(chat.model).inc()
        try:
            request = SearchRequest(
                toolset=chat.toolset,
                arguments_json=call.arguments_json or "{}",
                # Found earlier: in the tool list (append), or called through call_tool (stable).
                loaded_tools=tuple(dict.fromkeys([*loaded, *discovered])),
                # The plan after the search comes with it: one round trip per search iteration.
                include_plan=True,
                discovered_tools=tuple(discovered),
                provider=chat.provider,
                compact_text=self._turn.native,
                surface=ToolSurface.STABLE if chat.stable else "",
                principal=chat.principal,
            )
            outcome = await self._discovery.search_tools(request, deadline=chat.remaining())
        except (InvalidArgumentError, NotFoundError) as err:
            # Written for the LLM by discovery: it can correct its arguments and try again.
            return f"Error: {err.message}", True, None
        except CancelledError:
            raise
        except ToolscoutError as err:
            self._raise_if_chat_deadline(err)
            return f"Error: search_tools failed: {err.message}", True, None
        found.extend(t.llm_name for t in outcome.newly_loaded)
        return outcome.result_text, False, outcome.plan

    async def _call_pool(self, call: ToolCall, server: str, arguments: Mapping[str, Any]) -> _Ran:
        """Runs ``call`` on the pool; ``arguments``: its arguments, parsed (for the result format)."""
        chat = self._chat
        try:
            request = CallRequest(
                llm_name=call.name,
                arguments_json=call.arguments_json if call.arguments_json.strip() else "{}",
                meta_json=chat.meta_json,
                result_budget_tokens=chat.result_budget,
                token_encoding=chat.token_encoding if chat.result_budget else "",
                # LLM providers read one copy: the tool result text is built from structuredContent.
                structured_copy=StructuredCopy.STRUCTURED if chat.result_budget else None,
                principal=chat.principal,
                conversation=chat.conversation,
            )
            outcome = await self._pool.call_tool(request, server_hint=server, deadline=chat.remaining())
        except CancelledError:
            raise
        except OutcomeUnknownError:
            # Never re-sent: it may have run. The LLM must know, not guess that it failed.
            return _Ran(self._format(call, outcome_unknown_text(call.name), arguments), [], True, server)
        except ToolscoutError as err:
            self._raise_if_chat_deadline(err)
            text = f"Error: {without_internals(err.message)}"
            return _Ran(self._format(call, text, arguments), [], True, server)
        server = outcome.server or server
        if chat.result_budget:
            chat.stats.count_result(
                server,
                outcome.tokens_returned,
                outcome.tokens_delivered,
                kept=bool(outcome.result_handle),
                estimated=outcome.tokens_estimated,
            )
            self._metrics.record_result(server, outcome.tokens_returned, outcome.tokens_delivered)
        text, attachments = outcome_text(outcome)
        return _Ran(
            self._format(call, text, arguments),
            attachments,
            outcome.is_error,
            server,
            outcome.result_handle,
            outcome.handle_expires_unix,
        )

    async def _read(self, call: ToolCall) -> tuple[str, bool, str]:
        """A read_result call: (text, is_error, server of the result read)."""
        chat = self._chat
        parsed = parse_arguments(call.name, call.arguments_json)
        if isinstance(parsed, Refusal):
            return parsed.text, True, ""
        request = read_arguments(
            parsed,
            principal=chat.principal,
            conversation=chat.conversation,
            token_encoding=chat.token_encoding,
        )
        if isinstance(request, str):
            return f"Error: {request}", True, ""
        if request.handle not in self._turn.handles:
            self._metrics.record_read("", 0, ok=False)
            return no_handle_text(request.handle), True, ""
        try:
            read = await self._pool.read_result(request, deadline=chat.remaining())
        except CancelledError:
            raise
        except (NotFoundError, InvalidArgumentError) as err:
            # Written for the model by the pool: expired (and what to run again), or a bad read.
            self._metrics.record_read("", 0, ok=False)
            return read_refused_text(without_internals(err.message)), True, ""
        except ToolscoutError as err:
            self._raise_if_chat_deadline(err)
            self._metrics.record_read("", 0, ok=False)
            return f"Error: {READ_RESULT_NAME} failed: {without_internals(err.message)}", True, ""
        chat.stats.count_read(read.server, read.tokens)
        self._metrics.record_read(read.server, read.tokens, ok=True)
        return read.text, False, read.server

    async def _emit(self, event: ChatEvent) -> None:
        if self._chat.events is not None:
            await self._chat.events(event)

    async def _is_deferred(self, name: str) -> bool:
        """Whether ``name`` is a deferred tool of the toolset at the round's catalog version
        (asked only for calls of tools not loaded)."""
        chat = self._chat
        deferred = await self._deferred.get(
            chat.toolset,
            catalog_version=self._turn.plan.catalog_version,
            principal=chat.principal,
            provider=chat.provider,
            deadline=chat.remaining(),
        )
        return name in deferred.names

    def _raise_if_chat_deadline(self, err: ToolscoutError) -> None:
        """A downstream deadline that is the chat's own deadline ends the chat, not just the call.

        Calls get the chat's remaining time as their RPC deadline, so they can expire a moment
        before the chat's own timer fires; the tool's server timeout stays an error result.
        """
        remaining = self._chat.remaining()
        if isinstance(err, DeadlineExceededError) and remaining is not None and remaining < _DEADLINE_SLACK:
            raise ChatDeadlineError(f"chat exceeded its deadline during a tool call: {err.message}") from err

    def _format(self, call: ToolCall, text: str, arguments: Mapping[str, Any]) -> str:
        chat = self._chat
        return cap_text(format_result(chat.result_format, call, text, arguments), chat.max_result_chars)
