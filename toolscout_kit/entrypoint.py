"""The shared ``python -m <service>`` entry point: parse args, load config, serve until SIGTERM."""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from toolscout_kit import event_loop
from toolscout_kit.config import CONFIG_ENV, load_config, resolve_config_path
from toolscout_kit.errors import ConfigError
from toolscout_kit.host import RunningServer, serve_until_signal, stop_on_signals
from toolscout_kit.logging import configure_logging, get_logger
from toolscout_kit.preflight import check_free, gateway_auth, missing_api_keys, service_endpoints

__all__ = ["BuildServer", "run_service", "skip_exit_collection"]

# The config section of each service package.
_SETTINGS = {
    "mcp_pool_svc": "pool",
    "discovery_svc": "discovery",
    "orchestrator_svc": "orchestrator",
    "mcp_gateway_svc": "gateway",
}

# ``build_server(config, **options)`` where the options come from the service's own arguments.
BuildServer = Callable[..., Awaitable[RunningServer]]


def run_service(
    name: str,
    build_server: BuildServer,
    argv: Sequence[str] | None = None,
    *,
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
    options: Callable[[argparse.Namespace], dict[str, Any]] | None = None,
) -> int:
    """Runs one service until SIGTERM/SIGINT; returns the process exit code (2 = bad config).

    A service adds its own arguments with ``add_arguments`` and turns them into keyword arguments
    of ``build_server`` with ``options``. SIGHUP (and a change of the file, see
    :mod:`toolscout_kit.reload`) applies the config again where the service registered for it.
    """
    parser = argparse.ArgumentParser(prog=f"python -m {name}", description=f"Run toolscout's {name}.")
    parser.add_argument("-c", "--config", help=f"config file (JSON or YAML); default: ${CONFIG_ENV}")
    parser.add_argument("--log-level", help="override toolscout.log_level (DEBUG, INFO, WARNING, ERROR)")
    if add_arguments is not None:
        add_arguments(parser)
    args = parser.parse_args(argv)
    service = _SETTINGS[name]
    try:
        path = resolve_config_path(args.config)
        config = load_config(path)
        # Before the pool starts its MCP servers: a taken port is refused at once.
        check_free(service_endpoints(config, service))
        if service == "gateway":
            try:
                gateway_auth(config, os.environ)
            except ConfigError as err:
                raise ConfigError(f"{path}: {err.message}") from None
    except ConfigError as err:
        print(f"{name}: {err.message}", file=sys.stderr)  # logging is not configured yet
        return 2
    configure_logging(args.log_level or config.toolscout.log_level)
    log = get_logger(name)
    for warning in config.load_warnings:
        log.warning("config", problem=warning)
    if service == "orchestrator":
        for variable, models in missing_api_keys(config, os.environ).items():
            log.warning("no API key: chat with these models fails", variable=variable, models=list(models))
    extra = options(args) if options is not None else {}

    async def main() -> None:
        stop = stop_on_signals()  # a signal while the server starts stops it once started
        server = await build_server(config, **extra)
        await serve_until_signal(
            server, config_path=path, reload_interval=config.toolscout.pool.shards.reload_interval, stop=stop
        )

    try:
        event_loop.run(main())
    except ConfigError as err:
        log.error("cannot start", error=err.message)
        return 2
    finally:
        skip_exit_collection()
    return 0


def skip_exit_collection() -> None:
    """Called once a process has stopped serving, just before it exits.

    The interpreter's last act is a full garbage collection over every object still alive (a
    catalog, a search index, the SDKs' modules): about 2 s of a stack's idle stop, spent finding
    nothing that matters once the process is gone. Freezing them moves them out of its way.
    """
    gc.freeze()
