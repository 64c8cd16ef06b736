"""The shared server kit on a real grpc.aio server bound to 127.0.0.1:0."""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from google.protobuf import descriptor_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from toolscout.mcp_pool.v1 import mcp_pool_pb2, mcp_pool_pb2_grpc

from toolscout_kit.config import PoolSettings, SecuritySettings
from toolscout_kit.errors import NotFoundError
from toolscout_kit.server import RunningServer, ServiceBinding, start_server

SERVICE = "toolscout.mcp_pool.v1.McpPool"
TOKEN_ENV = "TS_TEST_KIT_TOKEN"


class _Servicer(mcp_pool_pb2_grpc.McpPoolServicer):
    """A purpose-built servicer: each RPC exercises one kit path."""

    async def ListServers(self, request: Any, context: Any) -> mcp_pool_pb2.ListServersResponse:
        return mcp_pool_pb2.ListServersResponse(servers=[mcp_pool_pb2.ServerStatus(name="ok")])

    async def ListTools(self, request: Any, context: Any) -> mcp_pool_pb2.ListToolsResponse:
        raise NotFoundError("Unknown server 'nope'. Servers: ok")

    async def CallTool(self, request: Any, context: Any) -> mcp_pool_pb2.CallToolResponse:
        raise RuntimeError("secret detail /etc/passwd at line 42")

    async def WatchCatalog(
        self, request: Any, context: Any
    ) -> AsyncIterator[mcp_pool_pb2.WatchCatalogResponse]:
        yield mcp_pool_pb2.WatchCatalogResponse(catalog_version="v1")
        raise NotFoundError("catalog went away")


async def _start(**security: Any) -> RunningServer:
    settings = PoolSettings(listen="127.0.0.1:0", metrics_port=0, shutdown_grace=0.5)
    binding = ServiceBinding(SERVICE, mcp_pool_pb2_grpc.add_McpPoolServicer_to_server, _Servicer())
    return await start_server([binding], settings, SecuritySettings(auth_token_env=TOKEN_ENV, **security))


@pytest.fixture
async def server(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[RunningServer]:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    running = await _start()
    yield running
    await running.stop(0)


async def test_health_is_serving_then_not_serving_once_shutdown_starts(server: RunningServer) -> None:
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for name in ("", SERVICE):
            reply = await stub.Check(health_pb2.HealthCheckRequest(service=name), timeout=5)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
        watch = stub.Watch(health_pb2.HealthCheckRequest(service=SERVICE), timeout=10)
        first = await watch.read()
        assert first.status == health_pb2.HealthCheckResponse.SERVING
        stopping = asyncio.create_task(server.stop(grace=2))
        second = await watch.read()
        assert second.status == health_pb2.HealthCheckResponse.NOT_SERVING
        watch.cancel()
        await stopping


async def test_reflection_lists_every_service(server: RunningServer) -> None:
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        call = stub.ServerReflectionInfo(timeout=5)
        await call.write(reflection_pb2.ServerReflectionRequest(list_services=""))
        reply = await call.read()
        await call.done_writing()
        names = {s.name for s in reply.list_services_response.service}
    assert {SERVICE, "grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection"} <= names


async def test_reflection_v1_lists_and_describes_every_service_as_current_grpcurl_asks(
    server: RunningServer,
) -> None:
    # grpc.reflection.v1 has the same messages as v1alpha under a new package: v1alpha's classes
    # encode the bytes, the v1 method path is what a current client calls.
    async with grpc.aio.insecure_channel(server.address) as channel:
        info = channel.stream_stream(
            "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
            request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
            response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
        )
        call = info(timeout=5)
        await call.write(reflection_pb2.ServerReflectionRequest(list_services=""))
        listed = await call.read()
        files = {}
        for symbol in (SERVICE, "grpc.reflection.v1.ServerReflection"):
            await call.write(reflection_pb2.ServerReflectionRequest(file_containing_symbol=symbol))
            reply = await call.read()
            assert not reply.HasField("error_response"), reply.error_response
            proto = descriptor_pb2.FileDescriptorProto.FromString(
                reply.file_descriptor_response.file_descriptor_proto[0]
            )
            files[symbol] = proto
        await call.done_writing()
    names = {s.name for s in listed.list_services_response.service}
    assert {
        SERVICE,
        "grpc.reflection.v1.ServerReflection",
        "grpc.reflection.v1alpha.ServerReflection",
    } <= names
    assert files[SERVICE].name == "toolscout/mcp_pool/v1/mcp_pool.proto"
    v1 = files["grpc.reflection.v1.ServerReflection"]
    assert (v1.package, [m.name for m in v1.service[0].method]) == (
        "grpc.reflection.v1",
        ["ServerReflectionInfo"],
    )
    assert v1.service[0].method[0].input_type == ".grpc.reflection.v1.ServerReflectionRequest"


async def test_domain_error_maps_to_its_status_code(server: RunningServer) -> None:
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = mcp_pool_pb2_grpc.McpPoolStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.ListTools(mcp_pool_pb2.ListToolsRequest(), timeout=5)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    assert err.value.details() == "Unknown server 'nope'. Servers: ok"


async def test_domain_error_in_a_stream_maps_after_items_already_sent(server: RunningServer) -> None:
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = mcp_pool_pb2_grpc.McpPoolStub(channel)
        call = stub.WatchCatalog(mcp_pool_pb2.WatchCatalogRequest(), timeout=5)
        first = await call.read()
        assert first.catalog_version == "v1"
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await call.read()
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


async def test_unmapped_exception_is_internal_without_leaking_details(server: RunningServer) -> None:
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = mcp_pool_pb2_grpc.McpPoolStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.CallTool(mcp_pool_pb2.CallToolRequest(llm_name="x"), timeout=5)
    assert err.value.code() == grpc.StatusCode.INTERNAL
    assert "secret" not in (err.value.details() or "")
    assert "Traceback" not in (err.value.details() or "")


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        return str(reply.read().decode())


async def test_metrics_endpoint_serves_grpc_counters_after_calls(server: RunningServer) -> None:
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = mcp_pool_pb2_grpc.McpPoolStub(channel)
        await stub.ListServers(mcp_pool_pb2.ListServersRequest(), timeout=5)
        with pytest.raises(grpc.aio.AioRpcError):
            await stub.ListTools(mcp_pool_pb2.ListToolsRequest(), timeout=5)
    assert server.metrics_port
    text = await asyncio.to_thread(_scrape, server.metrics_port)
    assert (
        f'grpc_server_handled_total{{grpc_code="OK",grpc_method="ListServers",grpc_service="{SERVICE}"}}'
        in text
    )
    assert f'grpc_code="NOT_FOUND",grpc_method="ListTools",grpc_service="{SERVICE}"' in text
    assert f'grpc_server_handling_seconds_count{{grpc_method="ListServers",grpc_service="{SERVICE}"}}' in text


async def _write_then_read(stream: Any, request: Any) -> Any:
    await stream.write(request)
    return await stream.read()


async def test_auth_rejects_missing_or_wrong_token_and_accepts_the_right_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(TOKEN_ENV, "s3cret-token")
    running = await _start()
    try:
        async with grpc.aio.insecure_channel(running.address) as channel:
            stub = mcp_pool_pb2_grpc.McpPoolStub(channel)
            request = mcp_pool_pb2.ListServersRequest()
            for metadata in ((), (("authorization", "Bearer wrong"),), (("authorization", "s3cret-token"),)):
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await stub.ListServers(request, metadata=metadata, timeout=5)
                assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
            reply = await stub.ListServers(
                request, metadata=(("authorization", "Bearer s3cret-token"),), timeout=5
            )
            assert reply.servers[0].name == "ok"
            health = health_pb2_grpc.HealthStub(channel)
            status = await health.Check(health_pb2.HealthCheckRequest(service=SERVICE), timeout=5)
            assert status.status == health_pb2.HealthCheckResponse.SERVING
            # Reflection describes the whole API: it needs the token too (health alone is open).
            reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
            anonymous = reflection.ServerReflectionInfo(timeout=5)
            # (the refusal may end the stream before the request is written: write raises it then)
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await _write_then_read(anonymous, reflection_pb2.ServerReflectionRequest(list_services=""))
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
            allowed = reflection.ServerReflectionInfo(
                metadata=(("authorization", "Bearer s3cret-token"),), timeout=5
            )
            await allowed.write(reflection_pb2.ServerReflectionRequest(list_services=""))
            listed = await allowed.read()
            await allowed.done_writing()
            assert SERVICE in {s.name for s in listed.list_services_response.service}
    finally:
        await running.stop(0)


async def test_tls_server_accepts_a_tls_client(tmp_path: Any) -> None:
    from datetime import UTC, datetime, timedelta

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=1))
        .not_valid_after(now + timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    (tmp_path / "c.pem").write_bytes(cert_pem)
    (tmp_path / "k.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    running = await _start(tls_cert_file=str(tmp_path / "c.pem"), tls_key_file=str(tmp_path / "k.pem"))
    try:
        creds = grpc.ssl_channel_credentials(root_certificates=cert_pem)
        async with grpc.aio.secure_channel(f"localhost:{running.port}", creds) as channel:
            reply = await mcp_pool_pb2_grpc.McpPoolStub(channel).ListServers(
                mcp_pool_pb2.ListServersRequest(), timeout=5
            )
        assert reply.servers[0].name == "ok"
    finally:
        await running.stop(0)
