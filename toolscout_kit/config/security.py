"""``toolscout.security``: TLS and bearer-token auth between the services."""

from __future__ import annotations

from pydantic import model_validator

from toolscout_kit.config._base import Strict

__all__ = ["SecuritySettings"]


class SecuritySettings(Strict):
    """TLS and bearer-token auth, shared by the three servers and their clients."""

    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    # CA bundle clients use to verify the servers (when TLS is on).
    tls_ca_file: str | None = None
    # Name of the environment variable holding the bearer token; auth is on when it is set.
    auth_token_env: str = "TOOLSCOUT_AUTH_TOKEN"  # noqa: S105 - the name of a variable, not a secret

    @model_validator(mode="after")
    def _cert_and_key_together(self) -> SecuritySettings:
        if bool(self.tls_cert_file) != bool(self.tls_key_file):
            raise ValueError("tls_cert_file and tls_key_file must be set together")
        return self
