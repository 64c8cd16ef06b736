"""Unknown keys of a config document: ignored with a warning where casual-mcp ignores them, an
error where they look like a misspelt key or sit in toolscout's own section."""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel

from toolscout_kit.names import closest, unknown_name

__all__ = ["sort_unknown_keys"]

#
# casual-mcp (pydantic with its default ``extra="ignore"``) ignores keys it does not know, and
# files written for it carry some (``$schema`` for editors, notes). toolscout accepts those with a
# warning, so the same file loads in both, but a key that looks like a misspelling of a known one
# is an error naming the closest keys: a typo must not silently turn a setting off. In toolscout's
# own section every unknown key is an error.


def _models_of(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation allows (through Optional, unions and Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _models_of(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [m for arg in typing.get_args(annotation) for m in _models_of(arg)]
    return []


def _dict_values(annotation: Any) -> Any | None:
    """``V`` of a ``dict[str, V]`` annotation (through Optional), else None."""
    origin = typing.get_origin(annotation)
    if origin is dict:
        return typing.get_args(annotation)[1]
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _dict_values(arg)
            if found is not None:
                return found
    return None


def _pick(models: list[type[BaseModel]], value: Mapping[str, Any]) -> type[BaseModel] | None:
    # The union member that knows most of the keys (servers: stdio vs remote; "exclude" lists).
    if not models:
        return None
    return max(models, key=lambda m: sum(1 for k in value if k in m.model_fields))


def sort_unknown_keys(
    model: type[BaseModel], data: Mapping[str, Any], path: str, own: bool, found: list[tuple[str, str, bool]]
) -> dict[str, Any]:
    """``data`` without the unknown keys that may be ignored; records ``(path, message, is_error)``."""
    kept: dict[str, Any] = {}
    known = [name for name, field in model.model_fields.items() if not field.exclude]
    for key, value in data.items():
        where = f"{path}.{key}" if path else str(key)
        field = model.model_fields.get(key)
        if field is None or field.exclude:
            # Stricter than for names: short keys look alike (comment/command is 0.71).
            close = closest(str(key), known, cutoff=0.75)
            if own or close:
                found.append((path or "<root>", unknown_name("key", str(key), known, close), True))
                kept[key] = value
            else:
                found.append((where, "not a key toolscout knows: ignored, as casual-mcp does", False))
            continue
        kept[key] = _sort_value(
            field.annotation, value, where, own or (not path and key == "toolscout"), found
        )
    return kept


def _sort_value(annotation: Any, value: Any, path: str, own: bool, found: list[tuple[str, str, bool]]) -> Any:
    if not isinstance(value, Mapping):
        return value
    values = _dict_values(annotation)
    if values is not None:
        return {k: _sort_value(values, v, f"{path}.{k}", own, found) for k, v in value.items()}
    model = _pick(_models_of(annotation), value)
    if model is None:
        return value
    return sort_unknown_keys(model, value, path, own, found)
