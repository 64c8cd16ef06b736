"""The ``toolscout`` command line: run the stack, inspect it, search, call tools and chat.

Exit codes: 0 ok · 1 other failure (a tool that reported an error, an internal error) ·
2 usage or bad config · 3 not found (tool, server, model, toolset) · 4 stack unreachable ·
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
from collections.abc import Callable, Sequence
from typing import Any

from toolscout.client import NotFoundError, ToolscoutClientError, UnavailableError

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


def _common(parser: argparse.ArgumentParser, *, top: bool) -> None:
    # On subcommands the defaults are SUPPRESS, so `toolscout -c x tools` and `toolscout tools -c x`
    # both work and the later one wins.
    d: dict[str, Any] = {} if top else {"default": argparse.SUPPRESS}
    g = parser.add_argument_group("stack")
    g.add_argument("-c", "--config", help=f"config file (JSON or YAML); default ${CONFIG_ENV}", **d)
    g.add_argument("--target", metavar="HOST:PORT", help="address for all three services", **d)
    g.add_argument(
        "--pool-target",
        metavar="HOST:PORT[,...]",
        help="address of the pool; of a sharded pool, every shard's, comma-separated in shard order",
        **d,
    )
    for service in ("discovery", "orchestrator"):
        g.add_argument(f"--{service}-target", metavar="HOST:PORT", help=f"address of the {service}", **d)
    g.add_argument("--tls", action="store_true", help="connect with TLS (system roots unless --ca-file)", **d)
    g.add_argument("--ca-file", metavar="PEM", help="CA bundle to verify the servers (implies --tls)", **d)
    g.add_argument("--json", action="store_true", help="machine-readable JSON output", **d)


def _stack_commands(command: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """``up`` and ``serve``: the commands that run services rather than talk to them."""
    p = command("up", "run the whole stack (pool, discovery, orchestrator) from one config until Ctrl-C")
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
        help="run the pool as N shards (each its own gRPC server on a free port; default: the config's count)",
    )
    p = command("serve", "run one service in the foreground (logs JSON to stdout)")
    p.add_argument("service", choices=("pool", "discovery", "orchestrator"))
    p.add_argument("--listen", metavar="HOST:PORT", help="override the config's listen address")
    p.add_argument(
        "--metrics-port", type=int, metavar="PORT", help="override the metrics port (0 = any, -1 = off)"
    )
    p.add_argument("--shard", metavar="K/N", help="pool only: this process is shard K of N")
    p.add_argument("--log-level", default=None, help="override toolscout.log_level")


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
    _common(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        _common(p, top=False)
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
    from orchestrator_svc.prompts import check_templates  # noqa: PLC0415 - jinja2 only for up/serve

    try:
        check_templates(config)
    except ConfigError as err:
        source = resolve_config_path(path)
        raise CliError(
            "\n".join(f"{source}: {line}" for line in err.message.splitlines()), EXIT_USAGE
        ) from None


def _run(args: argparse.Namespace, out: Output) -> int:
    if args.command in ("up", "serve"):
        try:
            config = load_config(args.config)
        except ConfigError as err:
            raise CliError(err.message, EXIT_USAGE) from None
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
                pool_shards=args.pool_shards,
            )
        if args.shard and args.service != "pool":
            raise CliError("--shard is for `serve pool` only", EXIT_USAGE)
        return run_serve(
            args.service,
            config,
            listen=args.listen,
            log_level=args.log_level or config.toolscout.log_level,
            metrics_port=args.metrics_port,
            shard=args.shard,
            config_path=source or None,
        )
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
