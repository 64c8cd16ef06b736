"""Loading: the file (JSON or YAML), ``${VAR}`` expansion, overrides, validation with errors that
name the file and the key path, and casual-mcp's environment variables."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from toolscout_kit.config.document import ToolscoutConfig
from toolscout_kit.config.orchestrator import RESULT_FORMATS
from toolscout_kit.config.pool import DEFAULT_TOOL_CACHE_TTL
from toolscout_kit.config.search import SEARCH_MODE_ENV
from toolscout_kit.config.unknown_keys import sort_unknown_keys
from toolscout_kit.errors import ConfigError

__all__ = ["CONFIG_ENV", "load_config", "parse_config", "resolve_config_path"]

CONFIG_ENV = "TOOLSCOUT_CONFIG"
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def resolve_config_path(explicit: str | os.PathLike[str] | None) -> Path:
    """The config path from ``--config`` or ``TOOLSCOUT_CONFIG`` (never the working directory).

    Raises:
        ConfigError: neither is given, or the file does not exist.
    """
    raw = os.fspath(explicit) if explicit else os.environ.get(CONFIG_ENV, "")
    if not raw:
        raise ConfigError(f"no configuration given: pass --config PATH or set {CONFIG_ENV}")
    path = Path(raw).expanduser()
    if not path.is_file():
        raise ConfigError(f"{path}: configuration file not found")
    return path.resolve()


def _expand(value: Any, env: Mapping[str, str], where: str, missing: list[str]) -> Any:
    if isinstance(value, str):

        def sub(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name in env:
                return env[name]
            if default is not None:
                return default
            missing.append(f"{where or '<root>'}: environment variable ${{{name}}} is not set")
            return ""

        return _VAR.sub(sub, value)
    if isinstance(value, Mapping):
        return {k: _expand(v, env, f"{where}.{k}" if where else str(k), missing) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, env, f"{where}[{i}]", missing) for i, v in enumerate(value)]
    return value


def _format_validation_error(source: str, err: ValidationError) -> str:
    lines = []
    for e in err.errors(include_url=False, include_input=False):
        loc = ".".join(str(p) for p in e["loc"] if not str(p).startswith("function-"))
        # Drop pydantic's union-member tags from the path: they are not keys in the file.
        loc = re.sub(r"\.(stdio|remote|bool|list\[str\]|ExcludeSpec)(?=\.|$)", "", loc)
        msg = e["msg"].removeprefix("Value error, ")
        if loc:
            lines.append(f"{source}: {loc}: {msg}")
        else:
            # Cross-reference problems already carry their own key paths, one per line.
            lines.extend(f"{source}: {line}" for line in msg.splitlines())
    return "\n".join(dict.fromkeys(lines))


def _apply_count_file(expanded: dict[str, Any], base_dir: Path, source: str) -> None:
    """Replaces ``toolscout.pool.shards.count`` with the contents of ``count_file`` when one is named.

    Raises:
        ConfigError: the file cannot be read or does not hold a whole number.
    """
    shards = ((expanded.get("toolscout") or {}).get("pool") or {}).get("shards")
    if not isinstance(shards, Mapping) or not shards.get("count_file"):
        return
    raw = str(shards["count_file"])
    path = Path(os.path.expanduser(raw))
    path = path if path.is_absolute() else base_dir / path
    where = f"{source}: toolscout.pool.shards.count_file"
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError as err:
        raise ConfigError(f"{where}: cannot read {path}: {err.strerror}") from None
    if not text.isdigit():
        raise ConfigError(f"{where}: {path} must hold the shard count (a whole number), not {text[:40]!r}")
    shards = dict(shards)
    shards["count"] = int(text)
    expanded["toolscout"] = {
        **expanded["toolscout"],
        "pool": {**expanded["toolscout"]["pool"], "shards": shards},
    }


def _overlay(document: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``document`` with ``overrides`` merged in: mappings key by key, anything else replaced."""
    merged = dict(document)
    for key, value in overrides.items():
        current = merged.get(key)
        if isinstance(value, Mapping) and isinstance(current, Mapping):
            merged[key] = _overlay(dict(current), value)
        else:
            merged[key] = value
    return merged


def parse_config(
    data: Any,
    *,
    source: str = "<config>",
    base_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> ToolscoutConfig:
    """Validate an already-parsed config document.

    ``overrides`` (a partial document, e.g. from command-line flags) replace keys of the file
    *before* it is validated, so that what they change is checked together with the rest (a server
    pinned to shard 2 is valid once a flag says there are 3 shards).

    Raises:
        ConfigError: naming ``source``, the key path and the problem.
    """
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: the top level must be an object with keys such as 'servers'")
    missing: list[str] = []
    expanded = _expand(dict(data), os.environ if env is None else env, "", missing)
    if missing:
        raise ConfigError("\n".join(f"{source}: {m}" for m in missing))
    if overrides:
        expanded = _overlay(expanded, overrides)
    _apply_count_file(expanded, base_dir or Path.cwd(), source)
    found: list[tuple[str, str, bool]] = []
    expanded = sort_unknown_keys(ToolscoutConfig, expanded, "", False, found)
    errors = [f"{source}: {path}: {message}" for path, message, is_error in found if is_error]
    if errors:
        raise ConfigError("\n".join(errors))
    expanded["base_dir"] = base_dir or Path.cwd()
    expanded["load_warnings"] = tuple(f"{source}: {path}: {message}" for path, message, _ in found)
    try:
        config = ToolscoutConfig.model_validate(expanded)
    except ValidationError as err:
        raise ConfigError(_format_validation_error(source, err)) from None
    return _apply_environment(config, os.environ if env is None else env)


def _apply_environment(config: ToolscoutConfig, env: Mapping[str, str]) -> ToolscoutConfig:
    """casual-mcp's environment variables, resolved once here rather than on every use.

    ``MCP_TOOL_CACHE_TTL`` applies when the file sets no ``pool.tool_cache_ttl`` (<= 0 means "cache
    until list_changed"); ``TOOL_RESULT_FORMAT`` wins over ``orchestrator.tool_result_format``, and
    toolscout's ``TOOLSCOUT_SEARCH_MODE`` over ``search.mode``.

    Raises:
        ConfigError: a variable holds a value that is not valid.
    """
    settings = config.toolscout
    ttl = settings.pool.tool_cache_ttl
    raw_ttl = env.get("MCP_TOOL_CACHE_TTL", "").strip()
    if ttl is None and raw_ttl:
        try:
            ttl = max(float(raw_ttl), 0.0)
        except ValueError:
            raise ConfigError(f"MCP_TOOL_CACHE_TTL: expected a number of seconds, got {raw_ttl!r}") from None
    fmt = settings.orchestrator.tool_result_format
    raw_fmt = env.get("TOOL_RESULT_FORMAT", "").strip()
    if raw_fmt:
        if raw_fmt not in RESULT_FORMATS:
            raise ConfigError(
                f"TOOL_RESULT_FORMAT: expected one of {', '.join(RESULT_FORMATS)}, got {raw_fmt!r}"
            )
        fmt = raw_fmt
    search = settings.search
    raw_mode = env.get(SEARCH_MODE_ENV, "").strip()
    if raw_mode:
        if raw_mode not in ("bm25", "hybrid"):
            raise ConfigError(f"{SEARCH_MODE_ENV}: expected bm25 or hybrid, got {raw_mode!r}")
        search = search.model_copy(update={"mode": raw_mode})
    pool = settings.pool.model_copy(
        update={"tool_cache_ttl": ttl if ttl is not None else DEFAULT_TOOL_CACHE_TTL}
    )
    orchestrator = settings.orchestrator.model_copy(update={"tool_result_format": fmt or "result"})
    return config.model_copy(
        update={
            "toolscout": settings.model_copy(
                update={"pool": pool, "orchestrator": orchestrator, "search": search}
            )
        }
    )


def load_config(
    path: str | os.PathLike[str] | None = None, *, overrides: Mapping[str, Any] | None = None
) -> ToolscoutConfig:
    """Load the config from ``path`` (or ``TOOLSCOUT_CONFIG``): JSON or YAML by extension, with
    ``overrides`` applied as :func:`parse_config` does.

    Raises:
        ConfigError: file missing or unreadable, syntax error (with line), or invalid contents.
    """
    resolved = resolve_config_path(path)
    try:
        text = resolved.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"{resolved}: cannot read: {err.strerror}") from None
    try:
        data = yaml.safe_load(text) if resolved.suffix.lower() in {".yaml", ".yml"} else json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError(
            f"{resolved}: invalid JSON at line {err.lineno} column {err.colno}: {err.msg}"
        ) from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{resolved}: invalid YAML{where}: {getattr(err, 'problem', err)}") from None
    return parse_config(data, source=str(resolved), base_dir=resolved.parent, overrides=overrides)
