"""A fake MCP pool for tests of code that calls one through this library (as httpx ships MockTransport).

:class:`FakePool` is a real ``toolscout.mcp_pool.v1.McpPool`` gRPC service that answers from plain
values: the tools it runs, the server states it reports, and what each call returns. It keeps the
pool's contracts that callers depend on: a call for a server another shard runs is refused before
anything runs, as ``UNAVAILABLE`` with the pool's explicit not-sent mark
(:data:`~toolscout.client.NOT_SENT_METADATA`) and the owners in the trailing metadata, so a
:class:`~toolscout.client.AsyncShardedPoolClient` routes it on; a down server's calls are refused
the same way; an unknown tool is ``NOT_FOUND``; a tool's own failure is a result with ``is_error``.
It serves the call stream (``CallToolStream``) as the pool does, where the async client sends a
plain call: each call answered as ``CallTool`` answers it, cancelled when its caller gives up.
Results kept behind a handle are read with ``ReadResult`` from :meth:`FakePool.keep`: bound to a
principal and conversation like the pool's (anyone else's read is ``NOT_FOUND``), a page of
characters from ``offset`` (about four per budget token) or the lines containing ``pattern``;
a JMESPath ``path`` is ``INVALID_ARGUMENT`` (the fake does not project JSON).
A :class:`Script` fails the next calls of a method with any status (a transport's unmarked
``UNAVAILABLE``, say) and records what the fake saw::

    from toolscout.client import AsyncPoolClient, Tool
    from toolscout.client.testing import FakePool

    async def test_my_code_calls_the_time_tool() -> None:
        fake = FakePool([Tool("time", "now", "time__now")])
        async with fake.serve() as target, AsyncPoolClient.connect(target) as pool:
            result = await pool.call_tool("time__now", {"tz": "UTC"})
        assert result.text == 'called time__now with {"tz":"UTC"}'
        assert [c.request.llm_name for c in fake.calls] == ["time__now"]

It serves on ``127.0.0.1`` at a free port unless told otherwise. It needs nothing beyond this
library's own dependencies.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import grpc
import grpc.aio

from toolscout.client import wire
from toolscout.client.errors import NOT_SENT_METADATA
from toolscout.client.sharded import SHARD_COUNT_KEY, SHARD_OWNERS_KEY
from toolscout.client.types import (
    CallRequest,
    CallToolResult,
    CatalogSnapshot,
    ContentBlock,
    ReadRequest,
    ResultRead,
    ServerStatus,
    ShardInfo,
    Tool,
    ToolCatalog,
)
from toolscout.mcp_pool.v1 import mcp_pool_pb2, mcp_pool_pb2_grpc

__all__ = ["Answer", "FakePool", "KeptResult", "ReceivedCall", "Script", "echo"]

_SEPARATOR = "__"
# Characters of a page per budget token (the fake counts no tokens).
_CHARS_PER_TOKEN = 4
_DEFAULT_READ_BUDGET = 1000


@dataclass
class Script:
    """Scripted failures and what the fakes saw; one script may serve several fake services.

    Every RPC first counts itself (:attr:`attempts`), records its request, metadata and remaining
    deadline, then fails if a failure is scripted for its method (:meth:`fail`). A stream fails
    after :attr:`stream_fail_after` messages (with :attr:`stream_failure`), and sets
    :attr:`cancelled` when its caller goes away.
    """

    failures: dict[str, list[tuple[Any, str, tuple[tuple[str, str], ...]]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    attempts: Counter[str] = field(default_factory=Counter)
    metadata: dict[str, list[dict[str, str]]] = field(default_factory=lambda: defaultdict(list))
    deadlines: dict[str, float | None] = field(default_factory=dict)
    last_requests: dict[str, Any] = field(default_factory=dict)
    stream_fail_after: int | None = None
    stream_failure: Any = grpc.StatusCode.UNAVAILABLE
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)

    def fail(
        self,
        method: str,
        code: Any,
        times: int = 1,
        details: str = "",
        trailing: tuple[tuple[str, str], ...] = (),
    ) -> None:
        """The next ``times`` calls of ``method`` (``"CallTool"``, ...) fail with ``code`` (and
        ``trailing`` metadata: :data:`NOT_SENT_METADATA` makes an ``UNAVAILABLE`` the pool's own
        "not sent"; without it, it is what gRPC says when a connection dies mid-call)."""
        self.failures[method].extend([(code, details or f"scripted {code.name}", trailing)] * times)

    async def enter(self, method: str, request: Any, context: Any) -> None:
        """Counts and records one call of ``method``; aborts it when a failure is scripted."""
        self.attempts[method] += 1
        self.metadata[method].append(dict(context.invocation_metadata()))
        self.deadlines[method] = context.time_remaining()
        self.last_requests[method] = request
        if self.failures[method]:
            code, details, trailing = self.failures[method].pop(0)
            await context.abort(code, details, trailing_metadata=trailing)

    async def step(self, sent: int, context: Any) -> None:
        """Before message ``sent`` (0-based) of a stream: fails it when scripted to."""
        if self.stream_fail_after == sent:
            await context.abort(self.stream_failure, "stream broke")


@dataclass(frozen=True)
class ReceivedCall:
    """A call the fake received, the seconds its caller's deadline had left, and whether it came
    on the call stream (``CallToolStream``, where the client library sends a plain call) rather
    than as a ``CallTool``."""

    request: CallRequest
    time_remaining: float | None
    streamed: bool = False


class _Aborted(Exception):
    """A call on the stream ended with a status, as ``context.abort`` ends a ``CallTool``."""

    def __init__(self, code: Any, details: str, trailing: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(details)
        self.code, self.details, self.trailing = code, details, trailing

    def answer(self, call_id: int) -> mcp_pool_pb2.CallToolStreamResponse:
        return wire.call_stream_refusal_pb(call_id, self.code, self.details, self.trailing)


class _StreamCall:
    """What one call on the stream sees in place of ``CallTool``'s context: the stream's metadata,
    its own deadline (``deadline_seconds``), and an ``abort`` that ends the call (not the stream)."""

    def __init__(self, context: Any, deadline_seconds: float) -> None:
        self._context = context
        self._deadline = time.monotonic() + deadline_seconds if deadline_seconds > 0 else None

    def invocation_metadata(self) -> Any:
        return self._context.invocation_metadata()

    def time_remaining(self) -> float | None:
        return None if self._deadline is None else max(self._deadline - time.monotonic(), 0.0)

    async def abort(self, code: Any, details: str = "", trailing_metadata: Any = ()) -> None:
        raise _Aborted(code, details, tuple(trailing_metadata))


@dataclass(frozen=True)
class KeptResult:
    """A result the fake keeps behind a handle, for ``principal`` and ``conversation`` only."""

    text: str
    principal: str = ""
    conversation: str = ""
    server: str = ""
    tool: str = ""


# What a call of a tool the fake runs returns (may raise, or wait to be cancelled).
Answer = Callable[[CallRequest, Tool], Awaitable[CallToolResult]]


async def echo(request: CallRequest, tool: Tool) -> CallToolResult:
    """The default answer: ``called <llm name> with <arguments>`` and ``{"ok": true}`` as structured content."""
    text = f"called {tool.llm_name} with {request.arguments_json or '{}'}"
    return CallToolResult(
        content=(ContentBlock("text", text=text),),
        structured_content_json='{"ok":true}',
        server=tool.server,
        tool=tool.name,
        duration_seconds=0.01,
    )


class FakePool(mcp_pool_pb2_grpc.McpPoolServicer):
    """An ``McpPool`` service answering from plain values (see the module docstring).

    ``tools`` are the tools of the servers it runs. ``elsewhere`` maps a server another shard runs
    to ``(owners, shard count)``: its calls are refused, not sent, naming the owners. Calls of a
    server in ``down`` are refused, not sent (the server is not ready). ``answer`` returns each
    call's result (default :func:`echo`). ``mark_not_sent=False`` leaves the not-sent mark off
    every refusal, as a peer that is not a toolscout pool would.
    """

    def __init__(
        self,
        tools: Iterable[Tool] = (),
        *,
        servers: Iterable[ServerStatus] = (),
        catalog_version: str = "v1",
        shard: ShardInfo | None = None,
        elsewhere: Mapping[str, tuple[tuple[int, ...], int]] | None = None,
        down: Iterable[str] = (),
        answer: Answer = echo,
        updates: Iterable[CatalogSnapshot] = (),
        mark_not_sent: bool = True,
        script: Script | None = None,
    ) -> None:
        self.tools = tuple(tools)
        self.servers = tuple(servers)
        self.catalog_version = catalog_version
        self.shard = shard if shard is not None else ShardInfo()
        self.elsewhere = dict(elsewhere or {})
        self.down = set(down)
        self.answer = answer
        self.mark_not_sent = mark_not_sent
        self.script = script if script is not None else Script()
        # Every call received, in order; those refused as not sent (another shard's, a down server's);
        # and the tools of those answered (the ones that "ran").
        self.calls: list[ReceivedCall] = []
        self.refused: list[CallRequest] = []
        self.ran: list[Tool] = []
        # Results kept behind handles (keep) and every ReadResult received.
        self.kept: dict[str, KeptResult] = {}
        self.reads: list[ReadRequest] = []
        # Snapshots every watcher gets after the current one, then each published change.
        self._updates = list(updates)
        self._watchers: set[asyncio.Queue[CatalogSnapshot]] = set()
        self._server: grpc.aio.Server | None = None
        self._stopping = asyncio.Event()

    # --- changing the catalog -----------------------------------------------------------------

    def publish(self, tools: Iterable[Tool], version: str, changed_servers: Iterable[str] = ()) -> None:
        """A new catalog: ListTools answers with it, and every WatchCatalog stream sends it."""
        self.tools, self.catalog_version = tuple(tools), version
        snapshot = CatalogSnapshot(version, self.tools, tuple(changed_servers), self.shard)
        for queue in self._watchers:
            queue.put_nowait(snapshot)

    def keep(self, handle: str, result: KeptResult) -> None:
        """Keeps ``result`` behind ``handle`` for ReadResult (an answer may return the handle)."""
        self.kept[handle] = result

    # --- serving ------------------------------------------------------------------------------

    async def start(self, address: str = "127.0.0.1:0", *, server_credentials: Any = None) -> str:
        """Serves on ``address`` (a free port by default); returns the target to connect to."""
        server = grpc.aio.server()
        mcp_pool_pb2_grpc.add_McpPoolServicer_to_server(self, server)
        self._stopping = asyncio.Event()
        server.add_generic_rpc_handlers((self._health(),))
        host = address.rsplit(":", 1)[0]
        if server_credentials is not None:
            port = server.add_secure_port(address, server_credentials)
        else:
            port = server.add_insecure_port(address)
        await server.start()
        self._server = server
        return f"{host}:{port}"

    async def stop(self, grace: float | None = 0.1) -> None:
        """Stops serving; calls still running get ``grace`` seconds (the clients' health watches
        end at once, so a client that has closed sees no cancelled call)."""
        server, self._server = self._server, None
        if server is not None:
            self._stopping.set()
            await server.stop(grace)

    def _health(self) -> grpc.GenericRpcHandler:
        """grpc.health.v1 answering SERVING, as a real pool does: the clients' channels health-check
        (their service config asks for it), and without it gRPC logs an error for every channel.
        Written out (``HealthCheckResponse{status: SERVING}`` is two bytes) rather than adding
        grpcio-health-checking to the client library for its test double."""
        serving = b"\x08\x01"
        stopping = self._stopping

        async def check(request: bytes, context: Any) -> bytes:
            return serving

        async def watch(request: bytes, context: Any) -> AsyncIterator[bytes]:
            yield serving
            await stopping.wait()

        return grpc.method_handlers_generic_handler(
            "grpc.health.v1.Health",
            {
                "Check": grpc.unary_unary_rpc_method_handler(check),
                "Watch": grpc.unary_stream_rpc_method_handler(watch),
            },
        )

    @asynccontextmanager
    async def serve(self, address: str = "127.0.0.1:0", **kwargs: Any) -> AsyncIterator[str]:
        """:meth:`start` and, on leaving, :meth:`stop`; gives the target."""
        target = await self.start(address, **kwargs)
        try:
            yield target
        finally:
            await self.stop()

    # --- the service --------------------------------------------------------------------------

    async def ListServers(self, request: Any, context: Any) -> mcp_pool_pb2.ListServersResponse:
        await self.script.enter("ListServers", request, context)
        return mcp_pool_pb2.ListServersResponse(
            servers=[wire.server_status_pb(s) for s in self.servers], shard=wire.shard_info_pb(self.shard)
        )

    async def ListTools(self, request: Any, context: Any) -> mcp_pool_pb2.ListToolsResponse:
        await self.script.enter("ListTools", request, context)
        wanted = set(request.servers)
        tools = tuple(t for t in self.tools if not wanted or t.server in wanted)
        return wire.tool_catalog_pb(ToolCatalog(tools, self.catalog_version, self.shard))

    async def CallTool(self, request: Any, context: Any) -> mcp_pool_pb2.CallToolResponse:
        return await self._call(request, context, streamed=False)

    async def CallToolStream(
        self, request_iterator: AsyncIterator[Any], context: Any
    ) -> AsyncIterator[mcp_pool_pb2.CallToolStreamResponse]:
        """The call stream, as the pool serves it: each call answered as ``CallTool`` would answer
        it (a status and trailing metadata in place of a result), in the order the calls end; a
        cancel message cancels its call. Each call counts, records and fails as a ``CallTool``
        (:class:`Script`), as the pool counts and logs it."""
        # Taken at once, as the pool takes it: the client writes nothing before this.
        await context.send_initial_metadata(())
        answers: asyncio.Queue[mcp_pool_pb2.CallToolStreamResponse | None] = asyncio.Queue()
        running: dict[int, asyncio.Task[None]] = {}

        async def run(message: Any) -> None:
            try:
                result = await self._call(
                    message.call, _StreamCall(context, message.deadline_seconds), streamed=True
                )
                answer = mcp_pool_pb2.CallToolStreamResponse(id=message.id, result=result)
            except _Aborted as aborted:
                answer = aborted.answer(message.id)
            except asyncio.CancelledError:
                answer = _Aborted(grpc.StatusCode.CANCELLED, "cancelled by the caller").answer(message.id)
            except Exception as err:  # an answer that raised: what gRPC makes of a handler's error
                answer = _Aborted(grpc.StatusCode.UNKNOWN, f"Unexpected {type(err).__name__}: {err}").answer(
                    message.id
                )
            finally:
                running.pop(message.id, None)
            await answers.put(answer)

        async def read() -> None:
            try:
                async for message in request_iterator:
                    if message.cancel:
                        if (task := running.get(message.id)) is not None:
                            task.cancel()
                    elif message.id not in running:
                        running[message.id] = asyncio.create_task(run(message))
                if running:
                    await asyncio.wait(list(running.values()))
            finally:
                await answers.put(None)  # the caller closed its side and every call was answered

        reader = asyncio.create_task(read())
        try:
            while (answer := await answers.get()) is not None:
                yield answer
        finally:
            reader.cancel()
            for task in list(running.values()):
                task.cancel()

    async def _call(self, request: Any, context: Any, *, streamed: bool) -> mcp_pool_pb2.CallToolResponse:
        await self.script.enter("CallTool", request, context)
        call = wire.call_request(request)
        self.calls.append(ReceivedCall(call, context.time_remaining(), streamed))
        tool = self._tool(call)
        server = call.server or (tool.server if tool is not None else call.llm_name.split(_SEPARATOR, 1)[0])
        if server in self.elsewhere or server in self.down:
            self.refused.append(call)
            await self._refuse(context, server)
        if tool is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"Unknown tool '{call.name}'")
            raise AssertionError("unreachable: abort raises")
        self.ran.append(tool)
        return wire.call_tool_result_pb(await self.answer(call, tool))

    async def ReadResult(self, request: Any, context: Any) -> mcp_pool_pb2.ReadResultResponse:
        await self.script.enter("ReadResult", request, context)
        read = wire.read_request(request)
        self.reads.append(read)
        kept = self.kept.get(read.handle)
        if kept is None or (kept.principal, kept.conversation) != (read.principal, read.conversation):
            await context.abort(grpc.StatusCode.NOT_FOUND, f"no result handle {read.handle!r}")
            raise AssertionError("unreachable: abort raises")
        text, size = kept.text, len(kept.text)
        if read.path:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the fake pool does not project JSON")
        if read.offset < 0 or read.offset > size:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, f"offset {read.offset} is outside the result"
            )
        next_offset = -1
        if read.pattern:
            answer = "\n".join(line for line in text.splitlines() if read.pattern.lower() in line.lower())
        else:
            end = min(read.offset + (read.budget_tokens or _DEFAULT_READ_BUDGET) * _CHARS_PER_TOKEN, size)
            answer, next_offset = text[read.offset : end], (end if end < size else -1)
        out = ResultRead(answer, len(answer) // _CHARS_PER_TOKEN, next_offset, size, kept.server, kept.tool)
        return wire.result_read_pb(out)

    async def WatchCatalog(
        self, request: Any, context: Any
    ) -> AsyncIterator[mcp_pool_pb2.WatchCatalogResponse]:
        await self.script.enter("WatchCatalog", request, context)
        queue: asyncio.Queue[CatalogSnapshot] = asyncio.Queue()
        for update in self._updates:
            queue.put_nowait(update)
        self._watchers.add(queue)
        try:
            sent = 0
            if request.known_version != self.catalog_version:
                await self.script.step(sent, context)
                yield wire.catalog_snapshot_pb(
                    CatalogSnapshot(self.catalog_version, self.tools, (), self.shard)
                )
                sent += 1
            while True:
                update = await queue.get()
                await self.script.step(sent, context)
                yield wire.catalog_snapshot_pb(update)
                sent += 1
        except (asyncio.CancelledError, GeneratorExit):
            # A caller gone while the stream waits for the next snapshot cancels it here; one gone
            # while gRPC is still writing the last snapshot leaves it suspended at ``yield``, and
            # it is closed there afterwards.
            self.script.cancelled.set()
            raise
        finally:
            self._watchers.discard(queue)

    # --- internals ----------------------------------------------------------------------------

    def _tool(self, call: CallRequest) -> Tool | None:
        for tool in self.tools:
            if (call.llm_name and tool.llm_name == call.llm_name) or (
                not call.llm_name and (tool.server, tool.name) == (call.server, call.tool)
            ):
                return tool
        return None

    async def _refuse(self, context: Any, server: str) -> None:
        trailing: tuple[tuple[str, str], ...] = NOT_SENT_METADATA if self.mark_not_sent else ()
        if server in self.elsewhere:
            owners, count = self.elsewhere[server]
            trailing = (
                *trailing,
                (SHARD_OWNERS_KEY, ",".join(map(str, owners))),
                (SHARD_COUNT_KEY, str(count)),
            )
            details = f"MCP server {server!r} runs on another pool shard; the call was not sent"
        else:
            details = f"MCP server {server!r} is reconnecting; the call was not sent"
        await context.abort(grpc.StatusCode.UNAVAILABLE, details, trailing_metadata=trailing)
