"""The pool's routing of a server's requests during a call to that call's host (mcp_pool_svc/relay.py)."""

from __future__ import annotations

import asyncio
import contextvars
import json
from typing import Any, cast

import mcp_types as types
import pytest
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError
from toolscout.client import RelayAnswer, RelayedLog, RelayedRequest

from mcp_pool_svc.relay import (
    CallRouter,
    HostSession,
    QueuedRelay,
    declaring,
    host_capabilities,
    wants_host_session,
    without_host_capabilities,
)

_NO_CONTEXT = cast(ClientRequestContext, None)
_SAMPLE = types.CreateMessageRequestParams(
    messages=[types.SamplingMessage(role="user", content=types.TextContent(type="text", text="hi"))],
    max_tokens=5,
)
_FORM = types.ElicitRequestFormParams(message="name?", requested_schema={"type": "object", "properties": {}})
_URL = types.ElicitRequestURLParams(message="go", url="https://example.com/x", elicitation_id="e")


def _caps(**declared: Any) -> types.ClientCapabilities:
    return types.ClientCapabilities.model_validate(declared)


async def _answered(relay: QueuedRelay, result: dict[str, Any]) -> RelayedRequest:
    """Answers the next request the relay streams with ``result``; the request."""
    event = await asyncio.wait_for(relay.events.get(), 5)
    assert isinstance(event, RelayedRequest)
    relay.answer(RelayAnswer.of(event.id, result))
    return event


def test_host_capabilities_read_json_and_read_nothing_from_bad_text() -> None:
    assert host_capabilities('{"sampling": {}}').sampling is not None
    assert host_capabilities("") == types.ClientCapabilities()
    assert host_capabilities("{not json") == types.ClientCapabilities()


def test_a_2026_request_declares_no_capability_the_pool_would_have_to_relay() -> None:
    key = types.CLIENT_CAPABILITIES_META_KEY
    meta = {key: {"sampling": {}, "elicitation": {}, "roots": {}, "extensions": {"x": {}}}, "other": 1}
    assert without_host_capabilities(meta) == {key: {"extensions": {"x": {}}}, "other": 1}
    plain = {key: {"extensions": {}}}
    assert without_host_capabilities(plain) is plain
    assert without_host_capabilities(None) is None
    # The same capabilities again (a session's stamp gives the same dict): the same answer, and
    # a host's declared capabilities inside its call, whatever was stripped before.
    caps = meta[key]
    assert without_host_capabilities({key: caps, "n": 2}) == {key: {"extensions": {"x": {}}}, "n": 2}
    with declaring({"sampling": {"tools": {}}}):
        assert without_host_capabilities({key: caps}) == {
            key: {"extensions": {"x": {}}, "sampling": {"tools": {}}}
        }
    assert without_host_capabilities({key: caps}) == {key: {"extensions": {"x": {}}}}


def test_a_session_of_its_own_only_for_a_handshake_host_calling_a_2026_remote_server() -> None:
    relay = QueuedRelay(_caps(sampling={}), "2025-11-25")
    assert wants_host_session(relay, server_modern=True, remote=True) == HostSession(relay.capabilities)
    assert wants_host_session(relay, server_modern=False, remote=True) is None
    assert wants_host_session(relay, server_modern=True, remote=False) is None
    assert wants_host_session(None, server_modern=True, remote=True) is None
    modern_host = QueuedRelay(_caps(sampling={}), "2026-07-28")
    assert wants_host_session(modern_host, server_modern=True, remote=True) is None


async def test_a_request_goes_to_the_call_whose_context_it_arrives_in() -> None:
    router = CallRouter(request_streams=True)
    mine, other = QueuedRelay(_caps(sampling={})), QueuedRelay(_caps(sampling={}))
    with router.calling(other):
        outside = contextvars.copy_context()
    with router.calling(mine):
        asking = asyncio.ensure_future(router.sampling(_NO_CONTEXT, _SAMPLE))
        with router.calling(other):
            request = await _answered(
                mine, {"role": "assistant", "content": {"type": "text", "text": "ok"}, "model": "m"}
            )
        answer = await asking
    assert isinstance(answer, types.CreateMessageResult)
    assert request.method == "sampling/createMessage"
    assert request.params["maxTokens"] == 5
    assert other.events.empty()
    # A context whose call has ended belongs to none.
    refused = await outside.run(asyncio.ensure_future, router.sampling(_NO_CONTEXT, _SAMPLE))
    assert isinstance(refused, types.ErrorData)
    assert refused.code == types.METHOD_NOT_FOUND


async def test_without_a_stream_per_request_only_the_one_call_in_flight_gets_a_request() -> None:
    router = CallRouter(request_streams=False)
    first, second = QueuedRelay(_caps(roots={})), QueuedRelay(_caps(roots={}))
    loop = asyncio.get_running_loop()
    with router.calling(first):
        # Asked from outside any call's context (a stdio server's reader): the one call in flight.
        asking = contextvars.Context().run(loop.create_task, router.list_roots(_NO_CONTEXT))
        await _answered(first, {"roots": [{"uri": "file:///a"}]})
        assert isinstance(await asking, types.ListRootsResult)
        with router.calling(second):
            # Two in flight: nothing tells which one asked, so neither is asked.
            refused = await contextvars.Context().run(loop.create_task, router.list_roots(_NO_CONTEXT))
    assert isinstance(refused, types.ErrorData)
    assert refused.code == types.METHOD_NOT_FOUND
    assert first.events.empty()
    assert second.events.empty()


async def test_over_streamable_http_a_request_outside_every_calls_stream_is_refused() -> None:
    router = CallRouter(request_streams=True)
    relay = QueuedRelay(_caps(roots={}))
    loop = asyncio.get_running_loop()
    with router.calling(relay):
        refused = await contextvars.Context().run(loop.create_task, router.list_roots(_NO_CONTEXT))
    assert isinstance(refused, types.ErrorData)
    assert relay.events.empty()


@pytest.mark.parametrize(
    ("declared", "form", "url"),
    [
        ({"elicitation": {}}, True, False),  # bare: form mode only (the spec's compatibility rule)
        ({"elicitation": {"form": {}}}, True, False),
        ({"elicitation": {"url": {}}}, False, True),
        ({"elicitation": {"form": {}, "url": {}}}, True, True),
        ({"sampling": {}}, False, False),
    ],
)
async def test_elicitation_reaches_the_host_only_in_the_modes_it_declared(
    declared: dict[str, Any], form: bool, url: bool
) -> None:
    router = CallRouter(request_streams=True)
    relay = QueuedRelay(_caps(**declared))
    with router.calling(relay):
        for params, allowed in ((_FORM, form), (_URL, url)):
            asking = asyncio.ensure_future(router.elicitation(_NO_CONTEXT, params))
            if allowed:
                await _answered(relay, {"action": "decline"})
            answer = await asking
            assert isinstance(answer, types.ElicitResult) is allowed
            if not allowed:
                assert isinstance(answer, types.ErrorData)
                assert answer.code == types.METHOD_NOT_FOUND


async def test_the_hosts_error_reaches_the_server_with_its_code_and_a_gone_host_fails_what_waits() -> None:
    relay = QueuedRelay(_caps(sampling={}))
    asking = asyncio.ensure_future(relay.ask("sampling/createMessage", {}))
    event = await asyncio.wait_for(relay.events.get(), 5)
    assert isinstance(event, RelayedRequest)
    relay.answer(RelayAnswer.error(event.id, -1, "User rejected sampling request"))
    with pytest.raises(MCPError) as declined:
        await asking
    assert (declined.value.code, declined.value.message) == (-1, "User rejected sampling request")
    waiting = asyncio.ensure_future(relay.ask("roots/list", {}))
    await asyncio.wait_for(relay.events.get(), 5)
    relay.close()
    with pytest.raises(MCPError) as gone:
        await waiting
    assert gone.value.code == types.INTERNAL_ERROR
    with pytest.raises(MCPError):
        await relay.ask("roots/list", {})


async def test_a_cancelled_calls_server_gets_a_grace_to_withdraw_what_it_still_asks_then_a_refusal() -> None:
    relay = QueuedRelay(_caps(sampling={}))
    waiting = asyncio.ensure_future(relay.ask("sampling/createMessage", {}))
    await asyncio.wait_for(relay.events.get(), 5)
    relay.close(grace=0.01)
    assert not waiting.done()  # not refused at once: the cancellation goes first
    with pytest.raises(MCPError) as gone:
        await asyncio.wait_for(waiting, 5)
    assert gone.value.code == types.INTERNAL_ERROR


async def test_a_log_message_goes_to_its_calls_host_as_json() -> None:
    router = CallRouter(request_streams=True)
    relay = QueuedRelay(_caps())
    with router.calling(relay):
        await router.logged(
            types.LoggingMessageNotificationParams(level="warning", logger="db", data={"n": 1})
        )
    await router.logged(types.LoggingMessageNotificationParams(level="info", data="nobody's"))
    event = relay.events.get_nowait()
    assert isinstance(event, RelayedLog)
    assert (event.level, event.logger, json.loads(event.data_json)) == ("warning", "db", {"n": 1})
    assert relay.events.empty()
