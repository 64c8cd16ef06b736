"""Applying a changed config file to a running service, without a restart.

Only what a service registers for is applied (today: the pool's shard count and placement, and
where discovery and the orchestrator find the shards). The file is read again on ``SIGHUP`` and,
when ``toolscout.pool.shards.reload_interval`` is above 0, whenever its contents change (checked
that often; Kubernetes updates a mounted ConfigMap in place, which is how a new shard count
reaches running pods; a ``count_file`` the config names is watched too). A file that no longer
loads is reported and ignored: the service keeps its current settings.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import signal
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from toolscout_kit.config import ToolscoutConfig, load_config
from toolscout_kit.errors import ConfigError
from toolscout_kit.logging import get_logger

__all__ = ["ConfigReloader", "Reload"]

_log = get_logger(__name__)

# Receives the config as it is now in the file; runs one at a time, in registration order.
Reload = Callable[[ToolscoutConfig], Awaitable[None]]


def _digest(paths: Sequence[Path]) -> bytes:
    digest = hashlib.sha256()
    for path in paths:
        try:
            digest.update(path.read_bytes())
        except OSError:
            digest.update(b"\x00missing")
        digest.update(b"\x00")
    return digest.digest()


def _watched(path: Path, config: ToolscoutConfig | None) -> list[Path]:
    """The config file, and the shard count file it names (each may change on its own)."""
    count_file = config.toolscout.pool.shards.count_file if config is not None else None
    return [path, config.resolve_path(count_file)] if config is not None and count_file else [path]


class ConfigReloader:
    """Watches one config file and hands each new version to the registered callbacks."""

    def __init__(self, path: Path, callbacks: Sequence[Reload], *, interval: float) -> None:
        self._path = path
        self._callbacks = list(callbacks)
        self._interval = interval
        try:
            self._files = _watched(path, load_config(path))
        except ConfigError:
            self._files = [path]
        self._seen = _digest(self._files)
        self._poke = asyncio.Event()
        self.reloads = 0

    def request(self) -> None:
        """Reload now (what SIGHUP does)."""
        self._poke.set()

    async def reload(self) -> bool:
        """Reads the file and applies it; returns False when it does not load (nothing changes)."""
        self._seen = _digest(self._files)
        try:
            config = await asyncio.to_thread(load_config, self._path)
        except ConfigError as err:
            _log.error("config reload failed; keeping the current settings", error=err.message)
            return False
        self._files = _watched(self._path, config)
        self._seen = _digest(self._files)
        _log.info("config reloaded", path=str(self._path))
        for callback in self._callbacks:
            try:
                await callback(config)
            except Exception:
                _log.exception("applying the reloaded config failed")
        self.reloads += 1
        return True

    async def run(self) -> None:
        """Until cancelled: reload on :meth:`request` (SIGHUP) and when the file's contents change."""
        loop = asyncio.get_running_loop()
        # Signal handlers exist only on Unix (NotImplementedError elsewhere) and only in the main
        # thread (RuntimeError, e.g. a stack started from a test's worker thread): there the file
        # is still watched, and the reload is said to come without SIGHUP.
        try:
            loop.add_signal_handler(signal.SIGHUP, self.request)
        except (NotImplementedError, RuntimeError):
            _log.info(
                "no SIGHUP handler in this thread; config reloads when the file changes", path=str(self._path)
            )
        try:
            while True:
                timeout = self._interval if self._interval > 0 else None
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._poke.wait(), timeout)
                asked = self._poke.is_set()
                self._poke.clear()
                if asked or _digest(self._files) != self._seen:
                    await self.reload()
        finally:
            with contextlib.suppress(NotImplementedError, RuntimeError):  # not installed, as above
                loop.remove_signal_handler(signal.SIGHUP)
