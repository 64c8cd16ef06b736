"""The deployment's secret, ``$TOOLSCOUT_TOKEN_KEY``, every key made from it, and its rotation.

One secret protects three things, and this module is the one place their keys come from:

- the token file (:mod:`toolscout_kit.token_store`) is encrypted with the secret itself, which is
  therefore a Fernet key (:meth:`TokenKeys.file_fernets`);
- the gateway's login links and sign-in state of ``per_user`` servers
  (:mod:`mcp_gateway_svc.user_login`) are signed and sealed with keys derived from it
  (:attr:`KeyUse.LOGIN_TICKET`, :attr:`KeyUse.LOGIN_STATE`);
- the ``requestState`` of 2026-07-28 ``input_required`` rounds (:mod:`mcp_gateway_svc.input_rounds`)
  is sealed with a key derived from it (:attr:`KeyUse.REQUEST_STATE`).

Each derived key is SHA-256 of the use's label, a NUL and the secret, so one use's key says nothing
about another's.

Rotation: ``$TOOLSCOUT_TOKEN_KEY_PREVIOUS`` holds the keys being retired (one, or several separated
by commas). The current key always writes, signs and seals; the current key and every previous one
read, verify and open. So a token file, a login link or a round made under an old key keeps working
while the deployment moves to a new one, and the token store rewrites a file read with a previous
key under the current one (at the pool's start and on every write). Previous keys count only with a
current key.
"""

from __future__ import annotations

import base64
import enum
import hashlib
import hmac
import os
from collections.abc import Mapping
from dataclasses import dataclass

from cryptography.fernet import Fernet, MultiFernet

__all__ = ["TOKEN_KEY_ENV", "TOKEN_KEY_PREVIOUS_ENV", "KeyUse", "TokenKeys", "fernet_key_hint"]

TOKEN_KEY_ENV = "TOOLSCOUT_TOKEN_KEY"  # noqa: S105 - a variable name
TOKEN_KEY_PREVIOUS_ENV = "TOOLSCOUT_TOKEN_KEY_PREVIOUS"  # noqa: S105 - a variable name


def fernet_key_hint(variable: str) -> str:
    """What to tell an operator whose ``variable`` is not a Fernet key."""
    return (
        f"{variable} is not a Fernet key (32 random bytes, urlsafe base64; make one with "
        '`python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"`)'
    )


class KeyUse(enum.Enum):
    """What a derived key protects; the value is its derivation label (never change one: every
    sealed value of that use would stop opening)."""

    LOGIN_TICKET = b"toolscout login ticket"
    LOGIN_STATE = b"toolscout login state"
    REQUEST_STATE = b"toolscout request state"


@dataclass(frozen=True, slots=True)
class TokenKeys:
    """The current key ("" when none is set) and the previous ones still accepted for reading."""

    current: str = ""
    previous: tuple[str, ...] = ()

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> TokenKeys:
        """``$TOOLSCOUT_TOKEN_KEY`` and ``$TOOLSCOUT_TOKEN_KEY_PREVIOUS`` (comma-separated)."""
        env = os.environ if environ is None else environ
        current = env.get(TOKEN_KEY_ENV, "").strip()
        listed = (part.strip() for part in env.get(TOKEN_KEY_PREVIOUS_ENV, "").split(","))
        return cls(current, tuple(dict.fromkeys(p for p in listed if p and p != current)))

    def __bool__(self) -> bool:
        return bool(self.current)

    @property
    def ring(self) -> tuple[str, ...]:
        """The current key then the previous ones (empty without a current key)."""
        return (self.current, *self.previous) if self.current else ()

    def derived(self, use: KeyUse) -> list[bytes]:
        """The 32-byte keys of ``use``: the current key's first (it seals), then the previous ones'."""
        return [hashlib.sha256(use.value + b"\0" + key.encode()).digest() for key in self.ring]

    def sealer(self, use: KeyUse) -> MultiFernet | None:
        """Fernet over the derived keys of ``use``: encrypts with the current, decrypts with any."""
        keys = self.derived(use)
        return MultiFernet([Fernet(base64.urlsafe_b64encode(k)) for k in keys]) if keys else None

    def sign(self, use: KeyUse, message: bytes) -> bytes:
        """HMAC-SHA256 of ``message`` with the current key of ``use``.

        Raises:
            ValueError: no key is set.
        """
        keys = self.derived(use)
        if not keys:
            raise ValueError(f"{TOKEN_KEY_ENV} is not set")
        return hmac.new(keys[0], message, hashlib.sha256).digest()

    def verify(self, use: KeyUse, message: bytes, signature: bytes) -> bool:
        """Whether ``signature`` is the HMAC of ``message`` under any key of ``use`` (constant time)."""
        return any(
            hmac.compare_digest(hmac.new(key, message, hashlib.sha256).digest(), signature)
            for key in self.derived(use)
        )

    def file_fernets(self) -> list[Fernet]:
        """The token file's Fernet of each key, the current one first.

        Raises:
            ValueError: a key is not a Fernet key (the message names its variable, never the key).
        """
        fernets = []
        for index, key in enumerate(self.ring):
            try:
                fernets.append(Fernet(key.encode()))
            except ValueError:
                raise ValueError(
                    fernet_key_hint(TOKEN_KEY_ENV if index == 0 else TOKEN_KEY_PREVIOUS_ENV)
                ) from None
        return fernets
