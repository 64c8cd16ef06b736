"""The sync clients (run in a worker thread) and TLS, against fake services on 127.0.0.1:0."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from toolscout import client as tc

from tests.support.fake_services import FakeStack, fake_stack


@pytest.fixture
async def stack() -> AsyncIterator[FakeStack]:
    async with fake_stack() as running:
        yield running


def _session(target: str, **kwargs: object) -> dict[str, object]:
    with tc.ToolscoutClient.connect(pool=target, discovery=target, orchestrator=target, **kwargs) as ts:  # type: ignore[arg-type]
        return {
            "servers": ts.pool.list_servers(),
            "call": ts.pool.call_tool("forecast", {"city": "Paris"}, server="weather"),
            "plan": ts.discovery.plan_tools(include_deferred_names=True),
            "search": ts.discovery.search_tools("weather"),
            "manifest": ts.discovery.get_manifest(),
            "chat": ts.orchestrator.chat("hey", model="gpt"),
            "events": list(ts.orchestrator.stream_chat("hey", model="gpt")),
            "models": ts.orchestrator.list_models(),
            "toolsets": ts.orchestrator.list_toolsets(),
        }


async def test_sync_clients_offer_the_same_typed_api(stack: FakeStack) -> None:
    got = await asyncio.to_thread(_session, stack.target, token="tok")
    assert [s.state for s in got["servers"]] == ["ready", "reconnecting"]  # type: ignore[attr-defined]
    assert got["call"].text == 'called weather_forecast with {"city":"Paris"}'  # type: ignore[attr-defined]
    assert got["plan"].deferred_tool_names == ("weather_forecast",)  # type: ignore[attr-defined]
    assert got["chat"].text == "echo: hey"  # type: ignore[attr-defined]
    events = got["events"]
    assert isinstance(events[-1], tc.ChatFinished)  # type: ignore[index]
    assert got["models"][0].name == "gpt"  # type: ignore[index]
    assert stack.state.metadata["StreamChat"][-1]["authorization"] == "Bearer tok"
    assert stack.state.metadata["ListServers"][-1]["authorization"] == "Bearer tok"


def _failing_call(target: str) -> tc.ToolscoutClientError:
    with tc.PoolClient.connect(target, max_attempts=1) as pool:
        try:
            pool.call_tool("nope")
        except tc.ToolscoutClientError as err:
            return err
    raise AssertionError("call_tool did not raise")


async def test_sync_errors_use_the_same_exception_tree(stack: FakeStack) -> None:
    err = await asyncio.to_thread(_failing_call, stack.target)
    assert isinstance(err, tc.NotFoundError)
    assert err.message == "Unknown tool 'nope'"


def _list_with_retries(target: str) -> int:
    with tc.PoolClient.connect(target) as pool:
        return len(pool.list_servers())


async def test_sync_channels_retry_unavailable_too(stack: FakeStack) -> None:
    stack.state.fail("ListServers", grpc.StatusCode.UNAVAILABLE, times=2)
    assert await asyncio.to_thread(_list_with_retries, stack.target) == 2
    assert stack.state.attempts["ListServers"] == 3


def _stream_until_broken(target: str) -> tuple[int, tc.ToolscoutClientError | None]:
    received = 0
    with tc.OrchestratorClient.connect(target) as orch:
        try:
            for _ in orch.stream_chat("x", model="gpt"):
                received += 1
        except tc.ToolscoutClientError as err:
            return received, err
    return received, None


async def test_sync_stream_raises_mapped_error_mid_stream_without_replaying(stack: FakeStack) -> None:
    stack.state.stream_fail_after = 3
    stack.state.stream_failure = grpc.StatusCode.RESOURCE_EXHAUSTED
    received, err = await asyncio.to_thread(_stream_until_broken, stack.target)
    assert received == 3
    assert isinstance(err, tc.ResourceExhaustedError)
    assert stack.state.attempts["StreamChat"] == 1


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, bytes]:
    d = tmp_path_factory.mktemp("tls")
    key, crt = d / "key.pem", d / "crt.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-keyout", str(key), "-out", str(crt), "-subj", "/CN=localhost",
            "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return Path(key).read_bytes(), Path(crt).read_bytes()


async def test_tls_with_a_token_sends_it_as_call_credentials(certs: tuple[bytes, bytes]) -> None:
    key, crt = certs
    creds = grpc.ssl_server_credentials([(key, crt)])
    async with fake_stack(server_credentials=creds) as stack:
        target = f"localhost:{stack.port}"
        async with tc.AsyncPoolClient.connect(target, root_certificates=crt, token="tls-token") as pool:
            assert len(await pool.list_servers()) == 2
        assert stack.state.metadata["ListServers"][-1]["authorization"] == "Bearer tls-token"
        async with tc.AsyncPoolClient.connect(target, tls=True, max_attempts=1) as untrusted:
            with pytest.raises(tc.UnavailableError):
                await untrusted.list_servers(deadline=5)
