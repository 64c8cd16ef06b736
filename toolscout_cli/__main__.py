"""The ``toolscout`` command line: run the stack, inspect it, search, call tools and chat.

Exit codes: 0 ok · 1 other failure (a tool that reported an error, an internal error) ·
2 usage or bad config (a chat model whose client has no API key in the stack's environment
included) · 3 not found (tool, server, model, toolset) · 4 stack unreachable ·
5 the LLM provider failed (unreachable, rate limited, or refused the key).
Errors are one line on stderr, never a traceback.
"""

from __future__ import annotations

import os

# gRPC's C core logs TLS handshake failures itself ("I1122 ... ssl_transport_security.cc ...");
# the CLI reports them in its own one line. Set before grpc is imported; a user's choice wins.
os.environ.setdefault("GRPC_VERBOSITY", "NONE")

import argparse
import sys
import sysconfig
from collections.abc import Callable, Collection, Sequence
from importlib import metadata
from typing import Any

from toolscout.client import FailedPreconditionError, NotFoundError, ToolscoutClientError, UnavailableError

from toolscout_cli.chat import run_chat
from toolscout_cli.commands import COMMANDS
from toolscout_cli.connection import (
    EXIT_ERROR,
    EXIT_NOT_FOUND,
    EXIT_PROVIDER,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    CliError,
    Targets,
    exit_code_for,
    resolve_targets,
)
from toolscout_cli.not_found import explain_not_found
from toolscout_cli.output import Output
from toolscout_cli.stack_state import shard_overrides
from toolscout_kit.config import CONFIG_ENV, ToolscoutConfig, load_config, resolve_config_path
from toolscout_kit.errors import ConfigError

__all__ = ["build_parser", "main"]

_SERVICES = {
    "toolscout.mcp_pool.v1.McpPool": "pool",
    "toolscout.discovery.v1.Discovery": "discovery",
    "toolscout.orchestrator.v1.Orchestrator": "orchestrator",
}
_CONNECT_FAILURES = (
    "failed to connect",
    "connection refused",
    "dns resolution failed",
    "unreachable",
    "not reachable",
    "no healthy",
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # One line and exit 2, like every other usage error of this CLI (argparse prints usage too).
        self.exit(EXIT_USAGE, f"toolscout: {message} (see `{self.prog} --help`)\n")


def _toolset_options(parser: argparse.ArgumentParser, help_text: str) -> None:
    parser.add_argument("--toolset", help=help_text)
    parser.add_argument(
        "--toolset-json",
        metavar="JSON",
        help="an inline toolset instead of --toolset, in the tool_sets shape: "
        + """'{"servers": {"weather": true}}'""",
    )


def _common(parser: argparse.ArgumentParser, *, top: bool, hidden: Collection[str] = ()) -> None:
    """The options every command takes; ``hidden`` ones are still parsed (and then refused by
    ``_check_stack_options`` with the reason) but not shown in the command's help."""
    # On subcommands the defaults are SUPPRESS, so `toolscout -c x tools` and `toolscout tools -c x`
    # both work and the later one wins.
    d: dict[str, Any] = {} if top else {"default": argparse.SUPPRESS}

    def shown(flag: str, text: str) -> str:
        return argparse.SUPPRESS if flag in hidden else text

    g = parser.add_argument_group("stack")
    g.add_argument("-c", "--config", help=f"config file (JSON or YAML); default ${CONFIG_ENV}", **d)
    g.add_argument(
        "--target", metavar="HOST:PORT", help=shown("--target", "address for all three services"), **d
    )
    g.add_argument(
        "--pool-target",
        metavar="HOST:PORT[,...]",
        help=shown(
            "--pool-target",
            "address of the pool; of a sharded pool, every shard's, comma-separated in shard order",
        ),
        **d,
    )
    for service in ("discovery", "orchestrator"):
        flag = f"--{service}-target"
        g.add_argument(flag, metavar="HOST:PORT", help=shown(flag, f"address of the {service}"), **d)
    g.add_argument(
        "--tls",
        action="store_true",
        help=shown("--tls", "connect with TLS (system roots unless --ca-file)"),
        **d,
    )
    g.add_argument(
        "--ca-file",
        metavar="PEM",
        help=shown("--ca-file", "CA bundle to verify the servers (implies --tls)"),
        **d,
    )
    g.add_argument("--json", action="store_true", help=shown("--json", "machine-readable JSON output"), **d)


# Options `up` / `serve` refuse (see _check_stack_options), left out of their help.
_UP_HIDDEN = (
    "--target",
    "--pool-target",
    "--discovery-target",
    "--orchestrator-target",
    "--tls",
    "--ca-file",
)
_SERVE_HIDDEN = ("--target", "--orchestrator-target", "--tls", "--ca-file", "--json")


def _stack_commands(command: Callable[..., argparse.ArgumentParser]) -> None:
    """``up`` and ``serve``: the commands that run services rather than talk to them."""
    p = command(
        "up",
        "run the whole stack (pool, discovery, orchestrator, MCP gateway) from one config until Ctrl-C",
        hidden=_UP_HIDDEN,
    )
    p.add_argument(
        "--log-level",
        default=None,
        help="service log level (default: INFO into a log file, which includes the MCP servers' "
        "stderr; WARNING onto stderr)",
    )
    p.add_argument(
        "--log-file",
        metavar="PATH",
        help="where logs and the MCP servers' stderr go (default: stderr with --json, else a temporary file)",
    )
    p.add_argument(
        "--walkthrough", action="store_true", help="once up, show servers, tools, a search, a call, savings"
    )
    p.add_argument(
        "--pool-shards",
        type=int,
        default=None,
        metavar="N",
        help="run the pool as N shards, each its own process on a free port (sets the config's "
        "toolscout.pool.shards.count; default: that count)",
    )
    p = command("serve", "run one service in the foreground (logs JSON to stdout)", hidden=_SERVE_HIDDEN)
    p.add_argument("service", choices=("pool", "discovery", "orchestrator", "gateway"))
    p.add_argument("--listen", metavar="HOST:PORT", help="override the config's listen address")
    p.add_argument(
        "--metrics-port", type=int, metavar="PORT", help="override the metrics port (0 = any, -1 = off)"
    )
    p.add_argument("--shard", metavar="K/N", help="pool only: this process is shard K of N")
    p.add_argument("--log-level", default=None, help="override toolscout.log_level")


def _remote_commands(command: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """``connect`` and ``auth``: the commands that talk to an MCP server directly, as the pool does."""

    def authorization(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--headless",
            action="store_true",
            help="fetch the authorization URL here instead of in a browser (for authorization servers "
            "that approve without a person, as test servers do)",
        )
        p.add_argument("--no-browser", action="store_true", help="only print the authorization URL")

    p = command(
        "connect",
        "connect to one MCP server as the pool would (authorizing with OAuth 2.1 if it asks), print "
        "its revision, capabilities and tools, optionally call one",
    )
    p.add_argument("url", help="the server's URL (streamable HTTP; SSE when it ends in /sse)")
    p.add_argument("--call", metavar="TOOL", help="call this tool once connected")
    p.add_argument("--args", default="", metavar="JSON", help="the call's arguments, a JSON object")
    authorization(p)
    p.add_argument(
        "--client-id", metavar="ID", help="a client registered beforehand at the authorization server"
    )
    p.add_argument("--client-secret", metavar="SECRET", help="that client's secret")
    p.add_argument(
        "--client-metadata-url",
        metavar="URL",
        help="an https URL of this client's metadata document, used as its client id where the "
        "authorization server supports that (instead of registering)",
    )
    p.add_argument("--scope", action="append", metavar="SCOPE", help="a scope to ask for (repeatable)")
    p.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS", help="connect and call timeout")
    p = command("auth", "the stack's OAuth authorization of a configured server (the tokens the pool uses)")
    p.add_argument(
        "action",
        choices=("login", "status", "logout", "rekey"),
        help="rekey: rewrite the token file under TOOLSCOUT_TOKEN_KEY (after a key rotation)",
    )
    p.add_argument("server", nargs="?", help="a server of the config (status: every one with auth)")
    authorization(p)


def _version() -> str:
    # The installed distributions' versions, both built from toolscout/client/_version.py.
    return (
        f"toolscout {metadata.version('toolscout')} (toolscout-client {metadata.version('toolscout-client')})"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="toolscout",
        description="Deferred MCP tool loading for LLMs: run the toolscout stack and talk to it.",
        epilog=(
            "Commands other than up/serve talk to a running stack: the config's listen addresses, or "
            "--target (or TOOLSCOUT_TARGET).\nExit codes: 0 ok, 1 failure (e.g. the tool reported an "
            "error), 2 usage or bad config, 3 not found, 4 stack unreachable, 5 LLM provider failed."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=_version())
    _common(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    def command(name: str, help_text: str, hidden: Collection[str] = ()) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        _common(p, top=False, hidden=hidden)
        return p

    _stack_commands(command)
    command("servers", "MCP servers: state, tools, restarts, last error")
    p = command("tools", "the tool catalog, with loaded/deferred status")
    p.add_argument("--server", help="only this server's tools")
    p.add_argument("--toolset", help="only the tools of this toolset")
    p = command("describe", "one tool: description, every argument (nested ones too) and an example call")
    p.add_argument("tool", help="LLM name (e.g. weather__get_forecast), or the tool's own name with --server")
    p.add_argument("--server", help="the tool's server (then TOOL is its own name)")
    command("toolsets", "the configured toolsets")
    command("models", "the configured models")
    p = command("manifest", "the manifest of deferred tools the LLM sees")
    _toolset_options(p, "toolset (default: every tool)")
    p.add_argument("--provider", help="token encoding: openai (default), anthropic, ollama")
    p = command("search", "search the tools like the LLM's search_tools does")
    p.add_argument("query", nargs="?", default="", help="keywords")
    p.add_argument("--server", help="browse or scope to this server")
    _toolset_options(p, "search only this toolset")
    p.add_argument("--tool", action="append", help="exact tool name to load (repeatable)")
    p.add_argument("--limit", type=int, help="maximum results (default: the config's max_search_results)")
    p.add_argument("--offset", type=int, help="skip results of a server browse")
    p.add_argument("--llm-text", action="store_true", help="print the text the LLM receives")
    p.add_argument(
        "--explain", action="store_true", help="also print each match's BM25 score and cosine similarity"
    )
    p = command("call", "call one tool")
    p.add_argument(
        "tool", help="LLM name (e.g. time__get_current_time), or the tool's own name with --server"
    )
    p.add_argument(
        "--args",
        default="",
        metavar="JSON",
        help="arguments as a JSON object (`toolscout describe TOOL` shows them)",
    )
    p.add_argument("--server", help="the tool's server (then TOOL is its own name)")
    p.add_argument("--call-timeout", type=float, metavar="SECONDS", help="tool call timeout")
    p = command("chat", "chat with a model using the tools (one-shot or interactive)")
    p.add_argument("message", nargs="?", help="one message; without it, read messages from the terminal")
    p.add_argument("-m", "--model", help="model name from the config's models")
    _toolset_options(p, "toolset the chat may use")
    p.add_argument("--system", help="system prompt (overrides the model's template)")
    p.add_argument("--show-reasoning", action="store_true", help="show the model's reasoning as it streams")
    p.add_argument(
        "--as",
        dest="principal",
        metavar="PRINCIPAL",
        help="the user the chat runs for (x-toolscout-principal: per_user servers use their token)",
    )
    _remote_commands(command)
    p = command("tokens", "tool-definition tokens with and without discovery, per server")
    p.add_argument("--toolset", help="toolset (default: every tool)")
    p.add_argument(
        "--provider", help="count as this provider does: openai (default, o200k), anthropic (cl100k), ollama"
    )
    return parser


def _normalise(args: argparse.Namespace) -> None:
    for name in ("config", "target", "pool_target", "discovery_target", "orchestrator_target", "ca_file"):
        if not hasattr(args, name):
            setattr(args, name, None)
    for name in ("tls", "json"):
        if not hasattr(args, name):
            setattr(args, name, False)


def _unreachable_message(err: UnavailableError, targets: Targets | None) -> str | None:
    text = err.message.lower()
    tls_failed = "handshake failed" in text
    if not tls_failed and not any(marker in text for marker in _CONNECT_FAILURES):
        return None
    service = _SERVICES.get(err.method.split("/")[1] if err.method.count("/") >= 2 else "", "")
    where = f" at {targets.describe(service)}" if targets and service else ""
    if tls_failed:
        return (
            f"cannot reach the {service or 'stack'}{where} over TLS: the TLS handshake failed. "
            "Does the stack serve TLS? Without `security.tls_cert_file` it serves plaintext: drop --tls"
        )
    return (
        f"cannot reach the {service or 'stack'}{where}: is the stack running? "
        "Start it with `toolscout up -c CONFIG`, or pass --target HOST:PORT"
    )


def _provider_failed(err: ToolscoutClientError) -> bool:
    # The orchestrator words every provider failure "provider '<client>' ..." (after its retries).
    return err.method.endswith(("/Chat", "/StreamChat")) and err.message.startswith("provider ")


def _model_not_configured(err: ToolscoutClientError) -> bool:
    # The stack cannot run the model as configured (its client has no API key in the stack's
    # environment, its prompt template does not load): configuration, like exit 2 elsewhere.
    return isinstance(err, FailedPreconditionError) and err.method.endswith(("/Chat", "/StreamChat"))


def _own_scripts_on_path() -> None:
    # Servers configured as "python ..." (the example config's are) need the Python that runs
    # toolscout, which has the MCP SDK: `uv run` and an activated venv put it first on PATH; so
    # does this, for `.venv/bin/toolscout up` started from a plain shell.
    scripts = sysconfig.get_path("scripts")
    parts = os.environ.get("PATH", "").split(os.pathsep)
    if scripts not in parts:
        os.environ["PATH"] = os.pathsep.join([scripts, *parts])


def _check_templates(config: ToolscoutConfig, path: str | None) -> None:
    # A model whose system prompt template is missing or broken would fail at its first chat.
    from orchestrator_svc import check_templates  # noqa: PLC0415 - jinja2 only for up/serve

    try:
        check_templates(config)
    except ConfigError as err:
        source = resolve_config_path(path)
        raise CliError(
            "\n".join(f"{source}: {line}" for line in err.message.splitlines()), EXIT_USAGE
        ) from None


# What `up` and `serve SERVICE` make of the options every command takes (the rest are refused):
# a service started by `serve` calls the services named here, at the address given.
_CALLS = {
    "up": (),
    "pool": (),
    "discovery": ("pool_target",),
    "orchestrator": ("pool_target", "discovery_target"),
    "gateway": ("pool_target", "discovery_target"),
}
_WHY_NOT = {
    "target": "--listen sets where it listens; --pool-target / --discovery-target where it calls",
    "tls": "TLS comes from the config's toolscout.security",
    "ca_file": "TLS comes from the config's toolscout.security",
    "json": "it logs JSON to stdout",
}


def _check_stack_options(args: argparse.Namespace) -> None:
    """Refuses the options ``up`` / ``serve SERVICE`` cannot use, rather than ignoring them.

    Raises:
        CliError: such an option was given (exit 2).
    """
    command = "up" if args.command == "up" else f"serve {args.service}"
    usable = _CALLS["up" if args.command == "up" else args.service]
    names = ["target", "pool_target", "discovery_target", "orchestrator_target", "tls", "ca_file"]
    if args.command == "serve":
        names.append("json")  # `up --json` prints JSON events
    for name in names:
        if getattr(args, name) and name not in usable:
            flag = "--" + name.replace("_", "-")
            why = _WHY_NOT.get(name) or (
                "it runs every service itself"
                if args.command == "up"
                else f"it does not call the {name[:-7]}"
            )
            raise CliError(f"{flag}: not an option of `toolscout {command}` ({why})", EXIT_USAGE)
    if args.command == "up" and args.pool_shards is not None and args.pool_shards < 1:
        raise CliError(f"--pool-shards {args.pool_shards}: need at least one shard", EXIT_USAGE)
    if args.command == "serve" and args.shard and args.service != "pool":
        raise CliError("--shard is for `serve pool` only", EXIT_USAGE)


def _run(args: argparse.Namespace, out: Output) -> int:
    if args.command in ("up", "serve"):
        _check_stack_options(args)
        # `up --pool-shards N` sets the shard count before the config is checked (pinned servers).
        overrides = shard_overrides(args.pool_shards) if args.command == "up" and args.pool_shards else {}
        try:
            config = load_config(args.config, overrides=overrides)
        except ConfigError as err:
            raise CliError(err.message, EXIT_USAGE) from None
        for warning in config.load_warnings:
            out.note(f"toolscout: warning: {warning}")
        if args.command == "up" or args.service == "orchestrator":
            _check_templates(config, args.config)
        _own_scripts_on_path()
        # Lazily, after the config is known to be good: the services pull in the MCP and provider
        # SDKs (seconds of imports), which the query commands never need.
        from toolscout_cli.stack import run_serve, run_up  # noqa: PLC0415

        source = args.config or os.environ.get(CONFIG_ENV, "")
        if args.command == "up":
            return run_up(
                config,
                out,
                source=source,
                log_level=args.log_level,
                walkthrough=args.walkthrough,
                log_file=args.log_file,
                overrides=overrides,
            )
        return run_serve(
            args.service,
            config,
            listen=args.listen,
            log_level=args.log_level or config.toolscout.log_level,
            metrics_port=args.metrics_port,
            shard=args.shard,
            config_path=source or None,
            pool_target=args.pool_target,
            discovery_target=args.discovery_target,
        )
    if args.command in ("connect", "auth"):
        # Lazily: the MCP SDK's imports, which the stack's query commands never need.
        from toolscout_cli.remote import run_auth, run_connect  # noqa: PLC0415

        return run_connect(args, out) if args.command == "connect" else run_auth(args, out)
    targets = resolve_targets(args)
    handler = run_chat if args.command == "chat" else COMMANDS[args.command]
    try:
        with targets.connect() as ts:
            try:
                return handler(args, ts, targets, out)
            except NotFoundError as err:
                raise CliError(explain_not_found(ts, args, err), EXIT_NOT_FOUND) from None
    except ToolscoutClientError as err:
        if _provider_failed(err):
            raise CliError(err.message, EXIT_PROVIDER) from None
        if _model_not_configured(err):
            raise CliError(err.message, EXIT_USAGE) from None
        message = _unreachable_message(err, targets) if isinstance(err, UnavailableError) else None
        if message is None:
            raise
        raise CliError(message, EXIT_UNREACHABLE) from None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``toolscout`` console script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    _normalise(args)
    out = Output(json_mode=args.json)
    try:
        return _run(args, out)
    except CliError as err:
        out.note(f"toolscout: {err.message}")
        return err.code
    except ToolscoutClientError as err:
        out.note(f"toolscout: {err.message}")
        return exit_code_for(err)
    except KeyboardInterrupt:
        out.note("toolscout: interrupted")
        return 130
    except BrokenPipeError:
        # `toolscout tools | head`: the reader went away; that is not an error.
        sys.stderr.close()
        return 0
    except Exception as err:
        out.note(f"toolscout: internal error: {type(err).__name__}: {err}")
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
