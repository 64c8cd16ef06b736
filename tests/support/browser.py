"""Debian's Chromium driven by Playwright for Python, for the console's browser tests and bench.

Playwright never downloads a browser here: it launches ``/usr/bin/chromium`` (the Debian package
``chromium``), headless, without a sandbox (tests run as root in CI) and with Chromium's own
network chatter (updates, sync, component downloads) off.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Playwright

__all__ = ["CHROMIUM", "CHROMIUM_ARGS", "ensure_chromium", "launch_chromium"]

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)


def ensure_chromium(*, install: bool = False) -> Path:
    """``/usr/bin/chromium``; with ``install`` (as root, with apt-get) the Debian package is
    installed when missing.

    Raises:
        RuntimeError: it is not installed (and could not be).
    """
    if not CHROMIUM.exists() and install and shutil.which("apt-get") and os.geteuid() == 0:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for argv in (
            ["apt-get", "update", "-qq"],
            ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "chromium"],
        ):
            done = subprocess.run(argv, capture_output=True, text=True, timeout=900, env=env, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"{' '.join(argv)} failed: {done.stderr.strip()[-500:]}")
    if not CHROMIUM.exists():
        raise RuntimeError(f"{CHROMIUM} is missing: apt-get install --no-install-recommends chromium")
    return CHROMIUM


def launch_chromium(playwright: Playwright) -> Browser:
    return playwright.chromium.launch(
        executable_path=str(ensure_chromium()), args=list(CHROMIUM_ARGS), headless=True
    )
