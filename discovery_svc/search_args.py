"""search_tools arguments: the parameter schema the LLM sees and validation of what it sends.

LLMs send malformed arguments often enough that every rule here has an error message written
for them: a string where a list belongs is rejected rather than iterated per character, blank
values count as absent, and queries are bounded.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolscout.client import SEARCH_TOOL_NAME

from discovery_svc.errors import SearchArgumentError
from toolscout_kit.json_text import JsonTextError, parse_json

__all__ = [
    "MAX_QUERY_CHARS",
    "SEARCH_TOOL_NAME",
    "SEARCH_TOOL_PARAMETERS",
    "SearchArgs",
    "SearchArgumentError",
    "SearchMode",
    "parse_arguments_json",
    "validate_arguments",
]

MAX_QUERY_CHARS = 500
_MAX_TOOL_NAMES = 50

SEARCH_TOOL_PARAMETERS: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "description": (
                "Natural language capability search across all deferred tools "
                "(e.g. 'create a calendar event'). Uses keyword matching."
            ),
        },
        "server_name": {
            "type": "string",
            "description": (
                "Filter results to a specific server by name. Alone, it lists that server's tools."
            ),
        },
        "tool_names": {
            "type": "array",
            "items": {"type": "string"},
            "description": (
                "Load specific tools by exact name. Most token-efficient when you know the tool "
                "name from the manifest."
            ),
        },
        "offset": {
            "type": "integer",
            "minimum": 0,
            "description": "When listing a server's tools, skip this many (to see the next page).",
        },
    },
}


class SearchMode(enum.StrEnum):
    TOOL_NAMES = "tool_names"
    SERVER = "server"
    SERVER_QUERY = "server_query"
    QUERY = "query"
    # No arguments on the stable surface: the full manifest (its description holds a short one).
    MANIFEST = "manifest"


@dataclass(frozen=True, slots=True)
class SearchArgs:
    query: str | None = None
    server_name: str | None = None
    tool_names: tuple[str, ...] | None = None
    offset: int = 0

    @property
    def mode(self) -> SearchMode:
        """The PRD's precedence: tool_names > server_name + query > server_name > query; none of
        them: the manifest (only a ``browse`` validation lets that through)."""
        if self.tool_names is not None:
            return SearchMode.TOOL_NAMES
        if self.server_name is not None:
            return SearchMode.SERVER_QUERY if self.query is not None else SearchMode.SERVER
        return SearchMode.QUERY if self.query is not None else SearchMode.MANIFEST

    def without_names(self) -> SearchArgs:
        """The same call without ``tool_names`` (what a query given alongside them falls back to)."""
        return dataclasses.replace(self, tool_names=None)


def _opt_string(args: Mapping[str, Any], key: str) -> str | None:
    value = args.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise SearchArgumentError(f"'{key}' must be a string, got {_json_type(value)}.")
    return value.strip() or None


# JSON's types as the refusals name them; bool before number (a bool is an int in Python).
_JSON_TYPES: tuple[tuple[type | tuple[type, ...], str], ...] = (
    (bool, "a boolean"),
    ((int, float), "a number"),
    (str, "a string"),
    (list, "a list"),
    (dict, "an object"),
)


def _json_type(value: Any) -> str:
    return next((name for kind, name in _JSON_TYPES if isinstance(value, kind)), "null")


def validate_arguments(
    query: Any = None,
    server_name: Any = None,
    tool_names: Any = None,
    offset: Any = 0,
    *,
    browse: bool = False,
) -> SearchArgs:
    """Validated, normalised arguments (blank strings and empty lists count as absent); with
    ``browse`` (the stable surface) no arguments at all ask for the manifest.

    Raises:
        SearchArgumentError: wrong types, nothing given, a query over 500 characters, too many names.
    """
    raw = {"query": query, "server_name": server_name}
    q = _opt_string(raw, "query")
    s = _opt_string(raw, "server_name")
    names: tuple[str, ...] | None = None
    if tool_names is not None:
        # A string here is a classic LLM slip; iterating it would look up one name per character.
        if not isinstance(tool_names, list | tuple):
            raise SearchArgumentError(
                f"'tool_names' must be a list of strings (e.g. [\"get_weather\"]), got {_json_type(tool_names)}."
            )
        bad = [n for n in tool_names if not isinstance(n, str)]
        if bad:
            raise SearchArgumentError(f"'tool_names' must contain only strings, got {_json_type(bad[0])}.")
        cleaned = [n.strip() for n in tool_names if n.strip()]
        if len(cleaned) > _MAX_TOOL_NAMES:
            raise SearchArgumentError(f"'tool_names' may list at most {_MAX_TOOL_NAMES} names.")
        names = tuple(dict.fromkeys(cleaned)) or None
    if offset is None:
        offset = 0
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise SearchArgumentError("'offset' must be a non-negative integer.")
    if q is None and s is None and names is None and not browse:
        raise SearchArgumentError("Provide at least one of: query, server_name, or tool_names.")
    if q is not None and len(q) > MAX_QUERY_CHARS:
        raise SearchArgumentError(
            f"'query' is {len(q)} characters; keep it under {MAX_QUERY_CHARS} (a few keywords work best)."
        )
    return SearchArgs(query=q, server_name=s, tool_names=names, offset=offset)


def parse_arguments_json(raw: str, *, browse: bool = False) -> SearchArgs:
    """Arguments from the JSON the LLM sent; ``browse``: no arguments at all asks for the manifest.

    Raises:
        SearchArgumentError: not a JSON object, a key the tool does not take, or invalid as
            :func:`validate_arguments` says.
    """
    try:
        args = parse_json(raw, "search_tools arguments") if raw.strip() else {}
    except JsonTextError:
        raise SearchArgumentError(
            'search_tools arguments must be a JSON object, e.g. {"query": "send an email"}.'
        ) from None
    if not isinstance(args, dict):
        raise SearchArgumentError(f"search_tools arguments must be a JSON object, got {_json_type(args)}.")
    unknown = sorted(k for k in args if k not in SEARCH_TOOL_PARAMETERS["properties"])
    if unknown:
        # Refused rather than ignored: a caller that sends `max_results: -1` expects it to matter.
        raise SearchArgumentError(
            f"search_tools takes {', '.join(SEARCH_TOOL_PARAMETERS['properties'])}; "
            f"'{unknown[0][:40]}' is not one of them."
        )
    return validate_arguments(
        args.get("query"), args.get("server_name"), args.get("tool_names"), args.get("offset"), browse=browse
    )
