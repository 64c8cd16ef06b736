"""Example MCP server "text": small text utilities (counting, slugs, emails, diffs, JSON).

Also has ``wait``, a tool that just waits, for demonstrating timeouts and concurrent calls.
Run: ``python examples/servers/text.py [stdio|sse|streamable-http] [--port N]``.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import re
import sys
import unicodedata
from pathlib import Path
from typing import TypedDict

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

sys.path.insert(0, str(Path(__file__).parent))
from _run import run

server = MCPServer("text", instructions="Text utilities.", version="1.0.0")
READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True)


class Counts(TypedDict):
    characters: int
    words: int
    lines: int
    sentences: int


@server.tool(title="Count words", annotations=READ_ONLY)
def count_words(text: str) -> Counts:
    """Count characters, words, lines and sentences in a text."""
    return Counts(
        characters=len(text),
        words=len(text.split()),
        lines=text.count("\n") + 1 if text else 0,
        sentences=len([s for s in re.split(r"[.!?]+", text) if s.strip()]),
    )


@server.tool(title="Slugify", annotations=READ_ONLY)
def slugify(text: str, separator: str = "-") -> str:
    """Turn a title into a URL slug: ASCII, lower case, words joined by the separator."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return separator.join(re.findall(r"[a-z0-9]+", ascii_text.lower()))


@server.tool(title="Extract emails", annotations=READ_ONLY)
def extract_emails(text: str) -> list[str]:
    """Find every e-mail address in a text, in order of appearance, without duplicates."""
    return list(dict.fromkeys(re.findall(r"[\w.+-]+@[\w-]+\.[\w.-]+", text)))


@server.tool(title="Diff", annotations=READ_ONLY)
def diff_text(before: str, after: str, context_lines: int = 2) -> str:
    """A unified diff between two texts."""
    diff = difflib.unified_diff(
        before.splitlines(), after.splitlines(), "before", "after", n=context_lines, lineterm=""
    )
    return "\n".join(diff) or "no differences"


@server.tool(title="Format JSON", annotations=READ_ONLY)
def format_json(document: str, indent: int = 2, sort_keys: bool = False) -> str:
    """Pretty-print a JSON document; reports where the JSON is invalid."""
    try:
        value = json.loads(document)
    except json.JSONDecodeError as err:
        raise ToolError(f"invalid JSON at line {err.lineno} column {err.colno}: {err.msg}") from None
    return json.dumps(value, indent=indent, sort_keys=sort_keys, ensure_ascii=False)


@server.tool(annotations=READ_ONLY)
def reverse(text: str) -> str:
    # Deliberately without a docstring: a tool with no description must still be served.
    return text[::-1]


@server.tool(title="Wait")
async def wait(seconds: float = 0.1) -> str:
    """Wait for the given number of seconds (at most 60), then say so."""
    await asyncio.sleep(min(max(seconds, 0.0), 60.0))
    return f"waited {seconds:g}s"


if __name__ == "__main__":
    run(server)
