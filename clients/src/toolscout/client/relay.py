"""A tool call with its MCP server's requests relayed to the host (``CallToolRelay``).

A relayed call is a bidirectional stream: the caller sends the call and its host's capabilities,
the pool streams the server's progress, log messages and requests (``sampling/createMessage``,
``elicitation/create``, ``roots/list``) and finally the result; the caller answers each request
on the same stream. :class:`CallRelay` (async) and :class:`SyncCallRelay` say what to do with
each; :func:`relay_call` and :func:`relay_call_sync` drive the stream for the pool clients.

Requests are answered concurrently (a host may take minutes to answer an elicitation while the
server keeps reporting progress); progress and log messages are handed on in their order.
"""

from __future__ import annotations

import asyncio
import queue
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio

from toolscout.client import types as t
from toolscout.client import wire
from toolscout.client.errors import OutcomeUnknownError, translate_rpc_error
from toolscout.mcp_pool.v1 import mcp_pool_pb2

__all__ = ["INTERNAL_ERROR", "CallRelay", "RelayRpc", "SyncCallRelay", "relay_call", "relay_call_sync"]

# JSON-RPC "internal error": the answer to a request whose host handler failed.
INTERNAL_ERROR = -32603
_NO_RESULT = (
    "the pool ended the call without a result: the tool may or may not have run. It was not sent again."
)


@dataclass(frozen=True, slots=True)
class CallRelay:
    """What a relayed call does with what its MCP server sends during the call.

    ``host_capabilities_json``: the host's MCP ``ClientCapabilities`` (JSON object text); the pool
    refuses the server's requests the host did not declare, without asking ``on_request``.
    ``on_request`` answers one request (a raised exception answers it with an internal error).
    """

    host_capabilities_json: str
    on_request: Callable[[t.RelayedRequest], Awaitable[t.RelayAnswer]]
    on_log: Callable[[t.RelayedLog], Awaitable[None]] | None = None
    on_progress: Callable[[t.CallProgress], Awaitable[None]] | None = None
    # The MCP revision the host speaks ("" = unknown), see CallToolRelayStart.host_protocol_version.
    host_protocol_version: str = ""


@dataclass(frozen=True, slots=True)
class SyncCallRelay:
    """:class:`CallRelay` for the blocking client: requests are answered one at a time."""

    host_capabilities_json: str
    on_request: Callable[[t.RelayedRequest], t.RelayAnswer]
    on_log: Callable[[t.RelayedLog], None] | None = None
    on_progress: Callable[[t.CallProgress], None] | None = None
    host_protocol_version: str = ""


def _start(
    request: mcp_pool_pb2.CallToolRequest, relay: CallRelay | SyncCallRelay
) -> mcp_pool_pb2.CallToolRelayRequest:
    return mcp_pool_pb2.CallToolRelayRequest(
        start=mcp_pool_pb2.CallToolRelayStart(
            call=request,
            host_capabilities_json=relay.host_capabilities_json,
            host_protocol_version=relay.host_protocol_version,
        )
    )


def _failed(relayed: t.RelayedRequest, err: Exception) -> t.RelayAnswer:
    return t.RelayAnswer.error(relayed.id, INTERNAL_ERROR, f"the host's answer failed ({type(err).__name__})")


def _answer(answer: t.RelayAnswer) -> mcp_pool_pb2.CallToolRelayRequest:
    return mcp_pool_pb2.CallToolRelayRequest(answer=wire.relay_answer_pb(answer))


@dataclass(frozen=True, slots=True)
class RelayRpc:
    """One ``CallToolRelay``: the pool's stub (aio or blocking), the call, the RPC's timeout and
    metadata, and the method's name for errors."""

    stub: Any
    request: mcp_pool_pb2.CallToolRequest
    timeout: float | None
    metadata: Any
    method: str


async def relay_call(rpc: RelayRpc, relay: CallRelay) -> mcp_pool_pb2.CallToolResponse:
    """Runs ``CallToolRelay`` on an aio stub and returns the result message.

    Raises:
        ToolscoutClientError: the RPC failed (translated from its status, as for CallTool).
        OutcomeUnknownError: the stream ended without a result.
    """
    call = rpc.stub.CallToolRelay(timeout=rpc.timeout, metadata=rpc.metadata)
    method = rpc.method
    finished = False
    writing = asyncio.Lock()
    answering: set[asyncio.Task[None]] = set()

    async def answer(relayed: t.RelayedRequest) -> None:
        try:
            reply = await relay.on_request(relayed)
        except Exception as err:
            # Any failure of the host's side is an error answer to the server.
            reply = _failed(relayed, err)
        async with writing:
            await call.write(_answer(reply))

    try:
        await call.write(_start(rpc.request, relay))
        while True:
            event = await call.read()
            if event is grpc.aio.EOF:
                break
            kind = event.WhichOneof("event")
            if kind == "result":
                result: mcp_pool_pb2.CallToolResponse = event.result
                # Ends the caller's side: the pool finishes the RPC as a success (a cancel would
                # count every relayed call as cancelled).
                await call.done_writing()
                finished = True
                return result
            if kind == "request":
                task = asyncio.ensure_future(answer(wire.relayed_request(event.request)))
                answering.add(task)
                task.add_done_callback(answering.discard)
            elif kind == "log" and relay.on_log is not None:
                await relay.on_log(wire.relayed_log(event.log))
            elif kind == "progress" and relay.on_progress is not None:
                await relay.on_progress(wire.call_progress(event.progress))
    except grpc.aio.AioRpcError as err:
        raise translate_rpc_error(err, method=method) from err
    finally:
        for task in answering:
            task.cancel()
        if not finished:
            # Ended early (cancelled, a callback failed): end the call on the pool too.
            call.cancel()
    raise OutcomeUnknownError(_NO_RESULT, code=grpc.StatusCode.ABORTED, method=method)


def relay_call_sync(rpc: RelayRpc, relay: SyncCallRelay) -> mcp_pool_pb2.CallToolResponse:
    """:func:`relay_call` for a blocking stub.

    Raises:
        ToolscoutClientError: the RPC failed (translated from its status, as for CallTool).
        OutcomeUnknownError: the stream ended without a result.
    """
    outgoing: queue.SimpleQueue[mcp_pool_pb2.CallToolRelayRequest | None] = queue.SimpleQueue()
    outgoing.put(_start(rpc.request, relay))
    method = rpc.method

    def messages() -> Iterator[mcp_pool_pb2.CallToolRelayRequest]:
        while (message := outgoing.get()) is not None:
            yield message

    events = rpc.stub.CallToolRelay(messages(), timeout=rpc.timeout, metadata=rpc.metadata)
    finished = False
    try:
        for event in events:
            kind = event.WhichOneof("event")
            if kind == "result":
                result: mcp_pool_pb2.CallToolResponse = event.result
                outgoing.put(None)  # the caller's side ends: the RPC finishes as a success
                finished = True
                return result
            if kind == "request":
                relayed = wire.relayed_request(event.request)
                try:
                    reply = relay.on_request(relayed)
                except Exception as err:
                    # Any failure of the host's side is an error answer to the server.
                    reply = _failed(relayed, err)
                outgoing.put(_answer(reply))
            elif kind == "log" and relay.on_log is not None:
                relay.on_log(wire.relayed_log(event.log))
            elif kind == "progress" and relay.on_progress is not None:
                relay.on_progress(wire.call_progress(event.progress))
    except grpc.RpcError as err:
        raise translate_rpc_error(err, method=method) from err
    finally:
        if not finished:
            outgoing.put(None)
            events.cancel()
    raise OutcomeUnknownError(_NO_RESULT, code=grpc.StatusCode.ABORTED, method=method)
