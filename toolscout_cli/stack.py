"""``toolscout up`` (the whole stack from one command; each shard of a sharded pool in a process of
its own, see :mod:`toolscout_cli.shard_process`) and ``toolscout serve SERVICE``.

Both stop on SIGINT/SIGTERM: health goes NOT_SERVING, in-flight calls drain for the configured
grace, then the pool stops its MCP server processes — nothing is left running.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import sys
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from toolscout.client import ServerStatus

from discovery_svc import active_search_mode, check_search
from discovery_svc.server import build_server as build_discovery
from mcp_gateway_svc.server import build_server as build_gateway
from mcp_pool_svc.server import build_server as build_pool
from orchestrator_svc.server import build_server as build_orchestrator
from toolscout_cli.connection import EXIT_OK, EXIT_USAGE, CliError, program, targets_for
from toolscout_cli.mcp_hosts import host_setup_lines
from toolscout_cli.output import Output
from toolscout_cli.shard_process import ShardProcess, ShardSpec, log_into
from toolscout_cli.stack_state import remove_record, shard_overrides, write_record
from toolscout_cli.walkthrough import run_walkthrough
from toolscout_kit import event_loop
from toolscout_kit.config import CONFIG_ENV, ToolscoutConfig, resolve_config_path
from toolscout_kit.entrypoint import skip_exit_collection
from toolscout_kit.errors import ConfigError
from toolscout_kit.host import RunningServer, serve_until_signal, stop_on_signals
from toolscout_kit.logging import configure_logging
from toolscout_kit.preflight import check_free, gateway_auth, missing_api_keys, service_endpoints
from toolscout_kit.shards import ShardIdentity

__all__ = ["run_serve", "run_up"]

_SYMBOL = {"ready": "✓", "failed": "✗", "reconnecting": "…", "idle": "·", "stopped": "·"}
_SEARCH_READY_WAIT = 120.0  # seconds the walkthrough waits for hybrid search to be ready


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


class _Progress:
    """What ``up`` prints while it runs: a line (``--json``: an event) per server state change, and
    per shard process that exits or comes back."""

    def __init__(self, out: Output, stop: asyncio.Event) -> None:
        self._out = out
        self._stop = stop
        self._reported: dict[str, str] = {}

    def server(self, name: str, state: str, tools: int, transport: str, error: str, deferred: bool) -> None:
        if self._stop.is_set() or state == "starting" or self._reported.get(name) == state:
            return  # (shutting down: every server is about to report "stopped")
        self._reported[name] = state
        if self._out.json_mode:
            self._out.json(
                {
                    "event": "server",
                    "name": name,
                    "state": state,
                    "tools": tools,
                    "transport": transport,
                    "error": error,
                }
            )
            return
        detail = f"{tools} tools" if state == "ready" else error
        self._out.line(
            f"  {_SYMBOL.get(state, '?')} {name:<20} {state:<12} {detail}{' (deferred)' if deferred else ''}"
        )

    def status(self, status: ServerStatus) -> None:
        self.server(
            status.name,
            str(status.state),
            status.tool_count,
            status.transport,
            status.last_error,
            status.defer_loading,
        )

    def shard(self, event: dict[str, Any]) -> None:
        """An event of a shard process (:class:`~toolscout_cli.shard_process.ShardProcess`)."""
        kind = event.get("event")
        if kind == "server":
            self.server(
                event["name"],
                event["state"],
                event["tools"],
                event["transport"],
                event["error"],
                event["deferred"],
            )
        elif self._stop.is_set():
            return
        elif self._out.json_mode:
            self._out.json(event)
        elif kind == "shard_exited":
            how = event["signal"] or f"exit code {event['code']}"
            self._out.line(
                f"  ✗ pool-{event['shard']:<15} exited ({how}); its servers are unavailable until it is back"
            )
        elif kind == "shard_restarted":
            self._out.line(f"  ✓ pool-{event['shard']:<15} back on {event['address']}")


async def _start_pool(
    config: ToolscoutConfig,
    config_path: Path,
    progress: _Progress,
    servers: list[tuple[str, Any]],
    *,
    overrides: dict[str, Any],
    log_level: str,
    shard_stderr: TextIO | None,
) -> list[str]:
    """Starts the pool (in this process) or its shards (a process each); returns their addresses.

    Each started one joins ``servers`` at once, so that an interrupted start still stops it.
    """
    pool = config.toolscout.pool
    count = pool.shards.count
    if count == 1:
        running = await build_pool(config, on_server_change=progress.status, shard=ShardIdentity(0, 1))
        servers.append(("pool", running))
        return [running.address]
    host = pool.listen.rsplit(":", 1)[0] or "127.0.0.1"
    shards = [
        ShardProcess(
            ShardSpec(
                config=str(config_path),
                shard=k,
                count=count,
                listen=f"{host}:0",
                metrics_port=pool.metrics_port if pool.metrics_port < 0 else 0,
                log_level=log_level,
                parent=os.getpid(),
                overrides=overrides,
            ),
            progress.shard,
            stderr=shard_stderr,
            grace=pool.shutdown_grace,
        )
        for k in range(count)
    ]
    servers.extend((shard.name, shard) for shard in shards)
    await asyncio.gather(*(shard.start() for shard in shards))
    return [shard.address for shard in shards]


async def _start_stack(
    config: ToolscoutConfig,
    config_path: Path,
    source: str,
    out: Output,
    progress: _Progress,
    servers: list[tuple[str, Any]],
    **pool_options: Any,
) -> list[str]:
    """Starts the pool (or its shards), discovery, the orchestrator and the gateway, each joining
    ``servers`` once started; returns the pool's addresses (one per shard)."""
    if not out.json_mode:
        count = config.toolscout.pool.shards.count
        names = ", ".join(sorted(config.servers)) or "none"
        out.line(f"toolscout: starting the stack from {source}")
        sharded = f" over {count} pool shards (one process each)" if count > 1 else ""
        out.line(f"connecting {len(config.servers)} MCP servers{sharded} ({names})")
    targets = await _start_pool(config, config_path, progress, servers, **pool_options)
    discovery = await build_discovery(config, pool_target=targets[0], pool_targets=targets)
    servers.append(("discovery", discovery))
    orchestrator = await build_orchestrator(
        config, pool_target=targets[0], discovery_target=discovery.address, pool_targets=targets
    )
    servers.append(("orchestrator", orchestrator))
    gateway = await build_gateway(
        config,
        discovery_target=discovery.address,
        pool_target=targets[0],
        pool_targets=targets,
        orchestrator_target=orchestrator.address,
    )
    servers.append(("gateway", gateway))
    return targets


def _record(
    config: ToolscoutConfig,
    config_path: Path,
    overrides: dict[str, Any],
    targets: list[str],
    servers: list[tuple[str, Any]],
) -> bool:
    """Records where the CLI finds this stack from the config alone (shards listen on free ports);
    False when it could not be recorded."""
    count = config.toolscout.pool.shards.count
    addresses = dict((name, running.address) for name, running in servers)
    record = shard_overrides(count, targets) if count > 1 else overrides
    path = write_record(
        config_path, ",".join(targets), addresses["discovery"], addresses["orchestrator"], record
    )
    return path is not None


def _grace(config: ToolscoutConfig) -> float:
    """The longest ``shutdown_grace`` of the services: what a stop waits at most for a request."""
    services = config.toolscout
    return max(
        s.shutdown_grace for s in (services.pool, services.discovery, services.orchestrator, services.gateway)
    )


async def _stop_all(servers: list[tuple[str, Any]], grace: float) -> None:
    """Stopping the pool's server (or a shard process) also stops its MCP servers. The services
    that call the pool first, one by one; then every pool shard at once (each takes its MCP
    servers' shutdown time: one after another, a sharded stack took N times as long).

    One deadline, ``grace`` seconds from now, for the services of this process: what is in flight
    anywhere gets at most that long (and no more than its service's own grace), not a grace per
    service one after another. What a later service still runs came from other callers (the
    gateway ended its own calls), which had that time already. A shard process keeps its own
    grace from the SIGTERM it gets."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace

    async def stop(running: Any) -> None:
        if isinstance(running, RunningServer):
            await running.stop(min(running.shutdown_grace, max(deadline - loop.time(), 0.0)))
        else:
            await running.stop()

    for name, running in reversed(servers):
        if not name.startswith("pool"):
            await stop(running)
    await asyncio.gather(*(stop(running) for name, running in servers if name.startswith("pool")))


async def _up(
    config: ToolscoutConfig,
    out: Output,
    source: str,
    walkthrough: bool,
    *,
    overrides: dict[str, Any],
    log_level: str,
    shard_stderr: TextIO | None,
) -> int:
    stop = stop_on_signals()
    progress = _Progress(out, stop)
    servers: list[tuple[str, Any]] = []
    config_path = resolve_config_path(source)
    recorded = False
    try:
        task = asyncio.create_task(
            _start_stack(
                config,
                config_path,
                source,
                out,
                progress,
                servers,
                overrides=overrides,
                log_level=log_level,
                shard_stderr=shard_stderr,
            )
        )
        if await _until_stopped_or_done(stop, task):
            recorded = _record(config, config_path, overrides, task.result(), servers)
            cli = _announce(out, servers, config, source, recorded=recorded)
            if walkthrough and not out.json_mode:
                await _walkthrough(stop, servers, config, out, cli)
            await stop.wait()
        if not out.json_mode:
            out.line(f"stopping… (what is in flight gets up to {_grace(config):g} s)")
    finally:
        if recorded:
            remove_record(config_path)
        await _stop_all(servers, _grace(config))
    if out.json_mode:
        out.json({"event": "stopped"})
    else:
        out.line("stopped.")
    return EXIT_OK


def _announce(
    out: Output, servers: list[tuple[str, Any]], config: ToolscoutConfig, source: str, *, recorded: bool
) -> str:
    """Prints the endpoints; returns the CLI prefix that reaches this stack.

    ``-c CONFIG`` when the stack is recorded for its config (:mod:`toolscout_cli.stack_state`) or
    listens where the config says. Otherwise every address (with several pool shards, every
    shard's: ``--pool-target A,B,C``; the CLI routes each call to the shard that runs the tool's
    server).
    """
    endpoints = {name: running.address for name, running in servers}
    console = dict(servers)["gateway"].console_url if "gateway" in endpoints else None
    if console is not None:
        endpoints["console"] = console  # the web console, on the gateway's HTTP server
    targets = {
        "pool": _pool_target(servers),
        **{
            n: a for n, a in endpoints.items() if not n.startswith("pool") and n not in ("gateway", "console")
        },
    }
    metrics = {
        name: f"http://127.0.0.1:{running.metrics_port}/metrics"
        for name, running in servers
        if running.metrics_port is not None
    }
    settings = config.toolscout
    listens = (settings.pool.listen, settings.discovery.listen, settings.orchestrator.listen)
    if not recorded and (settings.pool.shards.count > 1 or any(x.endswith(":0") for x in listens)):
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
    if "gateway" in endpoints:
        tokens = list(gateway_auth(config, os.environ).tokens)
        for line in host_setup_lines(endpoints["gateway"], tokens[0] if tokens else None):
            out.line(line)
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
    overrides: dict[str, Any] | None = None,
) -> int:
    """The whole stack until SIGINT/SIGTERM; exit code 0 after a clean stop.

    ``config`` was loaded with ``overrides`` (``--pool-shards N`` sets the shard count). With more
    than one pool shard each shard is its own process on a free port
    (:mod:`toolscout_cli.shard_process`), restarted when it dies; discovery and the orchestrator
    run in this process, following and routing to all of them.

    Logs and the MCP servers' stderr go to ``log_file`` if given, else to stderr in JSON mode and
    to a temporary file for a person, whose terminal then shows one line per state change. A file
    gets INFO and up (the servers' own stderr lines are INFO events); stderr WARNING and up.
    """
    # Shards beyond one run in processes of their own on free ports: only an in-process pool binds
    # the config's addresses.
    services = ("pool",) if config.toolscout.pool.shards.count == 1 else ()
    try:
        _preflight(config, (*services, "discovery", "orchestrator", "gateway"), out, source=source)
    except ConfigError as err:
        raise CliError(err.message, EXIT_USAGE) from None
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
        log_into(log_level, stream)
        if stream is not sys.stderr:
            # The pool hands the MCP servers sys.stderr as theirs: they write into the log too.
            # (`out` keeps the terminal's stderr for the CLI's own messages.)
            files.enter_context(contextlib.redirect_stderr(stream))
        try:
            return event_loop.run(
                _up(
                    config,
                    out,
                    source,
                    walkthrough,
                    overrides=dict(overrides or {}),
                    log_level=log_level,
                    shard_stderr=None if stream is sys.stderr else stream,
                )
            )
        except ConfigError as err:
            raise CliError(err.message, EXIT_USAGE) from None
        finally:
            skip_exit_collection()
            if path is not None and not log_file and path.exists() and path.stat().st_size == 0:
                path.unlink()  # nothing was logged: leave no empty file behind


def _preflight(
    config: ToolscoutConfig,
    services: Sequence[str],
    out: Output,
    *,
    listen: str | None = None,
    metrics_port: int | None = None,
    source: str | None = None,
) -> None:
    """What can be found wrong before anything starts (see :mod:`toolscout_kit.preflight`);
    ``source`` names the config file in messages about its settings.

    Raises:
        ConfigError: hybrid search without a working embedder, addresses taken or wanted twice, a
            gateway token variable not set or a gateway that would run open where it may not.
    """
    if "gateway" in services:
        try:
            gateway_auth(config, os.environ, listen=listen if services == ("gateway",) else None)
        except ConfigError as err:
            raise ConfigError(f"{source}: {err.message}" if source else err.message) from None
    if "discovery" in services:
        check_search(config)
    check_free(
        endpoint
        for service in services
        for endpoint in service_endpoints(config, service, listen=listen, metrics_port=metrics_port)
    )
    if "orchestrator" in services:
        for variable, models in missing_api_keys(config, os.environ).items():
            out.note(
                f"toolscout: warning: no {variable} in this environment: chat with "
                f"{', '.join(models)} exits 2 until the stack runs with it"
            )


BuildServer = Callable[..., Awaitable[Any]]


_BUILDERS: dict[str, BuildServer] = {
    "pool": build_pool,
    "discovery": build_discovery,
    "orchestrator": build_orchestrator,
    "gateway": build_gateway,
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
    pool_target: str | None = None,
    discovery_target: str | None = None,
) -> int:
    """One service in the foreground, logging JSON to stdout like ``python -m <service>``.

    ``shard`` ("K/N") makes a pool process one shard of a sharded pool. ``pool_target`` (discovery,
    orchestrator, gateway: the pool, or every shard comma-separated in shard order) and
    ``discovery_target`` (orchestrator, gateway) replace the config's addresses of the services it calls. With ``config_path``
    the file is applied again on SIGHUP and when it changes (a new shard count, see
    toolscout_kit.reload).
    """
    try:
        _preflight(
            config,
            (service,),
            Output(json_mode=False),
            listen=listen,
            metrics_port=metrics_port,
            source=config_path or os.environ.get(CONFIG_ENV),
        )
    except ConfigError as err:
        raise CliError(err.message, EXIT_USAGE) from None
    configure_logging(log_level)
    options: dict[str, Any] = {"listen": listen, "metrics_port": metrics_port}
    if service == "pool":
        options["shard_spec"] = shard
        options["pod_name"] = os.environ.get("TOOLSCOUT_POD_NAME") or None
    if pool_target:
        options["pool_targets"] = [part.strip() for part in pool_target.split(",") if part.strip()]
    if discovery_target:
        options["discovery_target"] = discovery_target
    try:
        path = resolve_config_path(config_path) if config_path else None
        return event_loop.run(_serve(_BUILDERS[service], config, path, **options))
    except ConfigError as err:
        raise CliError(err.message, EXIT_USAGE) from None
    finally:
        skip_exit_collection()
