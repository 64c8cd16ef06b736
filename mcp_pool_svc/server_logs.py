"""What MCP servers write to stderr, as one JSON log event per line with secrets masked.

A server's stderr is not ours: it can print anything it was given, and servers do print their
configuration. Before a line reaches the logs, the values of that server's ``env``, every API key
and the auth token the stack is configured with are replaced by ``[REDACTED]``, and then the
kit's :func:`~toolscout_kit.logging.redact` masks bearer tokens and key-shaped strings.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from toolscout_kit.config import StdioServerConfig, ToolscoutConfig
from toolscout_kit.logging import get_logger, redact

__all__ = ["MASK", "StderrLog"]

log = get_logger(__name__)

MASK = "[REDACTED]"
# Environment values shorter than this are masked only under a secret-looking name: masking
# "true", "info" or "8080" everywhere would garble ordinary lines without protecting anything.
_MIN_PLAIN_SECRET = 8
_MIN_NAMED_SECRET = 3
_SECRET_NAME = re.compile(r"key|token|secret|passw|credential|auth|cookie|private", re.IGNORECASE)
_PROVIDER_KEY_ENV = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")


def _env_secrets(env: Mapping[str, str]) -> list[str]:
    found = []
    for name, value in env.items():
        least = _MIN_NAMED_SECRET if _SECRET_NAME.search(name) else _MIN_PLAIN_SECRET
        if len(value) >= least:
            found.append(value)
    return found


def _longest_first(values: Iterable[str]) -> tuple[str, ...]:
    # Longest first, so that a secret containing another is masked whole.
    return tuple(sorted({v for v in values if v}, key=len, reverse=True))


class StderrLog:
    """``StderrLog(config, environ)(server, line)`` logs one stderr line of one server."""

    def __init__(self, config: ToolscoutConfig, environ: Mapping[str, str]) -> None:
        shared = [c.api_key.get_secret_value() for c in config.clients.values() if c.api_key is not None]
        shared += [environ.get(name, "") for name in _PROVIDER_KEY_ENV]
        shared.append(environ.get(config.toolscout.security.auth_token_env, ""))
        self._secrets = {
            name: _longest_first(
                [*shared, *(_env_secrets(server.env) if isinstance(server, StdioServerConfig) else ())]
            )
            for name, server in config.servers.items()
        }

    def mask(self, server: str, line: str) -> str:
        for secret in self._secrets.get(server, ()):
            line = line.replace(secret, MASK)
        return redact(line)

    def __call__(self, server: str, line: str) -> str:
        """Logs the line masked; returns the masked line."""
        masked = self.mask(server, line)
        log.info("mcp_server_stderr", server=server, line=masked)
        return masked
