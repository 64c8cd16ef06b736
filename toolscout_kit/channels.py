"""Outbound channels from one toolscout service to another.

Retries on UNAVAILABLE are declared in the channel's service config (never hand-written loops),
``round_robin`` balances calls over every address a DNS name resolves to (headless Services), and
the bearer token and TLS settings are the same ones the servers use.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

import grpc

from toolscout_kit.config import SecuritySettings
from toolscout_kit.errors import ConfigError

__all__ = ["SERVICE_CONFIG", "create_channel"]

_SERVICES: Sequence[str] = (
    "toolscout.mcp_pool.v1.McpPool",
    "toolscout.discovery.v1.Discovery",
    "toolscout.orchestrator.v1.Orchestrator",
)

SERVICE_CONFIG = json.dumps(
    {
        "loadBalancingConfig": [{"round_robin": {}}],
        "methodConfig": [
            {
                "name": [{"service": s} for s in _SERVICES],
                "retryPolicy": {
                    "maxAttempts": 4,
                    "initialBackoff": "0.1s",
                    "maxBackoff": "2s",
                    "backoffMultiplier": 2,
                    "retryableStatusCodes": ["UNAVAILABLE"],
                },
            }
        ],
    }
)

_OPTIONS = [
    ("grpc.service_config", SERVICE_CONFIG),
    ("grpc.enable_retries", 1),
    ("grpc.keepalive_time_ms", 20_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
]


class _BearerToken(grpc.aio.UnaryUnaryClientInterceptor, grpc.aio.UnaryStreamClientInterceptor):
    """Adds ``authorization: Bearer`` metadata (works on insecure loopback channels too)."""

    def __init__(self, token: str) -> None:
        self._header = ("authorization", f"Bearer {token}")

    def _details(self, details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
        metadata = grpc.aio.Metadata(*(details.metadata or ()))
        metadata.add(*self._header)
        return grpc.aio.ClientCallDetails(
            details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
        )

    async def intercept_unary_unary(self, continuation, client_call_details, request):  # type: ignore[no-untyped-def]
        return await continuation(self._details(client_call_details), request)

    async def intercept_unary_stream(self, continuation, client_call_details, request):  # type: ignore[no-untyped-def]
        return await continuation(self._details(client_call_details), request)


def create_channel(target: str, security: SecuritySettings) -> grpc.aio.Channel:
    """An aio channel to another toolscout service, with retries, round_robin, TLS and token.

    Raises:
        ConfigError: the CA file cannot be read.
    """
    token = os.environ.get(security.auth_token_env, "")
    interceptors = [_BearerToken(token)] if token else None
    if security.tls_ca_file or security.tls_cert_file:
        root: bytes | None = None
        if security.tls_ca_file:
            try:
                with open(security.tls_ca_file, "rb") as fh:
                    root = fh.read()
            except OSError as err:
                raise ConfigError(f"TLS: cannot read {err.filename}: {err.strerror}") from None
        creds = grpc.ssl_channel_credentials(root_certificates=root)
        return grpc.aio.secure_channel(target, creds, options=_OPTIONS, interceptors=interceptors)
    return grpc.aio.insecure_channel(target, options=_OPTIONS, interceptors=interceptors)
