"""Running the tool calls of one assistant message: search_tools via discovery, the rest via the pool.

Every call of a message runs concurrently; the results come back in call order. Tool failures,
malformed arguments, deferred tools called before they were loaded and unknown tools all become
error *results* the model can act on; only chat-ending errors (the chat's deadline, cancellation,
bugs) escape.

With ``deferral: stable`` the model calls found tools through discovery's ``call_tool``
(``{"name", "arguments"}``): the named tool must be an eager one or one a search of the
conversation found (else the deferred-call guard's error), and its arguments are validated against
its input schema (``jsonschema``, :mod:`toolscout_kit.arguments`) before the pool runs it; a misfit
is answered with the expected shape, so the model can correct itself.

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
from toolscout_kit.arguments import argument_problems, call_tool_target, expected_shape, not_loaded_error
from toolscout_kit.config import ResultFormat
from toolscout_kit.errors import (
    CancelledError,
    DeadlineExceededError,
    InvalidArgumentError,
    NotFoundError,
    OutcomeUnknownError,
    ToolscoutError,
)
from toolscout_kit.json_text import JsonTextError, parse_json_object
from toolscout_kit.result_tool import no_handle_text, read_arguments, read_refused_text
from toolscout_kit.status import outcome_unknown_text, without_internals
from toolscout_kit.tracing import NO_TRACING, Tracing

__all__ = ["ChatContext", "ToolCallRunner", "ToolRound", "ToolServices"]

_PREVIEW_CHARS = 2000
# A downstream deadline this close to the chat's is the chat's deadline.
_DEADLINE_SLACK = 0.25
_UNKNOWN_LIST_LIMIT = 30


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


@dataclass(frozen=True, slots=True)
class ToolRound:
    """The outcome of running one assistant message's tool calls."""

    # One result message per call, in call order.
    messages: list[Message]
    # Tools the searches among the calls loaded, in call order.
    found: list[str]
    # The plan a search answered with, when exactly one search loaded tools (else None).
    plan: ToolPlan | None


def _parsed_arguments(raw: str) -> dict[str, Any] | str:
    """A call's arguments as a JSON object, or what is wrong with them (a phrase for the model)."""
    try:
        return parse_json_object(raw, "the arguments")
    except JsonTextError as err:
        # "the arguments are not valid JSON (...)", "the arguments must be a JSON object, not array"
        return f"the arguments {'' if err.requirement else 'are '}{err.problem}"


def _invalid_arguments(tool: str, problem: str) -> str:
    return f"invalid arguments for tool '{tool}': {problem}. Call it again with a JSON object."


def _call_tool_target(raw: str) -> tuple[str, dict[str, Any]] | str:
    """The tool a call_tool call names and its arguments, or what is wrong with the call."""
    parsed = _parsed_arguments(raw)
    return _invalid_arguments(CALL_TOOL_NAME, parsed) if isinstance(parsed, str) else call_tool_target(parsed)


def _misfit(tool: Tool, raw: str) -> list[str]:
    """Where the arguments (a JSON object, else the pool call reports it) do not fit ``tool``'s schema."""
    parsed = _parsed_arguments(raw)
    return [] if isinstance(parsed, str) else argument_problems(tool.input_schema, parsed)


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
        # Every deferred definition, fetched once per catalog version (stable mode checks the
        # arguments of a found tool's call against its definition).
        self._definitions: tuple[str, dict[str, Tool]] | None = None

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
        loaded = {t.llm_name: t for t in plan.loaded_tools}
        has_search = plan.search_tool is not None
        found: list[list[str]] = [[] for _ in calls]
        plans: list[ToolPlan | None] = [None for _ in calls]
        try:
            async with asyncio.TaskGroup() as group:
                tasks = [
                    group.create_task(
                        self._traced(c, self._run_one(c, loaded, has_search, discovered, found[i], plans, i))
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
        loaded: dict[str, Tool],
        has_search: bool,
        discovered: Sequence[str],
        found: list[str],
        plans: list[ToolPlan | None],
        index: int,
    ) -> Message:
        chat = self._chat
        is_search = call.name == SEARCH_TOOL_NAME and has_search
        through = chat.stable and call.name == CALL_TOOL_NAME and has_search
        # A call through call_tool runs (and is counted as) the tool it names.
        target = _call_tool_target(call.arguments_json) if through else None
        run = ToolCall(call.id, target[0], json.dumps(target[1])) if isinstance(target, tuple) else call
        server = "" if is_search else (loaded[run.name].server if run.name in loaded else "")
        await self._emit(ToolCallStartedEvent(call, server))
        started = time.monotonic()
        attachments: list[Attachment] = []
        loaded_by_search: list[str] | None = None
        not_loaded = False
        tool = loaded.get(run.name)
        # Stable mode: a found tool is not in the tool list; called through call_tool (or by its
        # name, as some local models do) it runs with arguments checked against its schema.
        check = through
        if chat.stable and tool is None and run.name in discovered:
            tool, check = await self._definition(run.name), True
        handle, expires = "", 0.0
        if is_search:
            text, is_error, plans[index] = await self._search(call, loaded, discovered, found)
            loaded_by_search = None if is_error else list(found)
        elif run.name == READ_RESULT_NAME and tool is None:
            text, is_error, server = await self._read(run)
        elif isinstance(target, str):
            text, is_error = f"Error: {target}", True
        elif through and run.name in (SEARCH_TOOL_NAME, CALL_TOOL_NAME):
            text, is_error = f"Error: call {run.name} directly, not through {CALL_TOOL_NAME}.", True
        elif tool is not None and check and (problems := _misfit(tool, run.arguments_json)):
            text, is_error = f"Error: {expected_shape(run.name, tool.input_schema, problems)}", True
        elif tool is not None:
            ran = await self._call_pool(run, tool.server, run.name in discovered)
            text, attachments, is_error, server = ran.text, ran.attachments, ran.is_error, ran.server
            handle, expires = ran.handle, ran.expires
        elif await self._is_deferred(run.name):
            text, is_error, not_loaded = not_loaded_error(run.name), True, True
            chat.stats.discovery.deferred_call_rejections += 1
            self._metrics.deferred_rejections.labels(chat.model).inc()
        else:
            text, is_error = self._unknown_tool(run.name, loaded, has_search), True
        chat.stats.count_tool(run.name, server, error=is_error)
        await self._emit(
            ToolCallFinishedEvent(call, server, time.monotonic() - started, is_error, text[:_PREVIEW_CHARS])
        )
        return Message(
            "tool",
            text,
            tool_call_id=call.id,
            name=call.name,
            attachments=attachments,
            is_error=is_error,
            loaded_tools=loaded_by_search,
            not_loaded=not_loaded,
            result_handle=handle,
            handle_expires_unix=expires,
        )

    @staticmethod
    def _unknown_tool(name: str, loaded: dict[str, Tool], has_search: bool) -> str:
        names = sorted(loaded)
        listed = ", ".join(names[:_UNKNOWN_LIST_LIMIT]) + (
            ", ..." if len(names) > _UNKNOWN_LIST_LIMIT else ""
        )
        hint = " Use 'search_tools' to find other tools." if has_search else ""
        return f"Error: Unknown tool '{name}'. Available tools: {listed or 'none'}.{hint}"

    async def _search(
        self, call: ToolCall, loaded: dict[str, Tool], discovered: Sequence[str], found: list[str]
    ) -> tuple[str, bool, ToolPlan | None]:
        """The result text, whether it is an error, and the plan after the search."""
        chat = self._chat
        chat.stats.discovery.search_calls += 1
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

    async def _call_pool(self, call: ToolCall, server: str, was_discovered: bool) -> _Ran:
        chat = self._chat
        if was_discovered:
            self._metrics.discovered_tool_calls.labels(chat.model).inc()
        parsed = _parsed_arguments(call.arguments_json)
        if isinstance(parsed, str):
            return _Ran(f"Error: {_invalid_arguments(call.name, parsed)}", [], True, server)
        try:
            request = CallRequest(
                llm_name=call.name,
                arguments_json=call.arguments_json if call.arguments_json.strip() else "{}",
                meta_json=chat.meta_json,
                result_budget_tokens=chat.result_budget,
                token_encoding=chat.token_encoding if chat.result_budget else "",
                # LLM providers read one copy: the tool result text is built from structuredContent.
                structured_copy="structured" if chat.result_budget else "",
                principal=chat.principal,
                conversation=chat.conversation,
            )
            outcome = await self._pool.call_tool(request, server_hint=server, deadline=chat.remaining())
        except CancelledError:
            raise
        except OutcomeUnknownError:
            # Never re-sent: it may have run. The LLM must know, not guess that it failed.
            return _Ran(self._format(call, outcome_unknown_text(call.name)), [], True, server)
        except ToolscoutError as err:
            self._raise_if_chat_deadline(err)
            return _Ran(self._format(call, f"Error: {without_internals(err.message)}"), [], True, server)
        server = outcome.server or server
        if chat.result_budget:
            tally = chat.stats.result_tally(server)
            tally.returned += outcome.tokens_returned
            tally.delivered += outcome.tokens_delivered
            tally.kept += int(bool(outcome.result_handle))
            tally.estimated = tally.estimated or outcome.tokens_estimated
            self._metrics.record_result(server, outcome.tokens_returned, outcome.tokens_delivered)
        text, attachments = outcome_text(outcome)
        return _Ran(
            self._format(call, text),
            attachments,
            outcome.is_error,
            server,
            outcome.result_handle,
            outcome.handle_expires_unix,
        )

    async def _read(self, call: ToolCall) -> tuple[str, bool, str]:
        """A read_result call: (text, is_error, server of the result read)."""
        chat = self._chat
        parsed = _parsed_arguments(call.arguments_json or "{}")
        if isinstance(parsed, str):
            return f"Error: {_invalid_arguments(call.name, parsed)}", True, ""
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
        tally = chat.stats.result_tally(read.server)
        tally.reads += 1
        tally.read_tokens += read.tokens
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
            provider=chat.provider,
            deadline=chat.remaining(),
        )
        return name in deferred.names

    async def _definition(self, name: str) -> Tool | None:
        """The definition of deferred tool ``name``: every deferred definition is fetched once per
        catalog version, shared by every chat."""
        version = self._turn.plan.catalog_version
        if self._definitions is None or self._definitions[0] != version:
            chat = self._chat
            deferred = await self._deferred.get(
                chat.toolset,
                catalog_version=version,
                provider=chat.provider,
                deadline=chat.remaining(),
                definitions=True,
            )
            self._definitions = (version, {t.llm_name: t for t in deferred.definitions or ()})
        return self._definitions[1].get(name)

    def _raise_if_chat_deadline(self, err: ToolscoutError) -> None:
        """A downstream deadline that is the chat's own deadline ends the chat, not just the call.

        Calls get the chat's remaining time as their RPC deadline, so they can expire a moment
        before the chat's own timer fires; the tool's server timeout stays an error result.
        """
        remaining = self._chat.remaining()
        if isinstance(err, DeadlineExceededError) and remaining is not None and remaining < _DEADLINE_SLACK:
            raise ChatDeadlineError(f"chat exceeded its deadline during a tool call: {err.message}") from err

    def _format(self, call: ToolCall, text: str) -> str:
        chat = self._chat
        return cap_text(format_result(chat.result_format, call, text), chat.max_result_chars)
