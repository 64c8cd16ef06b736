"""LLM-facing tool names: sanitized, at most 64 characters, collision-free and stable.

A name is a pure function of its own ``(server, tool)`` pair, so adding or removing another server
never renames an existing tool. The readable form is ``<server>__<tool>``; whenever that form could
be ambiguous or invalid (characters replaced, a server name containing ``__`` or ending in ``_``,
too long) a short hash of the exact pair is appended instead, which keeps distinct pairs distinct.
Names are resolved through :class:`NameTable`, never by splitting them.

A server that is not namespaced (casual-mcp's top-level ``namespace_tools: false``, or the
server's own ``namespace_tools``) serves each tool under the tool's own name (a name that is not a
valid LLM-facing name gets the sanitized, hashed form). When such a name is also claimed by another
tool of the catalog, no tool silently shadows another: every bare claimant gets its namespaced
name instead, and :attr:`NameTable.clashes` names the servers that clash (the pool logs them). A
tool named like discovery's own tools (``search_tools``, ``call_tool``) is always namespaced.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Iterable

from toolscout.client import CALL_TOOL_NAME, SEARCH_TOOL_NAME

__all__ = [
    "MAX_NAME_LENGTH",
    "NAME_PATTERN",
    "RESERVED_NAMES",
    "NameTable",
    "bare_name",
    "llm_name",
    "server_named_by",
]

MAX_NAME_LENGTH = 64
NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_SEPARATOR = "__"
_INVALID = re.compile(r"[^a-zA-Z0-9_-]")
# Names of discovery's own tools, served beside the catalog's: never a tool's bare name.
RESERVED_NAMES = frozenset({SEARCH_TOOL_NAME, CALL_TOOL_NAME})


def _sanitize(part: str) -> str:
    return _INVALID.sub("_", part)


def _hashed(server: str, tool: str, digits: int) -> str:
    digest = hashlib.sha256(f"{server}\x00{tool}".encode()).hexdigest()[:digits]
    base = f"{_sanitize(server)}{_SEPARATOR}{_sanitize(tool)}"
    keep = MAX_NAME_LENGTH - digits - 1
    return f"{base[:keep]}_{digest}"


def _plain_is_unambiguous(server: str, tool: str) -> bool:
    # With a server that has no "__" and does not end in "_", the first "__" in the name marks
    # the separator, so two different pairs can never produce the same plain name.
    return (
        bool(server)
        and bool(tool)
        and _sanitize(server) == server
        and _sanitize(tool) == tool
        and _SEPARATOR not in server
        and not server.endswith("_")
        and len(server) + len(_SEPARATOR) + len(tool) <= MAX_NAME_LENGTH
    )


@functools.lru_cache(maxsize=1 << 17)
def llm_name(server: str, tool: str, *, hash_digits: int = 8) -> str:
    """The LLM-facing name of ``tool`` on ``server`` (depends on nothing else; cached)."""
    if _plain_is_unambiguous(server, tool):
        return f"{server}{_SEPARATOR}{tool}"
    return _hashed(server, tool, hash_digits)


@functools.lru_cache(maxsize=1 << 17)
def bare_name(tool: str, *, hash_digits: int = 8) -> str:
    """The LLM-facing name of ``tool`` on a server that is not namespaced: the tool's own name when
    it is a valid one, else the sanitized name with a short hash of the exact name."""
    if NAME_PATTERN.match(tool):
        return tool
    digest = hashlib.sha256(tool.encode()).hexdigest()[:hash_digits]
    return f"{_sanitize(tool)[: MAX_NAME_LENGTH - hash_digits - 1]}_{digest}"


def _always(server: str) -> bool:
    return True


class NameTable:
    """Both directions between ``(server, tool)`` and LLM-facing names for one catalog.

    ``namespaced(server)`` tells whether a server's tools are named ``<server>__<tool>`` (the
    default) or by their own names.
    """

    def __init__(
        self, pairs: Iterable[tuple[str, str]] = (), namespaced: Callable[[str], bool] = _always
    ) -> None:
        self._by_pair: dict[tuple[str, str], str] = {}
        self._by_name: dict[str, tuple[str, str]] = {}
        # Pairs whose name is not their own (lengthened by a hash collision, or namespaced after a
        # clash of bare names): normally none.
        self.collisions: frozenset[tuple[str, str]] = frozenset()
        # A bare name claimed by more than one tool -> the servers claiming it (sorted).
        self.clashes: dict[str, tuple[str, ...]] = {}
        unique = sorted(set(pairs))
        bare = {pair: bare_name(pair[1]) for pair in unique if not namespaced(pair[0])}
        claims: dict[str, list[tuple[str, str]]] = {}
        for pair in unique:
            claims.setdefault(bare.get(pair) or llm_name(*pair), []).append(pair)
        demoted = {
            pair
            for name, owners in claims.items()
            if len(owners) > 1 or name in RESERVED_NAMES
            for pair in owners
            if pair in bare
        }
        self.clashes = {
            name: tuple(sorted({server for server, _ in owners}))
            for name, owners in claims.items()
            if len(owners) > 1 and any(pair in bare for pair in owners)
        }
        lengthened: set[tuple[str, str]] = set(demoted)
        # Sorted so that the (astronomically unlikely) hash-collision fallback is deterministic.
        for pair in unique:
            if self._add(pair, None if pair in demoted else bare.get(pair)):
                lengthened.add(pair)
        self.collisions = frozenset(lengthened)

    def _add(self, pair: tuple[str, str], bare: str | None) -> bool:
        if bare is not None:
            self._by_pair[pair] = bare
            self._by_name[bare] = pair
            return False
        name = llm_name(*pair)
        digits = 8
        while name in self._by_name and self._by_name[name] != pair:
            digits += 8
            name = _hashed(pair[0], pair[1], digits)
        self._by_pair[pair] = name
        self._by_name[name] = pair
        return digits > 8

    def name_for(self, server: str, tool: str) -> str:
        """The name of a pair in this table (computed on the fly for a pair not in it)."""
        return self._by_pair.get((server, tool)) or llm_name(server, tool)

    def resolve(self, name: str) -> tuple[str, str] | None:
        """The ``(server, tool)`` pair behind a name, or None when no tool has that name."""
        return self._by_name.get(name)

    def __len__(self) -> int:
        return len(self._by_pair)


_HASH_TAIL = re.compile(r"_[0-9a-f]{8,}$")


def _names_a_tool_of(server: str, name: str) -> bool:
    readable = f"{server}{_SEPARATOR}"
    if name.startswith(readable) and llm_name(server, name[len(readable) :]) == name:
        return True  # the readable form, run forward: exactly this server's
    # A hashed form: its tool part cannot be recovered, only the readable start of the pair
    # (cut short in a name of the full length) before the hash.
    tail = _HASH_TAIL.search(name)
    if tail is None:
        return False
    stem, start = name[: tail.start()], f"{_sanitize(server)}{_SEPARATOR}"
    return stem.startswith(start) or (len(name) == MAX_NAME_LENGTH and start.startswith(stem))


def server_named_by(name: str, servers: Iterable[str]) -> str | None:
    """Which of ``servers`` a name no catalog holds would be a tool of, by :func:`llm_name` run
    forward over the configured server names, or None.

    Only to explain an unknown name (a tool of a server that has not listed its tools yet, or that
    another pool shard runs); calls are resolved through :class:`NameTable`. Unlike splitting the
    name at its first ``__``, this finds servers whose names contain ``__`` or characters the name
    replaced; when two servers fit, the longer (more specific) name wins.
    """
    fits = [server for server in servers if _names_a_tool_of(server, name)]
    return max(fits, key=len) if fits else None
