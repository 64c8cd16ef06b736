"""Where OAuth credentials of remote MCP servers live at rest: one file only its owner can read.

The pool (as an OAuth client of remote MCP servers) and the CLI (`toolscout auth login`, `toolscout
connect`) share it. Each entry is keyed by (principal, issuer, resource): whose authorization it is
(``stack`` for the stack's own), the authorization server that issued it and the MCP server it is
for. An entry holds the tokens, when the access token expires, the client registration and the
authorization server's metadata (so a refresh after a restart reaches the right token endpoint).

The file is ``$TOOLSCOUT_TOKEN_FILE``, else ``$XDG_STATE_HOME/toolscout/oauth-tokens.json``, else
``~/.local/state/toolscout/oauth-tokens.json``; it is written atomically with mode 0600 in a 0700
folder, and a file that others can read is refused. With ``$TOOLSCOUT_TOKEN_KEY`` set (a Fernet key)
the whole file is encrypted with it; servers with per-user tokens require the key. A file encrypted
with a key of ``$TOOLSCOUT_TOKEN_KEY_PREVIOUS`` (rotation, see :mod:`toolscout_kit.token_keys`) is
read, and written under the current key on the next write or :meth:`TokenStore.renew`. Writers take an
exclusive lock on a sibling ``.lock`` file, so the CLI and a running pool never lose each other's
updates. Nothing here logs: tokens never reach a log line, a reply or a metric.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.fernet import InvalidToken

from toolscout_kit.errors import FailedPreconditionError
from toolscout_kit.token_keys import TOKEN_KEY_ENV, TOKEN_KEY_PREVIOUS_ENV, TokenKeys

__all__ = [
    "STACK_PRINCIPAL",
    "TOKEN_FILE_ENV",
    "TOKEN_KEY_ENV",
    "TOKEN_KEY_PREVIOUS_ENV",
    "CredentialKey",
    "TokenStore",
    "TokenStoreError",
    "default_token_file",
]

TOKEN_FILE_ENV = "TOOLSCOUT_TOKEN_FILE"  # noqa: S105 - a variable name
# The principal of the stack's own authorization of a server (not any user's).
STACK_PRINCIPAL = "stack"
_ENCRYPTED_PREFIX = b"fernet:"
_FORMAT_VERSION = 1


class TokenStoreError(FailedPreconditionError):
    """The token file cannot be used (readable by others, encrypted without the key, unreadable)."""


@dataclass(frozen=True, order=True)
class CredentialKey:
    """Whose credentials (principal), from which authorization server (issuer), for which MCP server."""

    principal: str
    issuer: str
    resource: str


def default_token_file(environ: Mapping[str, str] | None = None) -> Path:
    """``$TOOLSCOUT_TOKEN_FILE``, else the user's state folder's ``toolscout/oauth-tokens.json``."""
    env = os.environ if environ is None else environ
    if env.get(TOKEN_FILE_ENV):
        return Path(env[TOKEN_FILE_ENV]).expanduser()
    state = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "toolscout" / "oauth-tokens.json"


class TokenStore:
    """The credential file: read, change and write entries under an exclusive lock."""

    def __init__(self, path: Path, *, key: str | None = None, previous: tuple[str, ...] = ()) -> None:
        """``key``: a Fernet key (urlsafe base64 of 32 bytes); the file is encrypted with it.
        ``previous``: Fernet keys a file may still be encrypted with (read, never written).

        Raises:
            TokenStoreError: a key is not a Fernet key.
        """
        self.path = path
        try:
            # The current key first: it writes; every one reads.
            self._fernets = TokenKeys(key or "", previous).file_fernets()
        except ValueError as err:
            raise TokenStoreError(str(err)) from None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> TokenStore:
        """The store at :func:`default_token_file`, encrypted when ``$TOOLSCOUT_TOKEN_KEY`` is set
        (and read with ``$TOOLSCOUT_TOKEN_KEY_PREVIOUS`` too)."""
        env = os.environ if environ is None else environ
        keys = TokenKeys.from_env(env)
        return cls(default_token_file(env), key=keys.current or None, previous=keys.previous)

    @property
    def encrypted(self) -> bool:
        return bool(self._fernets)

    def renew(self) -> bool:
        """Rewrites the file under the current key if it was encrypted with a previous key (or not
        encrypted while a key is set); whether it did. A missing file is left missing.

        Raises:
            TokenStoreError: the file cannot be read (see :meth:`find`).
        """
        if not self._fernets or not self.path.exists():
            return False
        with self._locked():
            entries, current = self._read_checked()
            if current:
                return False
            self._write(entries)
            return True

    def find(self, principal: str, resource: str, issuer: str | None = None) -> dict[str, Any] | None:
        """The entry of ``principal`` for ``resource`` (from ``issuer`` when given, else the newest)."""
        matches = [
            (key, entry)
            for key, entry in self._read().items()
            if key.principal == principal
            and key.resource == resource
            and (issuer is None or key.issuer == issuer)
        ]
        if not matches:
            return None
        return max(matches, key=lambda item: float(item[1].get("updated_at", 0.0)))[1]

    def update(self, key: CredentialKey, fields: Mapping[str, Any]) -> None:
        """Merges ``fields`` into the entry at ``key`` (creating it)."""
        with self._locked():
            entries = self._read()
            entry = dict(entries.get(key, {}))
            entry.update(fields)
            entry["updated_at"] = time.time()
            entries[key] = entry
            self._write(entries)

    def remove(self, principal: str, resource: str | None = None) -> int:
        """Deletes ``principal``'s entries (for ``resource`` only, when given); returns how many."""
        with self._locked():
            entries = self._read()
            keep = {
                key: entry
                for key, entry in entries.items()
                if not (key.principal == principal and (resource is None or key.resource == resource))
            }
            if len(keep) != len(entries):
                self._write(keep)
            return len(entries) - len(keep)

    def entries(self) -> list[tuple[CredentialKey, dict[str, Any]]]:
        """Every entry, sorted by key."""
        return sorted(self._read().items())

    # --- the file ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self._folder()
        lock = self.path.with_name(self.path.name + ".lock")
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def _folder(self) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)

    def _read(self) -> dict[CredentialKey, dict[str, Any]]:
        return self._read_checked()[0]

    def _read_checked(self) -> tuple[dict[CredentialKey, dict[str, Any]], bool]:
        """The entries, and whether the file is as this store writes it (under the current key)."""
        try:
            info = self.path.stat()
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}, True
        except OSError as err:
            raise TokenStoreError(f"cannot read the token file {self.path}: {err.strerror}") from None
        if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise TokenStoreError(
                f"the token file {self.path} is readable by others: `chmod 600 {self.path}` (or remove it)"
            )
        current = not self._fernets
        if raw.startswith(_ENCRYPTED_PREFIX):
            if not self._fernets:
                raise TokenStoreError(f"the token file {self.path} is encrypted: set {TOKEN_KEY_ENV}")
            raw, current = self._decrypt(raw[len(_ENCRYPTED_PREFIX) :])
        try:
            document = json.loads(raw)
            entries = {
                CredentialKey(item["principal"], item["issuer"], item["resource"]): {
                    k: v for k, v in item.items() if k not in ("principal", "issuer", "resource")
                }
                for item in document["entries"]
            }
        except (ValueError, KeyError, TypeError):
            raise TokenStoreError(f"the token file {self.path} is not a toolscout token file") from None
        return entries, current

    def _decrypt(self, token: bytes) -> tuple[bytes, bool]:
        """The file's text, and whether the current key (not a previous one) opened it."""
        for index, fernet in enumerate(self._fernets):
            try:
                return fernet.decrypt(token), index == 0
            except InvalidToken:
                continue
        tried = f"{TOKEN_KEY_ENV} or {TOKEN_KEY_PREVIOUS_ENV}" if len(self._fernets) > 1 else TOKEN_KEY_ENV
        raise TokenStoreError(f"the token file {self.path} does not decrypt with {tried} (another key?)")

    def _write(self, entries: Mapping[CredentialKey, Mapping[str, Any]]) -> None:
        document = {
            "version": _FORMAT_VERSION,
            "entries": [
                {"principal": k.principal, "issuer": k.issuer, "resource": k.resource, **entry}
                for k, entry in sorted(entries.items())
            ],
        }
        raw = json.dumps(document, indent=1, sort_keys=True).encode()
        if self._fernets:
            raw = _ENCRYPTED_PREFIX + self._fernets[0].encrypt(raw)
        self._folder()
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)  # an existing temporary keeps its mode otherwise
        with os.fdopen(fd, "wb") as out:
            out.write(raw)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, self.path)
