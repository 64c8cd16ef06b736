"""Outbound channels from one toolscout service to another.

The channel policy (retries on UNAVAILABLE declared in the service config, ``round_robin`` over
every address a DNS name resolves to, keepalive, bearer token) is the client library's
:func:`toolscout.client.create_channel`; this module only feeds it the servers' own security
settings, so services and external callers share one definition.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import grpc
from toolscout.client import create_channel as _create_client_channel
from toolscout.client.channel import ChannelOption

from toolscout_kit.config import SecuritySettings
from toolscout_kit.errors import ConfigError

__all__ = ["create_channel"]


def create_channel(
    target: str, security: SecuritySettings, *, options: Sequence[ChannelOption] = ()
) -> grpc.aio.Channel:
    """An aio channel to another toolscout service, using the config's TLS and token settings.

    ``options`` are extra channel arguments (they win over the library's defaults).

    Raises:
        ConfigError: the CA file cannot be read, or the target is empty.
    """
    root: bytes | None = None
    if security.tls_ca_file:
        try:
            with open(security.tls_ca_file, "rb") as fh:
                root = fh.read()
        except OSError as err:
            raise ConfigError(f"TLS: cannot read {err.filename}: {err.strerror}") from None
    token = os.environ.get(security.auth_token_env) or None
    try:
        return _create_client_channel(
            target,
            tls=bool(security.tls_ca_file or security.tls_cert_file),
            root_certificates=root,
            token=token,
            options=options,
        )
    except ValueError as err:
        raise ConfigError(f"cannot connect to {target!r}: {err}") from None
