"""Where the stack is (config or explicit targets), and how CLI failures become exit codes."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from toolscout.client import (
    InvalidArgumentError,
    NotFoundError,
    ToolscoutClient,
    ToolscoutClientError,
    ToolsetRef,
    UnavailableError,
)

from toolscout_cli.stack_state import StackRecord, find_record
from toolscout_kit.config import (
    CONFIG_ENV,
    DiscoverySettings,
    OrchestratorSettings,
    PoolSettings,
    ToolscoutConfig,
    load_config,
    resolve_config_path,
)
from toolscout_kit.errors import ConfigError
from toolscout_kit.shards import server_placements, shard_targets

__all__ = [
    "EXIT_ERROR",
    "EXIT_NOT_FOUND",
    "EXIT_OK",
    "EXIT_PROVIDER",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "TARGET_ENV",
    "CliError",
    "Targets",
    "exit_code_for",
    "load_optional_config",
    "program",
    "resolve_targets",
    "targets_for",
]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_UNREACHABLE = 4
EXIT_PROVIDER = 5
DEFAULT_TOKEN_ENV = "TOOLSCOUT_AUTH_TOKEN"  # noqa: S105 - the name of a variable, not a secret
# Where the stack is, when neither the flags nor the config say: TOOLSCOUT_TARGET for all three,
# TOOLSCOUT_<SERVICE>_TARGET for one (like --target and --<service>-target).
TARGET_ENV = "TOOLSCOUT_TARGET"


class CliError(Exception):
    """A failure the CLI reports in one line, with its exit code."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def toolset_arg(args: argparse.Namespace) -> ToolsetRef:
    """The toolset of ``--toolset`` / ``--toolset-json``, sent as given (both: discovery refuses the pair)."""
    return ToolsetRef(name=args.toolset or "", filter_json=getattr(args, "toolset_json", None) or "")


def program() -> str:
    """How to run this command again from this directory, in another terminal.

    ``make up`` runs the command from the project's virtual environment, whose ``bin`` a new
    terminal does not have on PATH, so the answer there is ``.venv/bin/toolscout``. Plain
    ``toolscout`` only for an installation outside any virtual environment that PATH finds.
    """
    script = Path(sysconfig.get_path("scripts")) / "toolscout"
    if not script.is_file():
        return f"{sys.executable} -m toolscout_cli"
    here = Path.cwd().resolve()
    if script.resolve().parent.parent.parent == here:  # ./<venv>/bin/toolscout: the project's own
        return str(script.resolve().relative_to(here))
    on_path = shutil.which("toolscout")
    if sys.prefix == sys.base_prefix and on_path and Path(on_path).resolve() == script.resolve():
        return "toolscout"
    return str(script)


def exit_code_for(err: ToolscoutClientError) -> int:
    if isinstance(err, NotFoundError):
        return EXIT_NOT_FOUND
    if isinstance(err, UnavailableError):
        return EXIT_UNREACHABLE
    if isinstance(err, InvalidArgumentError):
        return EXIT_USAGE
    return EXIT_ERROR


def client_target(listen: str) -> str:
    """The address a local client dials for a server's ``listen`` address (wildcards → loopback)."""
    host, sep, port = listen.rpartition(":")
    if not sep:
        return listen
    if host in ("", "0.0.0.0", "[::]", "::", "*"):  # noqa: S104 - translating a wildcard, not binding one
        return f"127.0.0.1:{port}"
    return listen


def load_optional_config(path: str | None) -> tuple[ToolscoutConfig | None, StackRecord | None]:
    """The config from ``--config`` or ``TOOLSCOUT_CONFIG`` (``None`` when neither is given), and
    the ``toolscout up`` stack running from it, if any (:mod:`toolscout_cli.stack_state`). The
    config is read as that stack runs it (e.g. with the shard count of ``--pool-shards``).

    Raises:
        CliError: the config is invalid (exit 2).
    """
    if not path and not os.environ.get(CONFIG_ENV):
        return None, None
    try:
        resolved = resolve_config_path(path)
        record = find_record(resolved)
        return load_config(resolved, overrides=record.overrides if record else None), record
    except ConfigError as err:
        raise CliError(err.message, EXIT_USAGE) from None


@dataclass(frozen=True)
class Targets:
    # One address, or a sharded pool's shards comma-separated in shard order.
    pool: str
    discovery: str
    orchestrator: str
    tls: bool = False
    root_certificates: bytes | None = None
    token: str | None = None
    config: ToolscoutConfig | None = None

    def connect(self) -> ToolscoutClient:
        shards = [part.strip() for part in self.pool.split(",") if part.strip()]
        return ToolscoutClient.connect(
            pool=shards if len(shards) > 1 else self.pool,
            placement=server_placements(self.config) if self.config else None,
            discovery=self.discovery,
            orchestrator=self.orchestrator,
            tls=self.tls,
            root_certificates=self.root_certificates,
            token=self.token,
        )

    def describe(self, service: str) -> str:
        return {"pool": self.pool, "discovery": self.discovery, "orchestrator": self.orchestrator}[service]


def targets_for(
    config: ToolscoutConfig | None,
    pool: str,
    discovery: str,
    orchestrator: str,
    *,
    tls: bool = False,
    ca_file: str | None = None,
) -> Targets:
    """Targets with the config's TLS and token settings (token from its ``auth_token_env``).

    Raises:
        CliError: the CA file cannot be read (exit 2).
    """
    security = config.toolscout.security if config else None
    if not ca_file and config is not None and security is not None and security.tls_ca_file:
        ca_file = str(config.resolve_path(security.tls_ca_file))
    use_tls = bool(tls or ca_file or (security and security.tls_cert_file))
    root: bytes | None = None
    if ca_file:
        try:
            root = Path(ca_file).read_bytes()
        except OSError as err:
            raise CliError(f"cannot read CA file {ca_file}: {err.strerror}", EXIT_USAGE) from None
    token_env = security.auth_token_env if security else DEFAULT_TOKEN_ENV
    return Targets(
        pool=pool,
        discovery=discovery,
        orchestrator=orchestrator,
        tls=use_tls,
        root_certificates=root,
        token=os.environ.get(token_env) or None,
        config=config,
    )


def resolve_targets(args: argparse.Namespace) -> Targets:
    """Targets from ``--pool-target`` & co, else ``--target``, else ``TOOLSCOUT_POOL_TARGET`` & co, else
    ``TOOLSCOUT_TARGET``, else where a ``toolscout up`` running from the config listens (its
    record), else the config's listen addresses (for a sharded pool, the shard addresses of
    ``toolscout.pool.shards``). A pool target may list every shard, comma-separated.

    Raises:
        CliError: bad config or unreadable CA file (exit 2).
    """
    config, record = load_optional_config(args.config)
    settings = config.toolscout if config else None
    pool_settings = settings.pool if settings else PoolSettings()
    try:
        shards = shard_targets(pool_settings.shards)
    except ConfigError:
        shards = None  # sharded without shard addresses: only flags or the environment can say
    defaults = {
        "pool": ",".join(shards) if shards else pool_settings.listen,
        "discovery": (settings.discovery if settings else DiscoverySettings()).listen,
        "orchestrator": (settings.orchestrator if settings else OrchestratorSettings()).listen,
    }
    if record is not None:
        defaults = {"pool": record.pool, "discovery": record.discovery, "orchestrator": record.orchestrator}
    # Flags first, then the environment, then the running stack or the config (or the default ports).
    chosen = {
        name: getattr(args, f"{name}_target", None)
        or args.target
        or os.environ.get(f"TOOLSCOUT_{name.upper()}_TARGET")
        or os.environ.get(TARGET_ENV)
        or ",".join(client_target(one) for one in listen.split(","))
        for name, listen in defaults.items()
    }
    return targets_for(
        config,
        chosen["pool"],
        chosen["discovery"],
        chosen["orchestrator"],
        tls=args.tls,
        ca_file=args.ca_file,
    )
