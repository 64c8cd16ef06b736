"""The machinery of the kit's server interceptors: what one does around a method (:class:`Hooks`),
the one wrapper that applies it to unary and streaming methods alike (:func:`wrapped`), and
:class:`InterceptorChain`, which runs a whole chain as one interceptor: gRPC resolves one
interceptor per RPC instead of one per link, and a unary method gets one wrapper that runs every
link's hooks in order (:func:`chained`) instead of one coroutine layer per link. The interceptors
themselves are in :mod:`toolscout_kit.interceptors`.
"""

from __future__ import annotations

import abc
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

__all__ = [
    "Behavior",
    "Deserializer",
    "Enter",
    "Hooks",
    "InterceptorChain",
    "Leave",
    "Link",
    "Step",
    "WrappingInterceptor",
    "chained",
    "wrapped",
]

Behavior = Callable[[Any, grpc.aio.ServicerContext], Any]
Deserializer = Callable[[bytes], Any] | None
# enter(request, context) -> (the request the behaviour gets, state for leave)
Enter = Callable[[Any, grpc.aio.ServicerContext], Awaitable[tuple[Any, Any]]]
# leave(context, state, exception or None) -> True when the exception is handled (the RPC then ends
# without a reply: None, or the end of the stream)
Leave = Callable[[grpc.aio.ServicerContext, Any, BaseException | None], Awaitable[bool]]
# step(awaitable, context) -> its result: runs each unit of work (the whole unary call, or each item
# of a stream)
Step = Callable[[Awaitable[Any], grpc.aio.ServicerContext], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Hooks:
    """What an interceptor does around one method's behaviour; every part is optional."""

    enter: Enter | None = None
    leave: Leave | None = None
    step: Step | None = None


def wrapped(behavior: Behavior, hooks: Hooks) -> Behavior:
    """``behavior`` with ``hooks`` around it: the one wrapper of every interceptor, for unary
    methods (coroutines, and streams written with ``context.write``) and async-generator streams."""
    enter, leave, step = hooks.enter, hooks.leave, hooks.step

    if inspect.isasyncgenfunction(behavior):

        async def stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            state = None
            if enter is not None:
                request, state = await enter(request, context)
            try:
                items = behavior(request, context)
                try:
                    while True:
                        try:
                            item = await (anext(items) if step is None else step(anext(items), context))
                        except StopAsyncIteration:
                            break
                        yield item
                finally:
                    await items.aclose()
            except BaseException as exc:
                if leave is None or not await leave(context, state, exc):
                    raise
            else:
                if leave is not None:
                    await leave(context, state, None)

        return stream

    async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
        state = None
        if enter is not None:
            request, state = await enter(request, context)
        try:
            work = behavior(request, context)
            result = await (work if step is None else step(work, context))
        except BaseException as exc:
            if leave is None or not await leave(context, state, exc):
                raise
            return None
        if leave is not None:
            await leave(context, state, None)
        return result

    return unary


def chained(behavior: Behavior, links: Sequence[Hooks]) -> Behavior:
    """``behavior`` inside every link of ``links`` (outermost first), as :func:`wrapped` applied
    once per link from the innermost out would give it, in one coroutine for a unary method.

    The same rules hold per link: a link whose ``enter`` ran gets its ``leave``, with the
    exception that left the links inside it (a ``leave`` that raises passes its own exception
    outwards); a ``leave`` that handles an exception ends the RPC without a reply, and the links
    outside it see a normal return. Streams, and links with a ``step``, are nested as before."""
    if not links:
        return behavior
    if len(links) == 1 or inspect.isasyncgenfunction(behavior) or any(h.step is not None for h in links):
        for hooks in reversed(links):
            behavior = wrapped(behavior, hooks)
        return behavior
    enters = tuple(h.enter for h in links)
    leaves = tuple(h.leave for h in links)

    async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
        states: list[Any] = []
        failure: BaseException | None = None
        result = None
        try:
            for enter in enters:
                state = None
                if enter is not None:
                    request, state = await enter(request, context)
                states.append(state)
            result = await behavior(request, context)
        except BaseException as exc:
            failure = exc
        for index in range(len(states) - 1, -1, -1):
            leave = leaves[index]
            if leave is None:
                continue
            try:
                handled = await leave(context, states[index], failure)
            except BaseException as exc:
                failure = exc
                continue
            if failure is not None and handled:
                failure, result = None, None
        if failure is not None:
            raise failure
        return result

    return unary


_MAKERS = (
    ("unary_unary", grpc.unary_unary_rpc_method_handler),
    ("unary_stream", grpc.unary_stream_rpc_method_handler),
    ("stream_unary", grpc.stream_unary_rpc_method_handler),
    ("stream_stream", grpc.stream_stream_rpc_method_handler),
)


class WrappingInterceptor(grpc.aio.ServerInterceptor, abc.ABC):
    """Wraps each method's behaviour once; the wrapped handler is reused for every later call."""

    # Unary requests reach the hooks as raw bytes (gRPC is given no deserializer).
    decodes = False

    def __init__(self) -> None:
        # method -> (the handler gRPC gave us, our wrapped copy). Rewrapping per call cost more
        # than the interceptors' own work on hot RPCs (bench/pool_latency.py).
        self._wrapped: dict[str, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}

    @abc.abstractmethod
    def _around(self, behavior: Behavior, method: str, deserializer: Deserializer = None) -> Behavior:
        """``behavior`` wrapped with this interceptor's work."""

    def _rewrap(self, handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
        kind, make = next((k, m) for k, m in _MAKERS if getattr(handler, k) is not None)
        deserializer = handler.request_deserializer
        raw = self.decodes and kind.startswith("unary_") and deserializer is not None
        return make(
            self._around(getattr(handler, kind), method, deserializer if raw else None),
            request_deserializer=None if raw else deserializer,
            response_serializer=handler.response_serializer,
        )

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        method = handler_call_details.method
        cached = self._wrapped.get(method)
        if cached is not None and cached[0] is handler:
            return cached[1]
        rewrapped = self._rewrap(handler, method)
        self._wrapped[method] = (handler, rewrapped)
        return rewrapped


class Link(WrappingInterceptor):
    """One interceptor that says its work as :class:`Hooks` (the kit's interceptors): it runs alone,
    or as a link of an :class:`InterceptorChain`."""

    @abc.abstractmethod
    def _hooks(self, method: str, deserializer: Deserializer) -> Hooks | None:
        """This interceptor's work around ``method`` (None: the behaviour is left as it is).
        ``deserializer`` is given only to an interceptor that ``decodes``."""

    def _around(self, behavior: Behavior, method: str, deserializer: Deserializer = None) -> Behavior:
        hooks = self._hooks(method, deserializer)
        return behavior if hooks is None else wrapped(behavior, hooks)


class InterceptorChain(WrappingInterceptor):
    """``links`` (outermost first) as one interceptor: each method is wrapped once with the hooks
    of every link (:func:`chained`), as gRPC would run the links one inside the other."""

    def __init__(self, links: Sequence[Link]) -> None:
        super().__init__()
        self._links = tuple(links)
        # Requests are decoded by the link that decodes (the innermost, by the rule above).
        self.decodes = any(link.decodes for link in self._links)

    def _around(self, behavior: Behavior, method: str, deserializer: Deserializer = None) -> Behavior:
        links = [link._hooks(method, deserializer if link.decodes else None) for link in self._links]
        return chained(behavior, [hooks for hooks in links if hooks is not None])
