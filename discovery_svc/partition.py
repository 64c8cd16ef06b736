"""Which tools a request may use (toolset filter) and which of those are loaded vs deferred.

The order is fixed by the PRD: all tools → toolset filter → loaded / deferred. Toolsets follow
casual-mcp's ``tool_sets`` semantics (``true`` = every tool of the server, a list = only those
tools, ``{exclude: [...]}`` = all but those) and are validated against the catalog.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import ValidationError
from toolscout.client import Tool, ToolsetRef

from discovery_svc.catalog import Catalog
from discovery_svc.errors import InvalidToolsetError, ToolsetNotFoundError
from toolscout_kit.config import ExcludeSpec, ToolscoutConfig, ToolSetConfig
from toolscout_kit.json_text import JsonTextError, parse_json

__all__ = [
    "InlineToolset",
    "Partition",
    "Toolset",
    "ToolsetNotFoundError",
    "partition_tools",
    "resolve_toolset",
    "select_toolset",
]

_MAX_INLINE_JSON = 256 * 1024
# The request field an inline toolset travels in, named in what a caller is told about it.
_FIELD = "toolset_json"


@dataclass(frozen=True, slots=True)
class InlineToolset:
    """A toolset a caller gives with its request, in the shape of a ``tool_sets`` entry, validated.

    ``key`` is its :class:`~toolscout.client.ToolsetRef`'s: a hash of its canonical form (servers
    sorted, tool lists sorted and deduplicated, the description left out), so the same filter
    written differently shares one prepared state.
    """

    spec: ToolSetConfig
    ref: ToolsetRef

    @property
    def key(self) -> str:
        return self.ref.key

    @classmethod
    def parse(cls, text: str) -> InlineToolset:
        """Parses and validates the JSON of an inline toolset (``{"servers": {...}}``).

        Raises:
            InvalidToolsetError: not JSON (or nested too deeply, or not valid Unicode), not the
                tool_sets shape (booleans must be JSON ``true``/``false``), or too large.
        """
        if len(text) > _MAX_INLINE_JSON:
            raise InvalidToolsetError(f"{_FIELD}: larger than {_MAX_INLINE_JSON} bytes")
        try:
            data = parse_json(text, _FIELD)
        except JsonTextError as err:
            raise InvalidToolsetError(err.message) from None
        if not isinstance(data, dict):
            raise InvalidToolsetError(f'{_FIELD}: expected an object like {{"servers": {{"weather": true}}}}')
        try:
            spec = ToolSetConfig.model_validate(data)
        except ValidationError as err:
            problems = []
            for e in err.errors(include_url=False, include_input=False):
                # Union-member tags are not keys of the document.
                loc = ".".join(str(p) for p in e["loc"] if str(p) not in {"bool", "list[str]", "ExcludeSpec"})
                msg = e["msg"].removeprefix("Value error, ")
                problems.append(f"{loc}: {msg}" if loc else msg)
            raise InvalidToolsetError(f"{_FIELD}: " + "; ".join(dict.fromkeys(problems))) from None
        return cls(spec, ToolsetRef.inline(data))


# A toolset resolved for use: a configured toolset's name ("" = every tool), or a validated inline one.
Toolset = str | InlineToolset


def resolve_toolset(ref: ToolsetRef) -> Toolset:
    """The toolset a request names: its name, or its inline filter parsed (at most one of the two).

    Raises:
        InvalidToolsetError: both are given, or the inline filter is malformed.
    """
    if not ref.filter_json:
        return ref.name
    if ref.name:
        raise InvalidToolsetError(f"give either a toolset name or an inline toolset ({_FIELD}), not both")
    return InlineToolset.parse(ref.filter_json)


def _names(values: Sequence[str], limit: int = 50) -> str:
    shown = ", ".join(values[:limit])
    more = len(values) - limit
    return f"{shown}, ... and {more} more" if more > 0 else shown


def _validate(name: str, toolset: ToolSetConfig, catalog: Catalog, config: ToolscoutConfig) -> None:
    problems: list[str] = []
    for server, spec in toolset.servers.items():
        if server not in config.servers:
            known = _names(sorted(config.servers)) or "none configured"
            problems.append(f"server '{server}' is not configured (servers: {known})")
            continue
        available = sorted({t.name for t in catalog.server_tools(server)})
        if not available:
            # The server is not connected yet (or is down past its grace period): its tools are
            # simply absent. Failing every request of the toolset until it comes back would turn
            # one flaky server into an outage, so named tools are only checked against a live list.
            continue
        listed = spec if isinstance(spec, list) else spec.exclude if isinstance(spec, ExcludeSpec) else []
        where = " (in its exclude list)" if isinstance(spec, ExcludeSpec) else ""
        problems.extend(
            f"tool '{tool}'{where} not found in server '{server}' (tools: {_names(available)})"
            for tool in listed
            if tool not in available
        )
    if problems:
        what = f"Toolset '{name}'" if name else "The inline toolset"
        raise ToolsetNotFoundError(f"{what} is invalid: " + "; ".join(problems) + ".")


def select_toolset(
    catalog: Catalog, config: ToolscoutConfig, toolset: Toolset, *, validate: bool = True
) -> tuple[Tool, ...]:
    """The catalog's tools allowed by ``toolset`` ("" = every tool), in catalog order.

    An inline toolset is validated exactly like a configured one; ``validate=False`` (a catalog
    of some servers only: what ``per_user`` servers list to one user) filters without checking
    that every server and tool it names is there.

    Raises:
        ToolsetNotFoundError: unknown toolset, or one naming a server or tool that does not exist;
            the message lists what exists.
    """
    if isinstance(toolset, InlineToolset):
        spec_set = toolset.spec
        if validate:
            _validate("", spec_set, catalog, config)
    elif not toolset:
        return catalog.tools
    else:
        found = config.tool_sets.get(toolset)
        if found is None:
            known = _names(sorted(config.tool_sets)) or "none configured"
            raise ToolsetNotFoundError(f"Unknown toolset '{toolset}'. Toolsets: {known}.")
        spec_set = found
        if validate:
            _validate(toolset, spec_set, catalog, config)
    selected: list[Tool] = []
    for server in sorted(spec_set.servers):
        spec = spec_set.servers[server]
        tools = catalog.server_tools(server)
        if spec is True:
            selected.extend(tools)
        elif isinstance(spec, list):
            wanted = set(spec)
            selected.extend(t for t in tools if t.name in wanted)
        elif isinstance(spec, ExcludeSpec):
            excluded = set(spec.exclude)
            selected.extend(t for t in tools if t.name not in excluded)
        # `false` means the server is listed but contributes nothing.
    return tuple(selected)


@dataclass(frozen=True, slots=True)
class Partition:
    """A toolset's tools split into eagerly loaded and deferred, both in catalog order."""

    tools: tuple[Tool, ...]
    loaded: tuple[Tool, ...]
    deferred: tuple[Tool, ...]

    @property
    def has_search_tool(self) -> bool:
        """search_tools is offered only when something is deferred."""
        return bool(self.deferred)


def partition_tools(tools: Sequence[Tool], config: ToolscoutConfig) -> Partition:
    """Splits already toolset-filtered ``tools`` into loaded and deferred.

    With ``tool_discovery.enabled`` false everything loads. Otherwise a tool is deferred when its
    server has ``defer_loading`` (or ``defer_all`` is on) and it is not in the server's
    ``always_load`` list. Without ``defer_all``, tools of servers missing from the config load
    eagerly, as in casual-mcp, so nothing is silently hidden.
    """
    discovery = config.tool_discovery
    if not discovery.enabled:
        all_tools = tuple(tools)
        return Partition(tools=all_tools, loaded=all_tools, deferred=())
    loaded: list[Tool] = []
    deferred: list[Tool] = []
    for tool in tools:
        # One rule with the gateway's per-user lists (ToolscoutConfig.deferred).
        if config.deferred(tool.server, tool.name):
            deferred.append(tool)
        else:
            loaded.append(tool)
    all_tools = tuple(tools)
    # With everything deferred (defer_all, the large-catalog case) both lists are one tuple.
    return Partition(
        tools=all_tools,
        loaded=tuple(loaded),
        deferred=all_tools if not loaded else tuple(deferred),
    )
