"""``toolscout up`` (the whole stack in this process) and ``toolscout serve SERVICE``.

Both stop on SIGINT/SIGTERM: health goes NOT_SERVING, in-flight calls drain for the configured
grace, then the pool stops its MCP server processes — nothing is left running.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import signal
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TextIO

import structlog

from discovery_svc.metrics import active_search_mode
from discovery_svc.server import build_server as build_discovery
from mcp_pool_svc.placement import ShardIdentity
from mcp_pool_svc.server import build_server as build_pool
from mcp_pool_svc.supervisor import ServerStatus
from orchestrator_svc.server import build_server as build_orchestrator
from toolscout_cli.connection import EXIT_OK, EXIT_USAGE, CliError, program, targets_for
from toolscout_cli.output import Output
from toolscout_cli.walkthrough import run_walkthrough
from toolscout_kit.config import ToolscoutConfig, resolve_config_path
from toolscout_kit.errors import ConfigError
from toolscout_kit.logging import configure_logging
from toolscout_kit.server import serve_until_signal

__all__ = ["run_serve", "run_up"]

_SYMBOL = {"ready": "✓", "failed": "✗", "reconnecting": "…", "idle": "·", "stopped": "·"}
_SEARCH_READY_WAIT = 120.0  # seconds the walkthrough waits for hybrid search to be ready


def _quiet_logging(level: str, stream: TextIO) -> None:
    # The services log JSON; in the CLI it goes to ``stream`` (stderr, or the log file of a person's
    # terminal session) so that stdout stays the CLI's own output.
    configure_logging(level)
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=stream))
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler) and handler.stream is sys.stderr:
            handler.setStream(stream)


def _install_stop(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)


async def _until_stopped_or_done(stop: asyncio.Event, task: asyncio.Task[Any]) -> bool:
    """Waits for ``task``; returns False (having cancelled it) if a stop signal came first."""
    waiter = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    if task in done:
        task.result()
        return True
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return False


def with_pool_shards(config: ToolscoutConfig, count: int) -> ToolscoutConfig:
    """``config`` with the pool split into ``count`` shards, each listening on a free port.

    Raises:
        ConfigError: ``count`` is below 1, or a server is pinned to a shard that would not exist.
    """
    if count < 1:
        raise ConfigError(f"--pool-shards {count}: need at least one shard")
    pinned = [
        f"{n} (shard {s.shard})"
        for n, s in config.servers.items()
        if s.shard is not None and s.shard >= count
    ]
    if pinned:
        raise ConfigError(
            f"--pool-shards {count}: servers pinned beyond shard {count - 1}: {', '.join(pinned)}"
        )
    pool = config.toolscout.pool
    host = pool.listen.rsplit(":", 1)[0] or "127.0.0.1"
    shards = pool.shards.model_copy(update={"count": count, "addresses": [], "address_pattern": None})
    metrics_port = pool.metrics_port if count == 1 or pool.metrics_port < 0 else 0
    pool = pool.model_copy(
        update={
            "shards": shards,
            "listen": f"{host}:0" if count > 1 else pool.listen,
            "metrics_port": metrics_port,
        }
    )
    return config.model_copy(update={"toolscout": config.toolscout.model_copy(update={"pool": pool})})


async def _up(
    config: ToolscoutConfig, out: Output, source: str, walkthrough: bool, pool_shards: int | None = None
) -> int:
    stop = asyncio.Event()
    _install_stop(asyncio.get_running_loop(), stop)
    reported: dict[str, str] = {}

    def progress(status: ServerStatus) -> None:
        if stop.is_set():
            return  # shutting down: every server is about to report "stopped"
        name = status.name
        state = status.state.value
        if state == "starting" or reported.get(name) == state:
            return
        reported[name] = state
        if out.json_mode:
            out.json(
                {
                    "event": "server",
                    "name": name,
                    "state": state,
                    "tools": status.tool_count,
                    "transport": status.transport,
                    "error": status.last_error,
                }
            )
            return
        detail = f"{status.tool_count} tools" if state == "ready" else status.last_error
        deferred = " (deferred)" if status.defer_loading else ""
        out.line(f"  {_SYMBOL.get(state, '?')} {name:<20} {state:<12} {detail}{deferred}")

    servers: list[tuple[str, Any]] = []

    count = pool_shards if pool_shards is not None else config.toolscout.pool.shards.count
    if count != 1 or pool_shards is not None:
        config = with_pool_shards(config, count)

    async def start() -> None:
        if not out.json_mode:
            names = ", ".join(sorted(config.servers)) or "none"
            out.line(f"toolscout: starting the stack from {source}")
            sharded = f" over {count} pool shards" if count > 1 else ""
            out.line(f"connecting {len(config.servers)} MCP servers{sharded} ({names})")
        pools = await asyncio.gather(
            *(
                build_pool(config, on_server_change=progress, shard=ShardIdentity(k, count))
                for k in range(count)
            )
        )
        for k, running in enumerate(pools):
            servers.append(("pool" if count == 1 else f"pool-{k}", running))
        targets = [running.address for running in pools]
        discovery = await build_discovery(config, pool_target=targets[0], pool_targets=targets)
        servers.append(("discovery", discovery))
        orchestrator = await build_orchestrator(
            config, pool_target=targets[0], discovery_target=discovery.address, pool_targets=targets
        )
        servers.append(("orchestrator", orchestrator))

    try:
        started = await _until_stopped_or_done(stop, asyncio.create_task(start()))
        if started:
            cli = _announce(out, servers, config, source)
            if walkthrough and not out.json_mode:
                await _walkthrough(stop, servers, config, out, cli)
            await stop.wait()
        if not out.json_mode:
            out.line("stopping…")
    finally:
        # Stopping the pool's server also stops its MCP servers.
        for _, running in reversed(servers):
            await running.stop()
    if out.json_mode:
        out.json({"event": "stopped"})
    else:
        out.line("stopped.")
    return EXIT_OK


def _announce(out: Output, servers: list[tuple[str, Any]], config: ToolscoutConfig, source: str) -> str:
    """Prints the endpoints; returns the CLI prefix that reaches this stack.

    With several pool shards the CLI gets every shard's address (``--pool-target A,B,C``) and
    routes each call to the shard that runs the tool's server.
    """
    endpoints = {name: running.address for name, running in servers}
    targets = {
        "pool": _pool_target(servers),
        **{n: a for n, a in endpoints.items() if not n.startswith("pool")},
    }
    metrics = {
        name: f"http://127.0.0.1:{running.metrics_port}/metrics"
        for name, running in servers
        if running.metrics_port is not None
    }
    settings = config.toolscout
    listens = (settings.pool.listen, settings.discovery.listen, settings.orchestrator.listen)
    if any(listen.endswith(":0") for listen in listens):
        # Ports were picked at random: the config alone does not lead back here.
        cli = f"{program()} " + " ".join(f"--{name}-target {address}" for name, address in targets.items())
    else:
        cli = f"{program()} -c {shlex.quote(source)}"
    if out.json_mode:
        out.json({"event": "ready", "endpoints": endpoints, "metrics": metrics})
        return cli
    out.line("")
    for name, address in endpoints.items():
        extra = f"   metrics {metrics[name]}" if name in metrics else ""
        out.line(f"{name:<13} {address}{extra}")
    out.line("")
    out.line("Ready. In another terminal, from this directory:")
    out.line(f"$ {cli} servers")
    out.line(
        "  (and tools, describe TOOL, manifest, search QUERY, call TOOL --args JSON, chat, tokens; --help)"
    )
    out.line("Ctrl-C stops everything.")
    return cli


def _pool_target(servers: list[tuple[str, Any]]) -> str:
    """The CLI's pool target for this stack: the pool's address, or every shard's in shard order."""
    return ",".join(running.address for name, running in servers if name.startswith("pool"))


async def _search_ready(discovery: Any, mode: str, stop: asyncio.Event) -> bool:
    """Waits (bounded) until discovery ranks with the configured ``mode``: with hybrid search the
    tools are embedded in the background first (a second or two for the example, from the cache
    after the first start), and the walkthrough's search should look the same either way."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _SEARCH_READY_WAIT
    while active_search_mode(discovery.registry) != mode:
        if stop.is_set() or loop.time() >= deadline:
            return False
        await asyncio.sleep(0.1)  # the gauge has no change event to wait on
    return True


async def _walkthrough(
    stop: asyncio.Event, servers: list[tuple[str, Any]], config: ToolscoutConfig, out: Output, cli: str
) -> None:
    mode = config.toolscout.search.mode
    if not await _search_ready(dict(servers)["discovery"], mode, stop):
        out.line(
            f"(the tools are still being embedded: this walkthrough's search is ranked by BM25, not {mode})"
        )
    addresses = dict((name, running.address) for name, running in servers)
    targets = targets_for(config, _pool_target(servers), addresses["discovery"], addresses["orchestrator"])
    # The sync client blocks, and this event loop serves the stack: run it in a worker thread.
    # Its summaries go to stdout too: here they are part of the story, not side notes.
    story = Output(json_mode=False, out=out.out, err=out.out)
    task = asyncio.create_task(asyncio.to_thread(run_walkthrough, targets, story, cli))
    try:
        await _until_stopped_or_done(stop, task)
    except Exception as err:
        out.line(f"(walkthrough stopped: {type(err).__name__}: {err})")
    out.line("The stack keeps running. Ctrl-C stops everything.")


def run_up(
    config: ToolscoutConfig,
    out: Output,
    *,
    source: str,
    log_level: str | None,
    walkthrough: bool = False,
    log_file: str | None = None,
    pool_shards: int | None = None,
) -> int:
    """The whole stack in this process until SIGINT/SIGTERM; exit code 0 after a clean stop.

    ``pool_shards`` runs the pool as that many shards (gRPC servers on free ports) with discovery
    and the orchestrator following and routing to all of them.

    Logs and the MCP servers' stderr go to ``log_file`` if given, else to stderr in JSON mode and
    to a temporary file for a person, whose terminal then shows one line per state change. A file
    gets INFO and up (the servers' own stderr lines are INFO events); stderr WARNING and up.
    """
    path = Path(log_file) if log_file else None
    if path is None and not out.json_mode:
        path = Path(tempfile.gettempdir()) / f"toolscout-up-{os.getpid()}.log"
    log_level = log_level or ("INFO" if path is not None else "WARNING")
    with contextlib.ExitStack() as files:
        stream: TextIO = sys.stderr
        if path is not None:
            try:
                stream = files.enter_context(path.open("a", encoding="utf-8", buffering=1))
            except OSError as err:
                raise CliError(f"cannot write the log file {path}: {err.strerror}", EXIT_USAGE) from None
            if not out.json_mode:
                out.line(f"logs ({log_level.upper()} and up, MCP servers' stderr): {path}")
        _quiet_logging(log_level, stream)
        if stream is not sys.stderr:
            # The pool hands the MCP servers sys.stderr as theirs: they write into the log too.
            # (`out` keeps the terminal's stderr for the CLI's own messages.)
            files.enter_context(contextlib.redirect_stderr(stream))
        try:
            return asyncio.run(_up(config, out, source, walkthrough, pool_shards))
        except ConfigError as err:
            raise CliError(err.message, EXIT_USAGE) from None
        finally:
            if path is not None and not log_file and path.exists() and path.stat().st_size == 0:
                path.unlink()  # nothing was logged: leave no empty file behind


BuildServer = Callable[..., Awaitable[Any]]


_BUILDERS: dict[str, BuildServer] = {
    "pool": build_pool,
    "discovery": build_discovery,
    "orchestrator": build_orchestrator,
}


async def _serve(
    build: BuildServer, config: ToolscoutConfig, config_path: Path | None, **options: Any
) -> int:
    running = await build(config, **options)
    await serve_until_signal(
        running, config_path=config_path, reload_interval=config.toolscout.pool.shards.reload_interval
    )
    return EXIT_OK


def run_serve(
    service: str,
    config: ToolscoutConfig,
    *,
    listen: str | None,
    log_level: str,
    metrics_port: int | None = None,
    shard: str | None = None,
    config_path: str | None = None,
) -> int:
    """One service in the foreground, logging JSON to stdout like ``python -m <service>``.

    ``shard`` ("K/N") makes a pool process one shard of a sharded pool. With ``config_path`` the
    file is applied again on SIGHUP and when it changes (a new shard count, see toolscout_kit.reload).
    """
    configure_logging(log_level)
    options: dict[str, Any] = {"listen": listen, "metrics_port": metrics_port}
    if service == "pool":
        options["shard_spec"] = shard
        options["pod_name"] = os.environ.get("TOOLSCOUT_POD_NAME") or None
    try:
        path = resolve_config_path(config_path) if config_path else None
        return asyncio.run(_serve(_BUILDERS[service], config, path, **options))
    except ConfigError as err:
        raise CliError(err.message, EXIT_USAGE) from None
