"""The shared ``python -m <service>`` entry point: parse args, load config, serve until SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable, Sequence

from toolscout_kit.config import CONFIG_ENV, ToolscoutConfig, load_config
from toolscout_kit.errors import ConfigError
from toolscout_kit.logging import configure_logging, get_logger
from toolscout_kit.server import RunningServer, serve_until_signal

__all__ = ["BuildServer", "run_service"]

BuildServer = Callable[[ToolscoutConfig], Awaitable[RunningServer]]


def run_service(name: str, build_server: BuildServer, argv: Sequence[str] | None = None) -> int:
    """Runs one service until SIGTERM/SIGINT; returns the process exit code (2 = bad config)."""
    parser = argparse.ArgumentParser(prog=f"python -m {name}", description=f"Run toolscout's {name}.")
    parser.add_argument("-c", "--config", help=f"config file (JSON or YAML); default: ${CONFIG_ENV}")
    parser.add_argument("--log-level", help="override toolscout.log_level (DEBUG, INFO, WARNING, ERROR)")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
    except ConfigError as err:
        print(f"{name}: {err.message}", file=sys.stderr)  # logging is not configured yet
        return 2
    configure_logging(args.log_level or config.toolscout.log_level)
    log = get_logger(name)

    async def main() -> None:
        server = await build_server(config)
        await serve_until_signal(server)

    try:
        asyncio.run(main())
    except ConfigError as err:
        log.error("cannot start", error=err.message)
        return 2
    return 0
