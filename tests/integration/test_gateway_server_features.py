"""Resources, resource templates, prompts, completion, logging and resource subscriptions of the
MCP servers behind the gateway, through the real gateway (every mode) to the ``mcp`` SDK client.

Real pool and discovery; two of our own SDK servers (``tests/fixtures/features/server.py``: text
and binary resources, a template, prompts with arguments, completion, logging, subscriptions)
over stdio; ``beta`` is not namespaced (its prompts keep their own names), and both list the URI
``feature://shared/readme``, which is served once per server under its server's prefix. ``plain``
(the misbehaving fixture) offers tools only: the toolsets over it advertise none of the rest.
"""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator

import anyio
import mcp_types as types
import psutil
import pytest
import pytest_asyncio
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import PromptsListChanged, ResourceUpdated
from toolscout import client as tc

from tests.support.gateway import MODERN, GatewayStack, gateway_stack
from tests.support.mcp_servers import (
    REPO_ROOT,
    _running,
    free_port,
    live_descendants,
    misbehaving_config,
    wait_until_gone,
)
from toolscout_kit.config import parse_config

SERVER = REPO_ROOT / "tests" / "fixtures" / "features" / "server.py"

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def gw(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[GatewayStack]:
    tmp_path = tmp_path_factory.mktemp("features")
    config = parse_config(
        {
            "servers": {
                "alpha": {"command": sys.executable, "args": [str(SERVER), "alpha"]},
                "beta": {"command": sys.executable, "args": [str(SERVER), "beta"], "namespace_tools": False},
                "plain": misbehaving_config(),
            },
            "tool_sets": {
                "only_beta": {"servers": {"beta": True}},
                # A server offering tools only, behind an endpoint of each mode.
                **{f"tools_{mode}": {"servers": {"plain": True}} for mode in ("all", "meta", "progressive")},
            },
            "toolscout": {
                # A killed server comes back at once (test_a_subscription_survives_its_servers_restart).
                "pool": {"initial_backoff": 0.05},
                "gateway": {
                    "mode": "all",
                    "modes": {"only_beta": "meta", "tools_meta": "meta", "tools_progressive": "progressive"},
                    # No result is kept behind a handle: an "all" endpoint has no resources of its own.
                    "result_budget": 0,
                },
            },
        },
        base_dir=tmp_path,
    )
    async with gateway_stack(config) as stack:
        yield stack


def _advertised(caps: types.ServerCapabilities | None) -> set[str]:
    assert caps is not None
    named = {
        k for k in ("tools", "resources", "prompts", "completions", "logging") if getattr(caps, k) is not None
    }
    if caps.resources is not None and caps.resources.subscribe:
        named.add("subscribe")
    return named


_EVERYTHING = {"tools", "resources", "subscribe", "prompts", "completions", "logging"}


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("", _EVERYTHING),
        ("/only_beta", _EVERYTHING),
        # The servers offer tools only; meta and progressive serve a resource of their own (the manifest).
        ("/tools_all", {"tools"}),
        ("/tools_meta", {"tools", "resources"}),
        ("/tools_progressive", {"tools", "resources"}),
    ],
)
@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_each_endpoint_advertises_what_its_toolsets_servers_offer(
    gw: GatewayStack, path: str, expected: set[str], mode: str
) -> None:
    # initialize at 2025-11-25, server/discover at 2026-07-28 (answered by every mode).
    async with Client(gw.url + path, mode=mode) as host:  # type: ignore[arg-type]
        if mode == MODERN:
            caps = types.DiscoverResult.model_validate(await host.session.send_discover(MODERN)).capabilities
        else:
            caps = host.session.server_capabilities
    assert _advertised(caps) == expected


async def test_a_method_the_endpoint_does_not_advertise_is_not_found(gw: GatewayStack) -> None:
    async with Client(gw.url + "/tools_all", mode="legacy") as host:  # type: ignore[arg-type]
        refused = []
        for request in (
            types.ListPromptsRequest(),
            types.GetPromptRequest(params=types.GetPromptRequestParams(name="greet")),
            types.ListResourcesRequest(),
            types.ReadResourceRequest(params=types.ReadResourceRequestParams(uri="feature://beta/text")),
            types.SubscribeRequest(params=types.SubscribeRequestParams(uri="feature://beta/counter")),
            types.SetLevelRequest(params=types.SetLevelRequestParams(level="info")),
            types.CompleteRequest(
                params=types.CompleteRequestParams(
                    ref=types.PromptReference(name="greet"), argument={"name": "style", "value": "f"}
                )
            ),
        ):
            with pytest.raises(MCPError) as err:
                await host.session.send_request(request, types.EmptyResult)
            refused.append(err.value.error.code)
        tools = await host.list_tools()
    assert refused == [types.METHOD_NOT_FOUND] * 7
    assert {t.name for t in tools.tools} >= {"plain__echo"}


async def test_resources_and_templates_are_listed_and_read_text_and_binary(gw: GatewayStack) -> None:
    async with Client(gw.url, mode="legacy") as host:  # type: ignore[arg-type]
        uris = {str(r.uri) for r in (await host.list_resources()).resources}
        templates = {t.uri_template for t in (await host.list_resource_templates()).resource_templates}
        text = (await host.read_resource("feature://alpha/text")).contents[0]
        binary = (await host.read_resource("feature://beta/binary")).contents[0]
        item = (await host.read_resource("feature://beta/items/42")).contents[0]
    assert {"feature://alpha/text", "feature://beta/binary", "feature://alpha/counter"} <= uris
    # The URI both servers list: once per server, under its prefix, never one shadowing the other.
    assert "feature://shared/readme" not in uris
    assert {
        "toolscout://server/alpha/feature://shared/readme",
        "toolscout://server/beta/feature://shared/readme",
    } <= uris
    assert templates == {"feature://alpha/items/{id}", "feature://beta/items/{id}"}
    assert isinstance(text, types.TextResourceContents)
    assert text.text == "hello from alpha"
    assert isinstance(binary, types.BlobResourceContents)
    assert base64.b64decode(binary.blob) == bytes(range(256))
    assert isinstance(item, types.TextResourceContents)
    assert item.text == "item 42 of beta"


async def test_a_uri_two_servers_list_is_read_from_the_server_its_prefix_names(gw: GatewayStack) -> None:
    async with Client(gw.url, mode="legacy") as host:  # type: ignore[arg-type]
        for server in ("alpha", "beta"):
            read = await host.read_resource(f"toolscout://server/{server}/feature://shared/readme")
            content = read.contents[0]
            assert isinstance(content, types.TextResourceContents)
            assert content.text == f"readme of {server}"
        with pytest.raises(MCPError) as refused:
            await host.read_resource("feature://nobody/here")
    assert refused.value.error.code == -32002


async def test_prompts_are_named_like_tools_and_got_with_their_arguments(gw: GatewayStack) -> None:
    async with Client(gw.url, mode="legacy") as host:  # type: ignore[arg-type]
        prompts = {p.name: p for p in (await host.list_prompts()).prompts}
        got = await host.get_prompt("alpha__greet", {"name": "Ada", "style": "formal"})
        own = await host.get_prompt("plain")
        with pytest.raises(MCPError) as missing:
            await host.get_prompt("alpha__greet", {})
    # alpha is namespaced (the default), beta keeps its own names: its "greet" and "plain".
    assert {"alpha__greet", "alpha__plain", "greet", "plain"} == set(prompts)
    assert [a.name for a in prompts["alpha__greet"].arguments or []] == ["name", "style"]
    message = got.messages[0].content
    assert isinstance(message, types.TextContent)
    assert message.text == "Say hello to Ada in a formal way (alpha)."
    assert isinstance(own.messages[0].content, types.TextContent)
    assert "beta" in own.messages[0].content.text
    # The server's own JSON-RPC error reaches the host as that error.
    assert missing.value.error.code == types.INVALID_PARAMS


async def test_completion_is_routed_by_prompt_and_by_template(gw: GatewayStack) -> None:
    async with Client(gw.url, mode="legacy") as host:  # type: ignore[arg-type]
        styles = await host.complete(
            types.PromptReference(name="alpha__greet"), {"name": "style", "value": "f"}
        )
        ids = await host.complete(
            types.ResourceTemplateReference(uri="feature://beta/items/{id}"), {"name": "id", "value": "1"}
        )
    assert styles.completion.values == ["formal", "friendly", "funny"]
    assert ids.completion.values == ["1", "10"]


async def test_set_level_reaches_every_server_offering_logging(gw: GatewayStack) -> None:
    async with Client(gw.url, mode="legacy") as host:  # type: ignore[arg-type]
        # The SDK's own method warns that logging is deprecated at 2026-07-28; this is 2025-11-25.
        await host.session.send_request(
            types.SetLevelRequest(params=types.SetLevelRequestParams(level="warning")), types.EmptyResult
        )
        levels = [await host.call_tool(name, {}) for name in ("alpha__level", "level")]
    assert [r.content[0].text for r in levels] == ["warning", "warning"]  # type: ignore[union-attr]


async def test_a_toolset_serves_only_its_servers_resources_and_prompts(gw: GatewayStack) -> None:
    async with Client(gw.url + "/only_beta", mode="legacy") as host:  # type: ignore[arg-type]
        uris = {str(r.uri) for r in (await host.list_resources()).resources}
        prompts = {p.name for p in (await host.list_prompts()).prompts}
        with pytest.raises(MCPError) as other:
            await host.read_resource("feature://alpha/text")
    assert "feature://beta/text" in uris
    assert "feature://alpha/text" not in uris
    assert prompts == {"greet", "plain"}
    assert other.value.error.code == -32002


async def test_a_2026_host_may_cache_every_list_as_long_as_the_tools_list(gw: GatewayStack) -> None:
    async with Client(gw.url, mode=MODERN) as host:  # type: ignore[arg-type]
        lists = [
            await host.list_tools(),
            await host.list_resources(),
            await host.list_resource_templates(),
            await host.list_prompts(),
        ]
    # No tokens here: one answer for everyone, shared caches allowed; changes are announced.
    assert [(page.ttl_ms, page.cache_scope) for page in lists] == [(30_000, "public")] * 4


@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_every_revision_lists_and_reads(gw: GatewayStack, mode: str) -> None:
    async with Client(gw.url, mode=mode) as host:  # type: ignore[arg-type]
        uris = {str(r.uri) for r in (await host.list_resources()).resources}
        read = await host.read_resource("feature://alpha/text")
        prompt = await host.get_prompt("greet", {"name": "Bo"})
    assert "feature://alpha/text" in uris
    assert read.contents[0].text == "hello from alpha"  # type: ignore[union-attr]
    assert prompt.messages[0].content.text == "Say hello to Bo in a plain way (beta)."  # type: ignore[union-attr]


async def test_a_subscription_relays_the_servers_updates_until_unsubscribed(gw: GatewayStack) -> None:
    updated: list[str] = []
    heard = anyio.Event()

    async def on_message(message: object) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updated.append(str(message.params.uri))
            heard.set()

    uri = "feature://alpha/counter"
    async with Client(gw.url, mode="legacy", message_handler=on_message) as host:  # type: ignore[arg-type]
        # The SDK's own methods warn that subscriptions are gone at 2026-07-28; this is 2025-11-25.
        await host.session.send_request(
            types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri)), types.EmptyResult
        )
        assert (await host.call_tool("alpha__subscribed", {})).content[0].text == uri  # type: ignore[union-attr]
        await host.call_tool("alpha__bump", {})
        with anyio.fail_after(10):
            await heard.wait()
        await host.session.send_request(
            types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=uri)), types.EmptyResult
        )
        with anyio.fail_after(10):
            while (await host.call_tool("alpha__subscribed", {})).content[0].text != "none":  # type: ignore[union-attr]
                pass  # each listing is a round trip to the server: no sleep needed
    assert updated == [uri]


async def test_a_new_prompt_is_announced_and_listed(gw: GatewayStack) -> None:
    changed = anyio.Event()

    async def on_message(message: object) -> None:
        if isinstance(message, types.PromptListChangedNotification):
            changed.set()

    async with Client(gw.url, mode="legacy", message_handler=on_message) as host:  # type: ignore[arg-type]
        await host.list_prompts()  # the session's outbound channel is known from here on
        await host.call_tool("add_prompt", {"name": "later"})
        with anyio.fail_after(10):
            await changed.wait()
        prompts = {p.name for p in (await host.list_prompts()).prompts}
    assert "later" in prompts


async def test_a_2026_listen_stream_relays_the_updates_of_the_resources_it_asks_for(gw: GatewayStack) -> None:
    uri = "feature://beta/counter"
    # "auto": the client asks server/discover first, which names the capabilities, and settles on 2026-07-28.
    async with Client(gw.url, mode="auto") as host:
        assert host.session.protocol_version == MODERN
        caps = host.session.server_capabilities
        assert caps is not None
        assert caps.resources is not None
        assert caps.resources.subscribe
        async with host.listen(resource_subscriptions=[uri]) as subscription:
            with anyio.fail_after(10):
                # The pool subscribes once the stream is open: bump until the update comes.
                while (
                    "feature://beta/counter" not in (await host.call_tool("subscribed", {})).content[0].text
                ):  # type: ignore[union-attr]
                    pass  # each call is a round trip to the server: no sleep needed
                await host.call_tool("bump", {})
                event = await anext(aiter(subscription))
    assert isinstance(event, ResourceUpdated)
    assert event.uri == uri


async def test_a_2026_listen_stream_hears_that_the_prompts_changed(gw: GatewayStack) -> None:
    async with Client(gw.url, mode="auto") as host, host.listen(prompts_list_changed=True) as subscription:
        assert subscription.honored.prompts_list_changed
        await host.call_tool("alpha__add_prompt", {"name": "listened"})
        with anyio.fail_after(10):
            event = await anext(aiter(subscription))
        prompts = {p.name for p in (await host.list_prompts()).prompts}
    assert isinstance(event, PromptsListChanged)
    assert "alpha__listened" in prompts


async def test_a_handshake_era_host_subscribes_to_a_server_the_pool_speaks_2026_with(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # At 2026-07-28 this server offers no resource subscriptions (it serves no subscriptions/listen);
    # at 2025-11-25 it offers resources/subscribe: the pool probes that era, advertises it, and holds
    # each subscription on a session of that era of its own (the era bridge), for a 2025-11-25
    # host's resources/subscribe and a 2026-07-28 host's subscriptions/listen alike.
    updated: list[str] = []
    heard = anyio.Event()

    async def on_message(message: object) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updated.append(str(message.params.uri))
            heard.set()

    uri = "feature://gamma/counter"
    port = free_port()
    argv = [sys.executable, str(SERVER), "gamma", "dual-http", "--port", str(port)]
    with _running(argv, port=port, path="/mcp") as http:
        config = parse_config(
            {
                "namespace_tools": False,
                "servers": {"gamma": {"url": http.url, "transport": "streamable-http"}},
                "toolscout": {"gateway": {"mode": "all"}},
            },
            base_dir=tmp_path_factory.mktemp("bridge"),
        )
        async with gateway_stack(config) as gw:
            async with tc.AsyncPoolClient.connect(gw.stack.pool.address) as pool:
                (status,) = await pool.list_servers()
            async with Client(gw.url, mode="legacy", message_handler=on_message) as host:  # type: ignore[arg-type]
                caps = host.session.server_capabilities
                assert caps is not None
                assert caps.resources is not None
                assert caps.resources.subscribe
                await host.session.send_request(
                    types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri)), types.EmptyResult
                )
                assert (await host.call_tool("subscribed", {})).content[0].text == uri  # type: ignore[union-attr]
                await host.call_tool("bump", {})
                with anyio.fail_after(10):
                    await heard.wait()
                await host.session.send_request(
                    types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=uri)),
                    types.EmptyResult,
                )
                with anyio.fail_after(10):
                    while (await host.call_tool("subscribed", {})).content[0].text != "none":  # type: ignore[union-attr]
                        pass  # each call is a round trip to the server: no sleep needed
            # A 2026-07-28 host's listen stream is served by the same bridge.
            async with (
                Client(gw.url, mode="auto") as modern,
                modern.listen(resource_subscriptions=[uri]) as stream,
            ):
                assert modern.session.protocol_version == MODERN
                with anyio.fail_after(10):
                    while uri not in (await modern.call_tool("subscribed", {})).content[0].text:  # type: ignore[union-attr]
                        pass
                    await modern.call_tool("bump", {})
                    event = await anext(aiter(stream))
    assert status.protocol_version == "2026-07-28"
    assert updated == [uri]
    assert isinstance(event, ResourceUpdated)
    assert event.uri == uri


async def test_a_2026_subscription_survives_its_servers_restart(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # A server the pool speaks 2026-07-28 with, run by the pool over stdio: a subscription rides a
    # subscriptions/listen stream on its session and is lost with it when the process dies; the
    # pool listens again on the server's next session. Heard by a 2025-11-25 host's
    # resources/subscribe and a 2026-07-28 host's listen stream alike.
    uri = "feature://delta/counter"
    updated: list[str] = []
    heard = anyio.Event()

    async def on_message(message: object) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updated.append(str(message.params.uri))
            heard.set()

    async def listening(host: Client) -> int:
        return str((await host.call_tool("subscribed", {})).content[0].text).split(",").count(uri)  # type: ignore[union-attr]

    config = parse_config(
        {
            "namespace_tools": False,
            "servers": {"delta": {"command": sys.executable, "args": [str(SERVER), "delta", "modern"]}},
            "toolscout": {"pool": {"initial_backoff": 0.05}, "gateway": {"mode": "all"}},
        },
        base_dir=tmp_path_factory.mktemp("modern"),
    )
    async with (
        gateway_stack(config) as gw,
        Client(gw.url, mode="legacy", message_handler=on_message) as old,  # type: ignore[arg-type]
        Client(gw.url, mode="auto") as modern,
        modern.listen(resource_subscriptions=[uri]) as stream,
    ):
        async with tc.AsyncPoolClient.connect(gw.stack.pool.address) as pool:
            (status,) = await pool.list_servers()
        assert modern.session.protocol_version == MODERN
        await old.session.send_request(
            types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri)), types.EmptyResult
        )
        with anyio.fail_after(10):
            while await listening(modern) < 2:
                pass  # each call is a round trip to the server: no sleep needed
        pid = _server_pid("delta")
        os.kill(pid, signal.SIGKILL)
        assert not await wait_until_gone([pid])
        # The new process has no listen stream until the pool opens them again.
        with anyio.fail_after(20):
            while True:
                with contextlib.suppress(MCPError):
                    if await listening(modern) == 2:
                        break
        assert _server_pid("delta") != pid
        await modern.call_tool("bump", {})
        with anyio.fail_after(10):
            event = await anext(aiter(stream))
            await heard.wait()
    assert status.protocol_version == MODERN
    assert isinstance(event, ResourceUpdated)
    assert event.uri == uri
    assert updated == [uri]


async def test_an_era_bridge_subscription_survives_its_servers_restart(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # The era bridge (a 2025-11-25 session the pool opens for the subscription to a server it
    # speaks 2026-07-28 with) ends with that server's process: the pool opens a new one on the
    # server's next process and subscribes there again.
    uri = "feature://epsilon/counter"
    updated: list[str] = []
    heard = anyio.Event()

    async def on_message(message: object) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updated.append(str(message.params.uri))
            heard.set()

    port = free_port()
    argv = [sys.executable, str(SERVER), "epsilon", "dual-http", "--port", str(port)]
    with _running(argv, port=port, path="/mcp") as http:
        config = parse_config(
            {
                "namespace_tools": False,
                "servers": {"epsilon": {"url": http.url, "transport": "streamable-http"}},
                # The bridge session is pinged this often: its loss is found within half a second.
                "toolscout": {"pool": {"ping_interval": 0.5}, "gateway": {"mode": "all"}},
            },
            base_dir=tmp_path_factory.mktemp("bridge-restart"),
        )
        async with (
            gateway_stack(config) as gw,
            Client(gw.url, mode="legacy", message_handler=on_message) as host,  # type: ignore[arg-type]
        ):
            await host.session.send_request(
                types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri)), types.EmptyResult
            )
            assert (await host.call_tool("subscribed", {})).content[0].text == uri  # type: ignore[union-attr]
            http.process.kill()
            http.process.wait()
            with _running(argv, port=port, path="/mcp"):
                with anyio.fail_after(20):
                    while True:
                        with contextlib.suppress(MCPError):
                            answer = await host.call_tool("subscribed", {})
                            if not answer.is_error and answer.content[0].text == uri:  # type: ignore[union-attr]
                                break
                await host.call_tool("bump", {})
                with anyio.fail_after(10):
                    await heard.wait()
    assert updated == [uri]


def _server_pid(name: str) -> int:
    """The pid of the features server ``name`` the pool runs (a child of this process)."""
    for pid in live_descendants():
        with contextlib.suppress(psutil.Error, ValueError, IndexError):
            argv = psutil.Process(pid).cmdline()
            if argv[argv.index(str(SERVER)) + 1] == name:
                return pid
    raise AssertionError(f"no running features server {name}")


async def test_a_subscription_survives_its_servers_restart(gw: GatewayStack) -> None:
    # Last in this module: it kills alpha (the supervisor starts it again, with fresh state).
    updated: list[str] = []
    heard = anyio.Event()

    async def on_message(message: object) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updated.append(str(message.params.uri))
            heard.set()

    uri = "feature://alpha/counter"
    async with Client(gw.url, mode="legacy", message_handler=on_message) as host:  # type: ignore[arg-type]
        await host.session.send_request(
            types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri)), types.EmptyResult
        )
        pid = _server_pid("alpha")
        os.kill(pid, signal.SIGKILL)
        assert not await wait_until_gone([pid])
        # The new process knows nothing of the old one's subscriptions: the pool subscribes again
        # on its new session.
        with anyio.fail_after(20):
            while True:
                subscribed = await host.call_tool("alpha__subscribed", {})
                if not subscribed.is_error and subscribed.content[0].text == uri:  # type: ignore[union-attr]
                    break
        assert _server_pid("alpha") != pid
        await host.call_tool("alpha__bump", {})
        with anyio.fail_after(10):
            await heard.wait()
    assert updated == [uri]
