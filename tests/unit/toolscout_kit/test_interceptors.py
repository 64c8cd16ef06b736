"""The error and shutdown interceptors when the caller is gone: no abort, no traceback, no leak."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest

from toolscout_kit.interceptor_chain import Hooks, chained, wrapped
from toolscout_kit.interceptors import ErrorInterceptor, ShutdownInterceptor


class _GoneContext:
    """A servicer context whose connection went away: gRPC refuses to send anything on it."""

    def __init__(self, *, cancelled: bool) -> None:
        self._cancelled = cancelled
        self.aborts: list[Any] = []

    def cancelled(self) -> bool:
        return self._cancelled

    def trailing_metadata(self) -> tuple[tuple[str, str], ...]:
        return ()

    async def abort(
        self, code: grpc.StatusCode, details: str, trailing_metadata: tuple[tuple[str, str], ...] = ()
    ) -> None:
        self.aborts.append(code)
        raise grpc.aio.InternalError("Failed execute_batch")


@pytest.mark.parametrize("cancelled", [True, False])
async def test_a_failure_to_write_to_a_gone_caller_is_not_reported_as_a_bug(
    cancelled: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    async def watch(request: Any, context: Any) -> None:
        raise grpc.aio.InternalError('Failed "execute_batch"')  # context.write on a closed stream

    wrapped = ErrorInterceptor()._around(watch, "/grpc.health.v1.Health/Watch")
    context = _GoneContext(cancelled=cancelled)
    assert await wrapped(None, context) is None
    assert context.aborts == []
    assert "unhandled exception" not in capsys.readouterr().out


async def test_shutdown_of_a_stream_whose_caller_left_sends_nothing_and_leaks_no_task(
    caplog: pytest.LogCaptureFixture,
) -> None:
    shutdown = asyncio.Event()
    method = "/grpc.health.v1.Health/Watch"
    started = asyncio.Event()

    async def watch(request: Any, context: Any) -> None:
        started.set()
        await asyncio.Event().wait()

    wrapped = ShutdownInterceptor(shutdown, frozenset({method}))._around(watch, method)
    context = _GoneContext(cancelled=False)
    call = asyncio.ensure_future(wrapped(None, context))
    await started.wait()
    shutdown.set()
    assert await asyncio.wait_for(call, 10) is None  # the abort could not be sent: swallowed
    assert context.aborts == [grpc.StatusCode.UNAVAILABLE]
    assert "never retrieved" not in caplog.text


async def test_every_interceptor_closes_the_stream_it_wraps_as_soon_as_its_caller_stops() -> None:
    closed: list[str] = []

    async def watch(request: Any, context: Any) -> Any:
        try:
            while True:
                yield "item"
        finally:
            closed.append("watch")

    method = "/toolscout.mcp_pool.v1.McpPool/WatchCatalog"
    wrapped = ErrorInterceptor()._around(
        ShutdownInterceptor(asyncio.Event(), frozenset({method}))._around(watch, method), method
    )
    stream = wrapped(None, _GoneContext(cancelled=False))
    assert await anext(stream) == "item"
    await stream.aclose()
    assert closed == ["watch"]  # at once, not whenever the abandoned generator is collected


class _Failing(Exception):
    pass


def _recording_links(
    events: list[str], count: int, fail_enter: int, fail_leave: int, handles: int
) -> list[Hooks]:
    """``count`` links that record what they see; link ``fail_enter`` raises on the way in, link
    ``fail_leave`` raises on the way out, link ``handles`` handles any exception."""

    def link(index: int) -> Hooks:
        async def enter(request: Any, context: Any) -> tuple[Any, Any]:
            events.append(f"enter {index}")
            if index == fail_enter:
                raise _Failing(f"enter {index}")
            return f"{request}+{index}", f"state {index}"

        async def leave(context: Any, state: Any, exc: BaseException | None) -> bool:
            events.append(f"leave {index} {state} {exc!s}")
            if index == fail_leave:
                raise _Failing(f"leave {index}")
            return exc is not None and index == handles

        return Hooks(enter=enter, leave=leave)

    return [link(i) for i in range(count)]


async def _outcome(wrapped: Any) -> Any:
    try:
        return ("returned", await wrapped("req", None))
    except _Failing as exc:
        return ("raised", str(exc))


@pytest.mark.parametrize("behaviour_fails", [False, True])
@pytest.mark.parametrize("fail_enter", [-1, 0, 1, 2])
@pytest.mark.parametrize("fail_leave", [-1, 0, 1, 2])
@pytest.mark.parametrize("handles", [-1, 0, 1, 2])
async def test_a_chain_in_one_wrapper_behaves_as_its_links_nested(
    behaviour_fails: bool, fail_enter: int, fail_leave: int, handles: int
) -> None:
    async def behaviour(request: Any, context: Any) -> Any:
        events.append(f"behaviour {request}")
        if behaviour_fails:
            raise _Failing("behaviour")
        return f"reply to {request}"

    verdicts = []
    for in_one in (True, False):
        events: list[str] = []
        links = _recording_links(events, 3, fail_enter, fail_leave, handles)
        if in_one:
            behavior = chained(behaviour, links)
        else:
            behavior = behaviour
            for hooks in reversed(links):
                behavior = wrapped(behavior, hooks)
        verdicts.append((await _outcome(behavior), events))
    assert verdicts[0] == verdicts[1]


async def test_a_method_left_as_generated_is_unimplemented_not_an_internal_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A servicer that does not offer a method (a fake, an older service) answers UNIMPLEMENTED, which
    the client library reads as "not offered" (the pool's call stream falls back to CallTool)."""

    class _Context(_GoneContext):
        def cancelled(self) -> bool:
            return False

        async def abort(
            self, code: grpc.StatusCode, details: str, trailing_metadata: tuple[tuple[str, str], ...] = ()
        ) -> None:
            self.aborts.append((code, details))
            raise grpc.aio.AbortError()

    async def generated(request: Any, context: Any) -> None:
        raise NotImplementedError("Method not implemented!")

    context = _Context(cancelled=False)
    with pytest.raises(grpc.aio.AbortError):
        await ErrorInterceptor()._around(generated, "/toolscout.mcp_pool.v1.McpPool/CallToolStream")(
            None, context
        )
    assert context.aborts == [(grpc.StatusCode.UNIMPLEMENTED, "method not implemented")]
    assert "unhandled exception" not in capsys.readouterr().out
