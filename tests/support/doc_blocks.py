"""The code blocks of the documentation, with the marker that says whether a test runs them.

Every fenced block in a checked Markdown file is preceded by one HTML comment (invisible when
rendered):

* ``<!-- runnable -->``: a test runs it, as written, against a stack started from the example
  config (bash blocks in bash from the repository root, python blocks with the project's Python);
* ``<!-- runnable: app-venv -->``: the same, inside a fresh, activated virtual environment standing
  for the reader's own application (install instructions);
* ``<!-- runnable: oauth-test-servers -->`` / ``<!-- runnable: oauth-gateway -->``: the same, with
  the test authorization server and an MCP server behind it (``$OAUTH_TEST_SERVER_URL``), or a
  stack whose gateway has ``gateway.oauth`` with it (``$OAUTH_GATEWAY_URL``);
* ``<!-- not runnable: WHY -->``: says why no test runs it (a cluster, fixed ports, a listing);
* ``<!-- output -->`` (a ``text`` block right after a runnable one): what that block prints, line for
  line; ``…`` stands for a part that changes from run to run (a date, a port).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DOCS", "DocBlock", "blocks", "output_matches"]

DOCS = ("README.md", "clients/README.md", "deploy/README.md")

_FENCE = re.compile(r"^(?P<fence>```+|~~~+)\s*(?P<info>[^`]*)$")
_MARKER = re.compile(r"^<!--\s*(?P<kind>runnable|not runnable|output)\s*(?::\s*(?P<detail>.*?))?\s*-->$")


@dataclass(frozen=True)
class DocBlock:
    path: str  # relative to the repository root
    line: int  # 1-based line of the opening fence
    language: str
    body: str
    marker: str  # "runnable", "not runnable", "output" or "" (unmarked)
    detail: str  # runnable's option ("app-venv") or not runnable's reason

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"


def blocks(root: Path, path: str) -> list[DocBlock]:
    """The fenced code blocks of ``root/path`` in order, each with the marker right above it."""
    lines = (root / path).read_text(encoding="utf-8").splitlines()
    found: list[DocBlock] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i].strip())
        if not opening:
            i += 1
            continue
        fence = opening["fence"]
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip().startswith(fence)), len(lines))
        previous = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = _MARKER.match(previous)
        found.append(
            DocBlock(
                path=path,
                line=i + 1,
                language=opening["info"].strip().split(" ")[0],
                body="\n".join(lines[i + 1 : end]) + "\n",
                marker=marker["kind"] if marker else "",
                detail=(marker["detail"] or "") if marker else "",
            )
        )
        i = end + 1
    return found


def output_matches(expected: str, actual: str) -> bool:
    """Whether ``actual`` (a block's output) is ``expected`` (an output block) line for line, each
    ``…`` in an expected line standing for any text."""
    want = [line.rstrip() for line in expected.strip("\n").splitlines()]
    got = [line.rstrip() for line in actual.strip("\n").splitlines()]
    if len(want) != len(got):
        return False
    patterns = [re.compile(".*?".join(re.escape(part) for part in line.split("…")) + "$") for line in want]
    return all(p.match(line) for p, line in zip(patterns, got, strict=True))
