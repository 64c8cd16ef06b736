"""The pool process reaps every child that exits, whenever it exits (issue 19, item 2).

The pool is a child subreaper, so processes its MCP servers leave behind become its children; each
one that exits must be collected, or it stays ``<defunct>``. ``toolscout serve pool`` runs here in
its own process with two servers: the misbehaving fixture started directly ("plain") and through
a ``bash -c`` wrapper that also leaves a short-lived background process behind each time it
starts ("wrapped": the orphaned ``sleep`` exits while the server runs). Restarts are forced by
SIGKILLing each server's leader (the wrapper itself, for the wrapped one): the server it ran is
re-parented to the pool and ends when the pool tears the session down.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO

import psutil  # type: ignore[import-untyped]  # no types-psutil in the dev group
import pytest
from toolscout import client as tc

from tests.support.mcp_servers import MISBEHAVING_SERVER, REPO_ROOT, free_port, wait_until_gone

WAIT = 60.0
RESTARTS = 3


def _zombies(pid: int) -> list[int]:
    out = []
    for child in psutil.Process(pid).children():
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                out.append(child.pid)
        except psutil.NoSuchProcess:
            continue
    return out


async def _until(check: object, within: float = WAIT) -> None:
    async with asyncio.timeout(within):
        while not await check():  # type: ignore[operator]  # noqa: ASYNC110 - a bounded poll of another process
            await asyncio.sleep(0.05)


def _leader(tmp: Path, name: str) -> int:
    """The process the pool started for ``name``: the server, or the wrapper around it."""
    server = int((tmp / f"{name}.pid").read_text().split()[0])
    return psutil.Process(server).ppid() if name == "wrapped" else server


def _log_file(tmp_path: Path) -> IO[bytes]:
    return (tmp_path / "pool.log").open("wb")


def _children_of_our_own() -> list[subprocess.Popen[bytes]]:
    """Children that are not the pool's, not waited for until the end: zombies meanwhile, in reach
    of a careless reaper."""
    return [
        subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"]),
        subprocess.Popen([sys.executable, "-c", "raise SystemExit(4)"], start_new_session=True),
    ]


@pytest.fixture
def config(tmp_path: Path) -> tuple[Path, str]:
    """The pool's config file and the address it listens on."""
    server = f"{sys.executable} {MISBEHAVING_SERVER}"
    document = {
        "servers": {
            "plain": {
                "command": sys.executable,
                "args": [str(MISBEHAVING_SERVER), "--pid-file", str(tmp_path / "plain.pid")],
            },
            "wrapped": {
                "command": "bash",
                # The subshell's sleep is orphaned at once and exits while the server runs.
                "args": ["-c", f"(sleep 0.3 &); {server} --pid-file {tmp_path / 'wrapped.pid'}; exit $?"],
            },
        },
        "toolscout": {"pool": {"listen": f"127.0.0.1:{free_port()}", "metrics_port": -1}},
    }
    path = tmp_path / "pool.json"
    path.write_text(json.dumps(document))
    return path, document["toolscout"]["pool"]["listen"]


async def test_restarts_of_plain_and_wrapped_servers_leave_no_zombie(
    tmp_path: Path, config: tuple[Path, str]
) -> None:
    path, address = config
    log = _log_file(tmp_path)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "toolscout_cli", "serve", "pool", "-c", str(path),
        cwd=REPO_ROOT, stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )  # fmt: skip
    try:
        async with tc.AsyncPoolClient.connect(address) as pool:
            await asyncio.wait_for(pool.channel.channel_ready(), WAIT)

            async def restarted(name: str, count: int) -> bool:
                status = {s.name: s for s in await pool.list_servers()}[name]
                return status.state == "ready" and status.restarts >= count

            killed: set[int] = set()
            for name in ("plain", "wrapped"):
                await _until(lambda name=name: restarted(name, 0))
                for n in range(1, RESTARTS + 1):
                    leader = _leader(tmp_path, name)
                    killed |= {leader, int((tmp_path / f"{name}.pid").read_text().split()[0])}
                    os.kill(leader, signal.SIGKILL)
                    await _until(lambda name=name, n=n: restarted(name, n))

            async def no_zombies() -> bool:
                return not _zombies(process.pid)

            # Bounded: an exited child must be collected soon after it exits, not at the next stop.
            with contextlib.suppress(TimeoutError):
                await _until(no_zombies, within=10)
            assert _zombies(process.pid) == []
            # Nothing of the killed incarnations outlived them either.
            assert not await wait_until_gone(killed)
            tree = {c.pid for c in psutil.Process(process.pid).children(recursive=True)}
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            await asyncio.wait_for(process.wait(), WAIT)
        log.close()
    assert not await wait_until_gone(list(tree))


async def test_the_pool_never_reaps_a_child_that_is_not_one_of_its_servers(tmp_path: Path) -> None:
    """A pool in a process that starts children of its own (a test, ``toolscout up``) must leave
    their exit status to them: only processes of its servers' sessions are reaped."""
    from mcp_pool_svc.pool import McpPool
    from toolscout_kit.config import parse_config

    pid_file = tmp_path / "wrapped.pid"
    server = f"{sys.executable} {MISBEHAVING_SERVER} --pid-file {pid_file}"
    # The orphaned sleep lives long enough to be seen alive, then exits while the server runs.
    wrapped = {"command": "bash", "args": ["-c", f"(sleep 0.5 &); {server}; exit $?"]}
    pool = McpPool(parse_config({"servers": {"wrapped": wrapped}}, base_dir=tmp_path))
    mine = _children_of_our_own()
    try:
        await pool.start(wait=WAIT)
        me = os.getpid()
        session = _leader_of(pid_file)
        orphans: set[int] = set()

        async def an_orphan_of_the_server_was_reaped_meanwhile() -> bool:
            # Sweeps ran while ours were zombies: the server's orphan was seen, and is gone now.
            of_server = {c.pid for c in psutil.Process(me).children() if _session(c.pid) == session}
            orphans.update(of_server - {session})
            return bool(orphans) and not (orphans & of_server) and {p.pid for p in mine} <= set(_zombies(me))

        await _until(an_orphan_of_the_server_was_reaped_meanwhile, within=30)
        assert [p.wait(timeout=WAIT) for p in mine] == [3, 4]
    finally:
        await pool.stop()
        for child in mine:
            if child.returncode is None:
                child.kill()
                child.wait(timeout=WAIT)


def _session(pid: int) -> int | None:
    """The session id of a process (a zombie's too), or None once it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return int(raw[raw.rfind(b")") + 2 :].split()[3])


def _leader_of(pid_file: Path) -> int:
    """The wrapper that started the server whose pid is in ``pid_file`` (it leads the session)."""
    return int(psutil.Process(int(pid_file.read_text().split()[0])).ppid())
