"""toolscout.orchestrator.v1.Orchestrator: proto ⇄ domain, nothing else.

Requests and answers are read and written by :mod:`toolscout.client.wire` as the shared values of
the client library; the chat's messages become the loop's :class:`~orchestrator_svc.messages.Message`
(:meth:`Message.of`) on the way in.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import grpc
from toolscout import client as tc
from toolscout.client import wire
from toolscout.orchestrator.v1 import orchestrator_pb2 as pb
from toolscout.orchestrator.v1 import orchestrator_pb2_grpc

from orchestrator_svc.errors import InvalidChatError
from orchestrator_svc.loop import (
    AssistantMessageEvent,
    ChatEvent,
    ChatLoop,
    ChatOutcome,
    ChatRequest,
    EventSink,
    ToolsDiscoveredEvent,
    UsageEvent,
)
from orchestrator_svc.messages import Message, Usage
from orchestrator_svc.providers.registry import ModelRegistry
from toolscout_kit.config import ToolscoutConfig, ToolSpec
from toolscout_kit.errors import OutcomeUnknownError
from toolscout_kit.inflight import InFlight
from toolscout_kit.status import chat_ended_text

__all__ = ["OrchestratorServicer"]

# Events buffered between the chat and a slow stream reader before the chat waits.
_EVENT_BUFFER = 256


def _message_in(m: pb.Message) -> Message:
    try:
        return Message.of(wire.chat_message(m))
    except ValueError as err:
        raise InvalidChatError(str(err)) from None


def principal_of(context: grpc.aio.ServicerContext[Any, Any]) -> str:
    """The principal the caller named (``x-toolscout-principal``), "" when none.

    Raises:
        InvalidChatError: the named principal is malformed.
    """
    named = [v for k, v in context.invocation_metadata() or () if k == tc.PRINCIPAL_KEY]
    if not named:
        return ""
    if len(named) > 1 or not isinstance(named[0], str):
        raise InvalidChatError(f"name one principal in {tc.PRINCIPAL_KEY}")
    try:
        return tc.check_principal(named[0])
    except ValueError as err:
        raise InvalidChatError(str(err)) from None


def request_in(r: pb.ChatRequest, principal: str = "") -> ChatRequest:
    return ChatRequest(
        messages=[_message_in(m) for m in r.messages],
        model=r.model,
        system=r.system,
        toolset=wire.toolset_of(r),
        meta_json=r.meta_json,
        discovered_tools=list(r.discovered_tools),
        max_iterations=r.max_iterations,
        tool_result_format=r.tool_result_format,
        conversation_id=r.conversation_id,
        principal=principal,
    )


def response_out(r: ChatOutcome) -> pb.ChatResponse:
    return wire.chat_result_pb(r.result())


def _usage(u: Usage) -> tc.TokenUsage:
    return tc.TokenUsage(u.input_tokens, u.output_tokens, u.cached_input_tokens, u.cache_write_tokens)


def event_out(e: ChatEvent) -> pb.ChatEvent:
    event: tc.ChatEvent
    match e:
        case AssistantMessageEvent():
            event = tc.AssistantMessage(e.message.to_chat_message())
        case ToolsDiscoveredEvent():
            event = tc.ToolsDiscovered(tuple(e.tools))
        case UsageEvent():
            event = tc.UsageUpdate(_usage(e.usage))
        case _:
            event = e  # text and tool-call events are the client library's values already
    return wire.chat_event_pb(event)


def _toolset_server(server: str, spec: ToolSpec) -> tc.ToolsetServer:
    if spec is True:
        return tc.ToolsetServer(server, "all")
    if spec is False:
        # Listed but contributing nothing: an include of no tools.
        return tc.ToolsetServer(server, "include")
    if isinstance(spec, list):
        return tc.ToolsetServer(server, "include", tuple(spec))
    return tc.ToolsetServer(server, "exclude", tuple(spec.exclude))


class OrchestratorServicer(orchestrator_pb2_grpc.OrchestratorServicer):
    def __init__(self, loop: ChatLoop, models: ModelRegistry, config: ToolscoutConfig) -> None:
        self._loop = loop
        self._models = models
        self._config = config
        # The chats running.
        self._chats = InFlight()

    async def drain(self, within: float) -> None:
        """Gives the chats running ``within`` seconds (the server is stopping), then ends those
        still running: each is answered ABORTED, saying that a tool it was running may or may not
        have taken effect (its RPC to the pool is cancelled, and the pool cancels it at the MCP
        server)."""
        await self._chats.end_after(within)

    async def _run(
        self, chat: ChatRequest, time_limit: float | None, events: EventSink | None = None
    ) -> ChatOutcome:
        with self._chats.track():
            return await self._loop.run(chat, time_limit=time_limit, events=events)
        # (the block absorbed drain's cancellation)
        raise OutcomeUnknownError(chat_ended_text("orchestrator"))

    async def Chat(
        self, request: pb.ChatRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.ChatResponse:
        result = await self._run(request_in(request, principal_of(context)), context.time_remaining())
        return response_out(result)

    async def StreamChat(
        self, request: pb.ChatRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[pb.ChatEvent]:
        chat = request_in(request, principal_of(context))
        queue: asyncio.Queue[pb.ChatEvent | None] = asyncio.Queue(_EVENT_BUFFER)

        async def sink(event: ChatEvent) -> None:
            await queue.put(event_out(event))

        async def produce() -> ChatOutcome:
            try:
                return await self._run(chat, context.time_remaining(), events=sink)
            finally:
                await queue.put(None)

        task = asyncio.create_task(produce())
        try:
            while (event := await queue.get()) is not None:
                yield event
            yield pb.ChatEvent(final=response_out(await task))
        finally:
            # The reader went away (client cancel) or we are done: never leave the chat running.
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def ListModels(
        self, request: pb.ListModelsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.ListModelsResponse:
        models = []
        for name, m in sorted(self._models.models.items()):
            client = self._models.client(m.client)
            api, deferral, strict = self._models.deferral(name)
            info = tc.ModelInfo(
                name=name,
                client=m.client,
                provider=client.provider,
                model=m.model,
                base_url=client.base_url or "",
                template=m.template or "",
                api=api,
                deferral=deferral,
                strict_tools=strict,
            )
            models.append(wire.model_info_pb(info))
        return pb.ListModelsResponse(models=models)

    async def ListToolsets(
        self, request: pb.ListToolsetsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.ListToolsetsResponse:
        toolsets = [
            tc.ToolsetInfo(
                name,
                ts.description,
                tuple(_toolset_server(s, spec) for s, spec in sorted(ts.servers.items())),
            )
            for name, ts in sorted(self._config.tool_sets.items())
        ]
        return pb.ListToolsetsResponse(toolsets=[wire.toolset_info_pb(t) for t in toolsets])
