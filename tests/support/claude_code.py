"""Claude Code (npm ``@anthropic-ai/claude-code``) as an MCP host in tests, offline.

The npm package brings Claude Code's own native executable (a per-platform optional dependency), so
no download happens outside the registry. Every run gets its own home and config folder and the
variables that turn off the updater, telemetry, error reports and other traffic to Anthropic; the
``claude mcp`` commands used here (``add``, ``list``, ``get``, ``login``) talk only to the MCP server
and its authorization server. ``claude mcp login`` insists on a terminal, so it runs on a
pseudo-terminal (:class:`Terminal`), which also lets a test read the authorization URL it prints.
"""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from tests.support.mcp_servers import NPM_PREFIX
from tests.support.node import npm_install

__all__ = ["CLAUDE_CODE_PACKAGE", "CLAUDE_CODE_VERSION", "ClaudeCode", "Terminal", "claude_code_bin"]

CLAUDE_CODE_PACKAGE = "@anthropic-ai/claude-code"
CLAUDE_CODE_VERSION = "2.1.328"
# Terminal control sequences (OSC hyperlinks around URLs, colours, cursor): dropped from what is read.
_CONTROL = re.compile(r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b\[[0-9;?]*[A-Za-z]")


def claude_code_bin(timeout: float = 600.0) -> Path:
    """The ``claude`` executable, installed at the pinned version on first use.

    Raises:
        RuntimeError: the install failed or brought no executable for this platform.
    """
    npm_install(CLAUDE_CODE_PACKAGE, CLAUDE_CODE_VERSION, NPM_PREFIX, timeout)
    exe = NPM_PREFIX / "node_modules" / ".bin" / "claude"
    if not exe.exists():
        raise RuntimeError(f"npm install {CLAUDE_CODE_PACKAGE}@{CLAUDE_CODE_VERSION} brought no `claude`")
    return exe


class ClaudeCode:
    """``claude`` with a home of its own (its config and credentials live there) and no traffic to
    Anthropic."""

    def __init__(self, exe: Path, home: Path) -> None:
        self.exe = exe
        self.home = home
        home.mkdir(parents=True, exist_ok=True)
        self.env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(home),
            "CLAUDE_CONFIG_DIR": str(home / ".claude"),
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "BROWSER": "/bin/false",
            "TERM": "dumb",
        }

    def run(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.exe), *args],
            cwd=self.home,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def on_terminal(self, *args: str) -> Terminal:
        return Terminal([str(self.exe), *args], cwd=self.home, env=self.env)


class Terminal:
    """A process on a pseudo-terminal; what it prints is collected, control sequences dropped."""

    def __init__(self, argv: list[str], *, cwd: Path, env: dict[str, str]) -> None:
        self._master, slave = pty.openpty()
        self.process = subprocess.Popen(
            argv, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env, close_fds=True
        )
        os.close(slave)
        self._raw = b""

    @property
    def text(self) -> str:
        return _CONTROL.sub("", self._raw.decode(errors="replace"))

    def wait_for(self, predicate: Callable[[str], bool], within: float) -> str:
        """The text printed once ``predicate`` holds for it.

        Raises:
            RuntimeError: it does not within ``within`` seconds (or the output ended first).
        """
        ends = time.monotonic() + within
        while not predicate(self.text):
            left = ends - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"not printed within {within:g}s; printed:\n{self.text}")
            ready, _, _ = select.select([self._master], [], [], min(left, 1.0))
            if not ready:
                continue
            try:
                chunk = os.read(self._master, 65536)
            except OSError:  # the process closed its terminal
                chunk = b""
            if not chunk and not predicate(self.text):
                raise RuntimeError(f"the output ended; printed:\n{self.text}")
            self._raw += chunk
        return self.text

    def close(self) -> int | None:
        """Ends the process (if still running) and closes the terminal; its exit code."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        os.close(self._master)
        return self.process.returncode
