"""The old ``toolset_json`` keyword keeps working for one release, with a DeprecationWarning."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from toolscout import client as tc

from tests.support.fake_services import FakeStack, fake_stack

INLINE = '{"servers": {"weather": true}}'
WARNING = "toolset_json is deprecated"


@pytest.fixture
async def stack() -> AsyncIterator[FakeStack]:
    async with fake_stack() as running:
        yield running


def _sent(stack: FakeStack, method: str) -> tuple[str, str]:
    request = stack.state.last_requests[method]
    return request.toolset, request.toolset_json


async def test_every_async_method_still_takes_the_old_keyword_and_warns(stack: FakeStack) -> None:
    async with tc.AsyncToolscoutClient.connect(
        pool=stack.target, discovery=stack.target, orchestrator=stack.target
    ) as ts:
        calls: list[tuple[str, Callable[[], Any]]] = [
            ("PlanTools", lambda: ts.discovery.plan_tools(toolset_json=INLINE)),
            ("SearchTools", lambda: ts.discovery.search_tools("weather", toolset_json=INLINE)),
            ("GetManifest", lambda: ts.discovery.get_manifest(toolset_json=INLINE)),
            ("Chat", lambda: ts.orchestrator.chat("hi", model="gpt", toolset_json=INLINE)),
        ]
        for method, call in calls:
            with pytest.warns(DeprecationWarning, match=WARNING) as caught:
                await call()
            assert caught[0].filename == __file__  # the warning points at the caller
            assert _sent(stack, method) == ("", INLINE)
        with pytest.warns(DeprecationWarning, match=WARNING):
            events = [e async for e in ts.orchestrator.stream_chat("hi", model="gpt", toolset_json=INLINE)]
        assert isinstance(events[-1], tc.ChatFinished)
        assert _sent(stack, "StreamChat") == ("", INLINE)
        with pytest.warns(DeprecationWarning, match=WARNING):
            plans = ts.discovery.watch_plan(toolset_json=INLINE)
        await plans.aclose()


def _sync_calls(target: str) -> list[tuple[str, str]]:
    methods: list[tuple[str, str]] = []
    with tc.ToolscoutClient.connect(pool=target, discovery=target, orchestrator=target) as ts:
        calls: list[tuple[str, Callable[[], Any]]] = [
            ("PlanTools", lambda: ts.discovery.plan_tools(toolset_json=INLINE)),
            ("SearchTools", lambda: ts.discovery.search_tools("weather", toolset_json=INLINE)),
            ("GetManifest", lambda: ts.discovery.get_manifest(toolset_json=INLINE)),
            ("Chat", lambda: ts.orchestrator.chat("hi", model="gpt", toolset_json=INLINE)),
            ("StreamChat", lambda: list(ts.orchestrator.stream_chat("hi", model="gpt", toolset_json=INLINE))),
        ]
        for method, call in calls:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                call()
            assert [str(w.message).split(":")[0] for w in caught] == [
                WARNING + " and will be removed in the next release"
            ]
            assert all(w.category is DeprecationWarning and w.filename == __file__ for w in caught)
            methods.append(method)
    return methods


async def test_every_sync_method_still_takes_the_old_keyword_and_warns(stack: FakeStack) -> None:
    methods = await asyncio.to_thread(_sync_calls, stack.target)
    assert methods == ["PlanTools", "SearchTools", "GetManifest", "Chat", "StreamChat"]
    assert all(_sent(stack, m) == ("", INLINE) for m in methods)


async def test_the_new_toolset_argument_does_not_warn(stack: FakeStack) -> None:
    async with tc.AsyncDiscoveryClient.connect(stack.target) as discovery:
        await discovery.plan_tools(tc.ToolsetRef.inline(INLINE))
        await discovery.search_tools("weather", toolset={"servers": {"weather": True}})
    assert _sent(stack, "PlanTools") == _sent(stack, "SearchTools") == ("", '{"servers":{"weather":true}}')


async def test_an_inline_toolset_given_twice_is_refused_before_sending(stack: FakeStack) -> None:
    async with tc.AsyncDiscoveryClient.connect(stack.target) as discovery:
        with (
            pytest.warns(DeprecationWarning, match=WARNING),
            pytest.raises(ValueError, match="give an inline toolset once"),
        ):
            await discovery.plan_tools({"servers": {"time": True}}, toolset_json=INLINE)
    assert "PlanTools" not in stack.state.last_requests
