"""toolscout.orchestrator.v1.Orchestrator: proto ⇄ domain, nothing else."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any, cast

import grpc
from toolscout.common.v1 import common_pb2
from toolscout.orchestrator.v1 import orchestrator_pb2 as pb
from toolscout.orchestrator.v1 import orchestrator_pb2_grpc

from orchestrator_svc.errors import InvalidChatError
from orchestrator_svc.loop import (
    AssistantMessageEvent,
    ChatEvent,
    ChatLoop,
    ChatRequest,
    ChatResult,
    ReasoningDeltaEvent,
    TextDeltaEvent,
    ToolCallFinishedEvent,
    ToolCallStartedEvent,
    ToolsDiscoveredEvent,
    UsageEvent,
)
from orchestrator_svc.messages import Attachment, Message, NativeItem, Role, ToolCall, Usage
from orchestrator_svc.providers.registry import ModelRegistry
from toolscout_kit.config import ToolscoutConfig, ToolSpec

__all__ = ["OrchestratorServicer"]

_STOP = {"completed": pb.STOP_REASON_COMPLETED, "iteration_limit": pb.STOP_REASON_ITERATION_LIMIT}
# Events buffered between the chat and a slow stream reader before the chat waits.
_EVENT_BUFFER = 256


def _call_in(c: pb.ToolCall) -> ToolCall:
    return ToolCall(c.id, c.name, c.arguments_json)


def _call_out(c: ToolCall) -> pb.ToolCall:
    return pb.ToolCall(id=c.id, name=c.name, arguments_json=c.arguments_json)


def _attachment_in(b: common_pb2.ContentBlock) -> Attachment:
    return Attachment(b.type, b.text, b.data, b.mime_type, b.uri, b.name, b.raw_json)


def _attachment_out(a: Attachment) -> common_pb2.ContentBlock:
    return common_pb2.ContentBlock(
        type=a.type,
        text=a.text,
        data=a.data,
        mime_type=a.mime_type,
        uri=a.uri,
        name=a.name,
        raw_json=a.raw_json,
    )


def _native_item_in(text: str, index: int) -> NativeItem:
    try:
        return NativeItem.from_json(text)
    except ValueError as err:
        raise InvalidChatError(f"native_items_json[{index}]: {err}") from None


def message_in(m: pb.Message) -> Message:
    return Message(
        role=cast(Role, m.role),
        content=m.content,
        tool_calls=[_call_in(c) for c in m.tool_calls],
        tool_call_id=m.tool_call_id,
        name=m.name,
        reasoning=m.reasoning,
        attachments=[_attachment_in(a) for a in m.attachments],
        is_error=m.is_error,
        loaded_tools=list(m.loaded_tools.names) if m.HasField("loaded_tools") else None,
        native_items=[_native_item_in(i, n) for n, i in enumerate(m.native_items_json)],
        not_loaded=m.not_loaded,
    )


def message_out(m: Message) -> pb.Message:
    return pb.Message(
        role=m.role,
        content=m.content,
        tool_calls=[_call_out(c) for c in m.tool_calls],
        tool_call_id=m.tool_call_id,
        name=m.name,
        reasoning=m.reasoning,
        attachments=[_attachment_out(a) for a in m.attachments],
        is_error=m.is_error,
        loaded_tools=None if m.loaded_tools is None else pb.LoadedTools(names=m.loaded_tools),
        native_items_json=[i.to_json() for i in m.native_items],
        not_loaded=m.not_loaded,
    )


def request_in(r: pb.ChatRequest) -> ChatRequest:
    return ChatRequest(
        messages=[message_in(m) for m in r.messages],
        model=r.model,
        system=r.system,
        toolset=r.toolset,
        toolset_json=r.toolset_json,
        meta_json=r.meta_json,
        discovered_tools=list(r.discovered_tools),
        max_iterations=r.max_iterations,
        tool_result_format=r.tool_result_format,
    )


def _usage_out(u: Usage) -> pb.TokenUsage:
    return pb.TokenUsage(
        input_tokens=u.input_tokens,
        output_tokens=u.output_tokens,
        cached_input_tokens=u.cached_input_tokens,
        cache_write_input_tokens=u.cache_write_tokens,
    )


def response_out(r: ChatResult) -> pb.ChatResponse:
    s = r.stats
    d = s.discovery
    return pb.ChatResponse(
        messages=[message_out(m) for m in r.messages],
        loaded_tools=r.loaded_tools,
        stats=pb.ChatStats(
            usage=_usage_out(s.usage),
            llm_calls=s.llm_calls,
            tool_calls=[
                pb.ToolCallCount(tool=c.tool, server=c.server, calls=c.calls, errors=c.errors)
                for c in s.tool_calls.values()
            ],
            discovery=pb.DiscoveryStats(
                search_calls=d.search_calls,
                tools_discovered=d.tools_discovered,
                definition_tokens_sent=d.definition_tokens_sent,
                definition_tokens_all=d.definition_tokens_all,
                tokens_saved=d.tokens_saved,
                encoding=d.encoding,
                estimate=d.estimate,
                deferred_call_rejections=d.deferred_call_rejections,
                deferral=d.deferral,
                native_fallback_reason=d.native_fallback_reason,
            ),
            iterations=s.iterations,
            duration_seconds=s.duration_seconds,
        ),
        stop_reason=_STOP[r.stop_reason],
        error=r.error,
        tools_disabled_fallback=r.tools_disabled_fallback,
        model=r.model,
    )


def event_out(e: ChatEvent) -> pb.ChatEvent:
    field: dict[str, Any]
    match e:
        case TextDeltaEvent():
            field = {"text_delta": pb.TextDelta(text=e.text)}
        case ReasoningDeltaEvent():
            field = {"reasoning_delta": pb.ReasoningDelta(text=e.text)}
        case AssistantMessageEvent():
            field = {"assistant_message": message_out(e.message)}
        case ToolCallStartedEvent():
            field = {"tool_call_started": pb.ToolCallStarted(call=_call_out(e.call), server=e.server)}
        case ToolCallFinishedEvent():
            finished = pb.ToolCallFinished(
                call=_call_out(e.call),
                server=e.server,
                duration_seconds=e.duration_seconds,
                is_error=e.is_error,
                result_preview=e.result_preview,
            )
            field = {"tool_call_finished": finished}
        case ToolsDiscoveredEvent():
            field = {"tools_discovered": pb.ToolsDiscovered(tools=e.tools)}
        case UsageEvent():
            field = {"usage": _usage_out(e.usage)}
    return pb.ChatEvent(**field)


def _toolset_server(server: str, spec: ToolSpec) -> pb.ToolsetServer:
    if spec is True:
        return pb.ToolsetServer(server=server, mode="all")
    if spec is False:
        # Listed but contributing nothing: an include of no tools.
        return pb.ToolsetServer(server=server, mode="include")
    if isinstance(spec, list):
        return pb.ToolsetServer(server=server, mode="include", tools=spec)
    return pb.ToolsetServer(server=server, mode="exclude", tools=spec.exclude)


class OrchestratorServicer(orchestrator_pb2_grpc.OrchestratorServicer):
    def __init__(self, loop: ChatLoop, models: ModelRegistry, config: ToolscoutConfig) -> None:
        self._loop = loop
        self._models = models
        self._config = config

    async def Chat(
        self, request: pb.ChatRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.ChatResponse:
        result = await self._loop.run(request_in(request), time_limit=context.time_remaining())
        return response_out(result)

    async def StreamChat(
        self, request: pb.ChatRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[pb.ChatEvent]:
        queue: asyncio.Queue[pb.ChatEvent | None] = asyncio.Queue(_EVENT_BUFFER)

        async def sink(event: ChatEvent) -> None:
            await queue.put(event_out(event))

        async def produce() -> ChatResult:
            try:
                return await self._loop.run(
                    request_in(request), time_limit=context.time_remaining(), events=sink
                )
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
            models.append(
                pb.ModelInfo(
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
            )
        return pb.ListModelsResponse(models=models)

    async def ListToolsets(
        self, request: pb.ListToolsetsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.ListToolsetsResponse:
        return pb.ListToolsetsResponse(
            toolsets=[
                pb.ToolsetInfo(
                    name=name,
                    description=ts.description,
                    servers=[_toolset_server(s, spec) for s, spec in sorted(ts.servers.items())],
                )
                for name, ts in sorted(self._config.tool_sets.items())
            ]
        )
