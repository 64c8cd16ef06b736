"""Requests of an MCP server during a call, routed to the host whose call caused them.

The pool keeps one session per server, and many callers' calls run on it at once. A server may
ask the client, during a call, to sample an LLM (``sampling/createMessage``), to ask the user
(``elicitation/create``, form or URL mode) or for its roots (``roots/list``), and it may log
(``notifications/message``). :class:`CallRouter` (one per connection) gives the SDK's client
session its callbacks for these and finds the call each one belongs to:

* Every call registers itself for the time it runs (:meth:`CallRouter.calling`), with its
  :class:`HostRelay` or with none (its host relays nothing). The registration is also put in a
  context variable of the calling task. The SDK runs the handler of a message in the context of
  the task that delivered it, and on streamable HTTP the answer stream of a ``tools/call`` POST is
  read by a task started from the call's own context: a request or log message the server sends
  on that stream (the spec's "related to the originating request") finds its call there.
  :func:`context_relay` keeps that context across the connection's forwarder.
* On stdio and SSE nothing on the wire ties a request to a call. The request goes to the one call
  in flight on that connection, and is refused when several are (never guessed). Over streamable
  HTTP a request outside any call's stream (the GET stream) is refused too.

A request whose host did not declare the capability (sampling, elicitation in that mode, roots)
is refused with -32601 (method not found) without reaching the host. The SDK's client session
declares every capability it has a callback for at ``initialize``, so a handshake-era server
sees all three; at 2026-07-28 capabilities travel per request, and the pool declares none there
(:func:`without_host_capabilities`), except on a call whose caller relays ``input_required``
results (the way that revision asks): that call declares exactly its host's capabilities
(:func:`declaring`). A handshake-era host's call to a remote server the pool speaks
2026-07-28 with runs on a session of its own in the host's era, opened for the call and declaring
exactly the host's capabilities (:func:`wants_host_session`).
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import json
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Protocol, TypedDict, TypeVar

import anyio
import mcp_types as types
from anyio.abc import ObjectReceiveStream
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import TypeAdapter, ValidationError
from toolscout.client import CallProgress, InputRoundRequest, RelayAnswer, RelayedLog, RelayedRequest

from mcp_pool_svc.errors import InvalidToolArgumentsError
from toolscout_kit.json_text import JsonTextError, parse_json_object
from toolscout_kit.logging import get_logger

__all__ = [
    "CallRouter",
    "ContextRelayStream",
    "HostRelay",
    "HostSession",
    "InputRound",
    "QueuedRelay",
    "RelayEvent",
    "RoundArguments",
    "context_relay",
    "declaring",
    "host_capabilities",
    "wants_host_session",
    "without_host_capabilities",
]

log = get_logger(__name__)
R = TypeVar("R")

RelayEvent = RelayedRequest | RelayedLog | CallProgress

_SAMPLING_RESULT: TypeAdapter[types.CreateMessageResult | types.CreateMessageResultWithTools] = TypeAdapter(
    types.CreateMessageResult | types.CreateMessageResultWithTools
)
# The capabilities a host declares that make the server's requests reach it.
_RELAYED_CAPABILITIES = ("sampling", "elicitation", "roots")


class HostRelay(Protocol):
    """The host side of one relayed call, as the pool sees it."""

    capabilities: types.ClientCapabilities
    # The MCP revision the host speaks ("" = unknown).
    protocol_version: str

    async def ask(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """The host's result for a request of the server.

        Raises:
            MCPError: the host answered with an error, or went away.
        """
        ...

    def log(self, params: types.LoggingMessageNotificationParams) -> None: ...


@dataclass(frozen=True, slots=True)
class HostSession:
    """A session of the pool opened for one host's call, in the host's era (``initialize``) and
    declaring exactly its capabilities (see :func:`wants_host_session`)."""

    capabilities: types.ClientCapabilities


def wants_host_session(relay: HostRelay | None, server_modern: bool, remote: bool) -> HostSession | None:
    """The session a relayed call needs of its own, or None when the server's pooled one serves.

    A handshake-era host whose server the pool speaks 2026-07-28 with: that revision has no
    requests from the server to the client, so the host's sampling, elicitation and roots can only
    be asked for on a handshake-era session. Only a remote server can have one more session (a
    stdio server is one process, with one session).
    """
    if relay is None or not server_modern or not remote:
        return None
    if relay.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
        return None
    return HostSession(relay.capabilities)


def host_capabilities(text: str) -> types.ClientCapabilities:
    """The host's capabilities from their JSON text (none when empty or not valid)."""
    if not text:
        return types.ClientCapabilities()
    try:
        return types.ClientCapabilities.model_validate_json(text)
    except ValidationError:
        return types.ClientCapabilities()


class QueuedRelay:
    """A :class:`HostRelay` over a queue of events (requests, logs, progress) that a stream
    carries to the caller, and the answers it carries back (:meth:`answer`)."""

    def __init__(self, capabilities: types.ClientCapabilities, protocol_version: str = "") -> None:
        self.capabilities = capabilities
        self.protocol_version = protocol_version
        self.events: asyncio.Queue[RelayEvent] = asyncio.Queue()
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[RelayAnswer]] = {}
        self._closed = False

    async def ask(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        if self._closed:
            raise MCPError(types.INTERNAL_ERROR, "the host of this call is gone")
        request_id = next(self._ids)
        waiting: asyncio.Future[RelayAnswer] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = waiting
        self.events.put_nowait(
            RelayedRequest(request_id, method, json.dumps(params, ensure_ascii=False, separators=(",", ":")))
        )
        try:
            answer = await waiting
        finally:
            self._waiting.pop(request_id, None)
        if answer.error_code:
            raise MCPError(answer.error_code, answer.error_message)
        try:
            result = json.loads(answer.result_json or "{}")
        except ValueError:
            result = None
        if not isinstance(result, dict):
            raise MCPError(types.INTERNAL_ERROR, "the host's answer was not a JSON object")
        return result

    def answer(self, answer: RelayAnswer) -> None:
        """Hands the caller's answer to the request it names (unknown or late ones are dropped)."""
        waiting = self._waiting.get(answer.id)
        if waiting is not None and not waiting.done():
            waiting.set_result(answer)

    def log(self, params: types.LoggingMessageNotificationParams) -> None:
        data = json.dumps(params.data, ensure_ascii=False, separators=(",", ":"), default=str)
        self.events.put_nowait(RelayedLog(params.level, params.logger or "", data))

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.events.put_nowait(CallProgress(progress, total, message or ""))

    def close(self, grace: float = 0.0) -> None:
        """The caller is gone: later requests get an error, and so do those still waiting for it,
        after ``grace`` seconds (a cancelled call's server withdraws its requests meanwhile: had
        they been refused at once, the refusal could reach it before the cancellation, and the
        tool would end on the refusal instead of being cancelled)."""
        self._closed = True
        if grace > 0 and self._waiting:
            asyncio.get_running_loop().call_later(grace, self._refuse_waiting)
        else:
            self._refuse_waiting()

    def _refuse_waiting(self) -> None:
        for request_id, waiting in list(self._waiting.items()):
            if not waiting.done():
                waiting.set_result(
                    RelayAnswer.error(request_id, types.INTERNAL_ERROR, "the host of this call is gone")
                )


@dataclass(eq=False, slots=True)
class _InFlight:
    """One call running on a connection, with its host's relay (None: it relays nothing)."""

    router: CallRouter
    relay: HostRelay | None


_CURRENT: contextvars.ContextVar[_InFlight | None] = contextvars.ContextVar(
    "toolscout_pool_call", default=None
)


class _Calling:
    """A call registered on its connection while it runs (a class, not a generator: entered on
    every call)."""

    __slots__ = ("_entry", "_in_flight", "_token")

    def __init__(self, entry: _InFlight, in_flight: set[_InFlight]) -> None:
        self._entry = entry
        self._in_flight = in_flight

    def __enter__(self) -> None:
        self._in_flight.add(self._entry)
        self._token = _CURRENT.set(self._entry)

    def __exit__(self, *exc: object) -> None:
        _CURRENT.reset(self._token)
        self._in_flight.discard(self._entry)


def _refused(message: str) -> types.ErrorData:
    return types.ErrorData(code=types.METHOD_NOT_FOUND, message=message)


class CallRouter:
    """The calls in flight on one connection, and the session callbacks that route the server's
    requests and log messages to them.

    ``request_streams``: the transport carries each request's messages on a stream of its own
    (streamable HTTP), so a message outside every call's stream belongs to none.
    """

    def __init__(self, *, request_streams: bool) -> None:
        self._request_streams = request_streams
        self._in_flight: set[_InFlight] = set()

    def calling(self, relay: HostRelay | None) -> AbstractContextManager[None]:
        """Registers a call for the time it runs on this connection (in this task's context)."""
        return _Calling(_InFlight(self, relay), self._in_flight)

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def _caller(self) -> _InFlight | None:
        entry = _CURRENT.get()
        if entry is not None and entry.router is self:
            return entry if entry in self._in_flight else None
        if not self._request_streams and len(self._in_flight) == 1:
            return next(iter(self._in_flight))
        return None

    async def _ask(
        self, method: str, params: types.RequestParams | None, wants: str, allowed: bool | None
    ) -> dict[str, Any] | types.ErrorData:
        entry = self._caller()
        if entry is None:
            log.info("server_request_refused", method=method, reason="not tied to one call")
            return _refused(f"{method} is answered only during the tool call that needs it")
        relay = entry.relay
        if relay is None or not allowed:
            return _refused(f"the host of this call did not declare {wants}")
        dumped = (
            params.model_dump(by_alias=True, mode="json", exclude_none=True) if params is not None else {}
        )
        try:
            return await relay.ask(method, dumped)
        except MCPError as err:
            return types.ErrorData(code=err.code, message=err.message, data=err.error.data)

    async def sampling(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData:
        """The SDK's sampling callback."""
        caps = self._relay_capabilities()
        sampling = caps.sampling if caps is not None else None
        allowed = sampling is not None and (not params.tools or sampling.tools is not None)
        answer = await self._ask("sampling/createMessage", params, "sampling", allowed)
        return _parsed(answer, _SAMPLING_RESULT)

    async def elicitation(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        """The SDK's elicitation callback (form and URL mode)."""
        caps = self._relay_capabilities()
        elicitation = caps.elicitation if caps is not None else None
        url = isinstance(params, types.ElicitRequestURLParams)
        allowed = elicitation is not None and (
            elicitation.url is not None
            if url
            # A bare `elicitation: {}` means form mode (the spec's backwards compatibility).
            else elicitation.form is not None or elicitation.url is None
        )
        answer = await self._ask(
            "elicitation/create", params, "URL-mode elicitation" if url else "elicitation", allowed
        )
        return _parsed(answer, TypeAdapter(types.ElicitResult))

    async def list_roots(self, context: ClientRequestContext) -> types.ListRootsResult | types.ErrorData:
        """The SDK's roots callback."""
        caps = self._relay_capabilities()
        answer = await self._ask("roots/list", None, "roots", caps is not None and caps.roots is not None)
        return _parsed(answer, TypeAdapter(types.ListRootsResult))

    async def logged(self, params: types.LoggingMessageNotificationParams) -> None:
        """The SDK's logging callback: the log message goes to the host of its call, if any."""
        entry = self._caller()
        if entry is not None and entry.relay is not None:
            entry.relay.log(params)

    def _relay_capabilities(self) -> types.ClientCapabilities | None:
        entry = self._caller()
        return entry.relay.capabilities if entry is not None and entry.relay is not None else None


def _parsed(answer: dict[str, Any] | types.ErrorData, adapter: TypeAdapter[R]) -> R | types.ErrorData:
    if isinstance(answer, types.ErrorData):
        return answer
    try:
        return adapter.validate_python(answer, by_name=False)
    except ValidationError:
        return types.ErrorData(code=types.INTERNAL_ERROR, message="the host's answer was not a valid result")


_INPUT_RESPONSES: TypeAdapter[types.InputResponses] = TypeAdapter(types.InputResponses)


class RoundArguments(TypedDict):
    """The retry arguments of the ``mcp`` client session's requests that may answer ``input_required``."""

    input_responses: types.InputResponses | None
    request_state: str | None
    allow_input_required: bool


@dataclass(frozen=True, slots=True)
class InputRound:
    """A request's part in an MCP 2026-07-28 multi-round-trip (``tools/call``, ``resources/read``,
    ``prompts/get``), checked: whether the caller relays ``input_required`` results, a retry's
    host answers and the server's own state, and the host capabilities declared on the request."""

    accept: bool = False
    input_responses: types.InputResponses | None = None
    request_state: str | None = None
    host_capabilities: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, request: InputRoundRequest) -> InputRound:
        """The round ``request`` carries.

        Raises:
            InvalidToolArgumentsError: ``inputResponses`` are not a JSON object of MCP input
                responses, or the host capabilities are not a JSON object.
        """
        try:
            capabilities = parse_json_object(request.host_capabilities_json, "host capabilities")
        except JsonTextError as err:
            raise InvalidToolArgumentsError(err.message) from None
        return cls(
            request.accept_input_required,
            _input_responses(request.input_responses_json),
            request.request_state or None,
            capabilities,
        )

    def sdk_arguments(self) -> RoundArguments:
        """The ``mcp`` client session's keyword arguments of this round (``read_resource``,
        ``get_prompt``): an ``input_required`` answer is returned, never raised."""
        return RoundArguments(
            input_responses=self.input_responses, request_state=self.request_state, allow_input_required=True
        )

    def declared(self) -> AbstractContextManager[None]:
        """The scope to send the request in: declaring the host's capabilities when the caller
        relays ``input_required`` results (:func:`declaring`), else declaring none."""
        return declaring(self.host_capabilities) if self.accept else nullcontext()


def _input_responses(text: str) -> types.InputResponses | None:
    """A retry's ``inputResponses`` (JSON object text, empty: none) as the SDK's types.

    Raises:
        InvalidToolArgumentsError: not a JSON object of MCP input responses.
    """
    if not text:
        return None
    try:
        value = parse_json_object(text, "inputResponses")
    except JsonTextError as err:
        raise InvalidToolArgumentsError(err.message) from None
    try:
        return _INPUT_RESPONSES.validate_python(value)
    except ValidationError:
        raise InvalidToolArgumentsError("inputResponses are not MCP input responses") from None


_DECLARED: contextvars.ContextVar[Mapping[str, Any] | None] = contextvars.ContextVar(
    "toolscout_declared", default=None
)


@contextmanager
def declaring(capabilities: Mapping[str, Any]) -> Iterator[None]:
    """Within: 2026-07-28 requests of this task declare these of the host's sampling, elicitation
    and roots capabilities (MCP wire form) instead of none (:func:`without_host_capabilities`)."""
    token = _DECLARED.set({key: capabilities[key] for key in _RELAYED_CAPABILITIES if key in capabilities})
    try:
        yield
    finally:
        _DECLARED.reset(token)


def without_host_capabilities(meta: Any) -> Any:
    """A 2026-07-28 request's ``_meta`` with the sampling, elicitation and roots capabilities the
    session declares replaced by the calling host's (:func:`declaring`; none outside it, see the
    module's docstring); anything else unchanged."""
    if not isinstance(meta, dict):
        return meta
    caps = meta.get(types.CLIENT_CAPABILITIES_META_KEY)
    declared = _DECLARED.get() or {}
    if not isinstance(caps, dict):
        return meta
    if declared:
        kept = {key: value for key, value in caps.items() if key not in _RELAYED_CAPABILITIES}
        return {**meta, types.CLIENT_CAPABILITIES_META_KEY: {**kept, **declared}}
    # Outside a host's call: the session's own capabilities, the same dict on every request of a
    # session (its stamp's), stripped once per dict.
    stripped = _STRIPPED.get(id(caps))
    if stripped is None or stripped[0] is not caps:
        if not any(key in caps for key in _RELAYED_CAPABILITIES):
            return meta
        if len(_STRIPPED) >= _STRIPPED_KEPT:
            _STRIPPED.clear()
        kept = {key: value for key, value in caps.items() if key not in _RELAYED_CAPABILITIES}
        stripped = _STRIPPED[id(caps)] = (caps, kept)
    return {**meta, types.CLIENT_CAPABILITIES_META_KEY: stripped[1]}


# The capabilities without the relayed ones, by the identity of the dict they were made from (kept
# with it, so that the identity is not reused); cleared when it holds this many.
_STRIPPED: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}
_STRIPPED_KEPT = 4096


class ContextRelayStream:
    """The receiving end of a forwarder that keeps each message's sender context.

    The SDK's dispatcher runs a message's handler in the context its read stream names
    (``last_context``, which the SDK's own context streams set); a plain memory stream between
    the transport and the session would lose it, and with it the call a request belongs to.
    """

    def __init__(self, inner: ObjectReceiveStream[tuple[contextvars.Context | None, Any]]) -> None:
        self._inner = inner
        self.last_context: contextvars.Context | None = None

    async def receive(self) -> Any:
        context, item = await self._inner.receive()
        self.last_context = context
        return item

    def __aiter__(self) -> ContextRelayStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> ContextRelayStream:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


def context_relay(
    buffer: int,
) -> tuple[anyio.abc.ObjectSendStream[tuple[contextvars.Context | None, Any]], ContextRelayStream]:
    """A forwarder's stream pair: send ``(sender context, item)``, receive items."""
    send, receive = anyio.create_memory_object_stream[tuple[contextvars.Context | None, Any]](buffer)
    return send, ContextRelayStream(receive)
