"""Where a running ``toolscout up`` stack listens, recorded for the CLI that uses the same config.

``toolscout up --pool-shards 3`` (and any ``up`` whose config listens on port 0) serves on ports it
picks when it starts, which the config does not name. So ``up`` writes a small record of its
addresses, keyed by the config file's absolute path, into a per-user runtime folder, and removes
it when it stops; ``toolscout -c CONFIG <command>`` reads it before falling back to the config's
own addresses (flags and ``TOOLSCOUT_*_TARGET`` still come first).

* Folder: ``$TOOLSCOUT_RUNTIME_DIR``, else ``$XDG_RUNTIME_DIR/toolscout``, else
  ``<temp>/toolscout-<uid>``; created ``0700``, and not used unless it belongs to this user and
  nobody else may write to it (another user could otherwise point the CLI elsewhere).
* Record: ``<sha256 of the path>[:16].json`` with the config path, the ``up`` process's pid and
  start time, the pool (every shard, comma-separated in order), discovery and orchestrator
  addresses, and the config keys ``up`` replaced (``--pool-shards N`` sets the shard count, and
  the CLI needs that count to load the same config and route calls). Written atomically
  (temporary file, then rename).
* Stale records — ``up`` was killed and could not remove its own — are recognised because that pid
  is gone or is now another process (its start time differs), ignored and removed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "RUNTIME_DIR_ENV",
    "StackRecord",
    "find_record",
    "remove_record",
    "shard_overrides",
    "state_dir",
    "write_record",
]

RUNTIME_DIR_ENV = "TOOLSCOUT_RUNTIME_DIR"


@dataclass(frozen=True)
class StackRecord:
    config: str
    pid: int
    started: str
    pool: str
    discovery: str
    orchestrator: str
    # Config keys the stack runs with instead of the file's (a partial document).
    overrides: dict[str, Any] = field(default_factory=dict)


def shard_overrides(count: int, addresses: Sequence[str] = ()) -> dict[str, Any]:
    """The config keys of a stack whose pool is ``count`` shards at ``addresses`` (``up`` picks
    them: none until it has started), replacing the file's count, count file and addresses."""
    shards = {"count": count, "addresses": list(addresses), "address_pattern": None, "count_file": None}
    return {"toolscout": {"pool": {"shards": shards}}}


def state_dir() -> Path:
    """The per-user folder of stack records (not created here)."""
    explicit = os.environ.get(RUNTIME_DIR_ENV)
    if explicit:
        return Path(explicit)
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return Path(runtime) / "toolscout"
    return Path(tempfile.gettempdir()) / f"toolscout-{os.getuid()}"


def _trusted(folder: Path) -> bool:
    try:
        info = folder.stat()
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o022


def _record_path(config: Path) -> Path:
    digest = hashlib.sha256(str(config).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return state_dir() / f"{digest}.json"


def _start_time(pid: int) -> str | None:
    """When ``pid`` started (clock ticks since boot, from Linux's /proc; "" elsewhere), or None if
    no such process runs (a zombie does not count)."""
    if Path("/proc/self/stat").exists():
        try:
            raw = Path(f"/proc/{pid}/stat").read_text()
        except FileNotFoundError:
            return None
        except OSError:
            return ""
        # The command name (field 2) may hold spaces and parentheses: count from its end.
        fields = raw[raw.rfind(")") + 2 :].split()
        if fields and fields[0] == "Z":
            return None
        return fields[19] if len(fields) > 19 else ""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return ""


def write_record(
    config: Path, pool: str, discovery: str, orchestrator: str, overrides: dict[str, Any] | None = None
) -> Path | None:
    """Records this process's stack for ``config``; returns the file, or None when the folder
    cannot be used (the CLI then needs explicit targets, which ``up`` prints)."""
    folder = state_dir()
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return None
    if not _trusted(folder):
        return None
    pid = os.getpid()
    record = StackRecord(
        str(config), pid, _start_time(pid) or "", pool, discovery, orchestrator, dict(overrides or {})
    )
    path = _record_path(config)
    try:
        with tempfile.NamedTemporaryFile("w", dir=folder, prefix=".", suffix=".tmp", delete=False) as tmp:
            json.dump(record.__dict__, tmp)
        os.replace(tmp.name, path)
    except OSError:
        with contextlib.suppress(OSError, UnboundLocalError):
            os.unlink(tmp.name)
        return None
    return path


def remove_record(config: Path) -> None:
    """Removes the record of ``config`` if this process wrote it (a newer stack's is left alone)."""
    record = _read(_record_path(config))
    if record is not None and record.pid == os.getpid():
        with contextlib.suppress(OSError):
            _record_path(config).unlink()


def _read(path: Path) -> StackRecord | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        record = StackRecord(**{k: data[k] for k in StackRecord.__dataclass_fields__})
        return record if isinstance(record.overrides, dict) else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def find_record(config: Path) -> StackRecord | None:
    """The live stack recorded for ``config``, or None; a stale or unreadable record is removed."""
    folder = state_dir()
    path = _record_path(config)
    if not _trusted(folder) or not path.exists():
        return None
    record = _read(path)
    if record is not None and record.config == str(config):
        started = _start_time(record.pid)
        if started is not None and (not started or not record.started or started == record.started):
            return record
    with contextlib.suppress(OSError):
        path.unlink()
    return None
