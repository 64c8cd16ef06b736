"""A tool's input schema for people: the argument tree, an example ``--args``, and what a value lacks.

MCP servers send JSON Schema as their SDK generates it: pydantic puts nested models under ``$defs``
and points at them with ``$ref``, optional values are ``anyOf [X, null]``. Everything here follows
local references (``#/...``) and stops at a fixed depth, so a recursive schema cannot loop.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["argument_problems", "argument_tree", "example_arguments", "resolve"]

_MAX_DEPTH = 6
_HINT = re.compile(r"""\be\.\s?g\.,?:?\s*(?:'([^']+)'|"([^"]+)"|`([^`]+)`|([^\s,;)]+))""", re.IGNORECASE)
_FORMAT_EXAMPLES = {
    "date": "2026-01-31",
    "date-time": "2026-01-31T12:00:00Z",
    "time": "12:00:00",
    "email": "user@example.com",
    "uri": "https://example.com",
    "url": "https://example.com",
    "uuid": "00000000-0000-0000-0000-000000000000",
}
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def _pointer(root: Mapping[str, Any], ref: str) -> Any:
    node: Any = root
    for raw in ref.removeprefix("#").strip("/").split("/"):
        if not raw:
            continue
        key = raw.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


def resolve(node: Any, root: Mapping[str, Any]) -> Mapping[str, Any]:
    """``node`` with local ``$ref`` followed (keys beside the ``$ref`` win); ``{}`` if not a schema."""
    for _ in range(_MAX_DEPTH * 4):
        if not isinstance(node, Mapping):
            return {}
        ref = node.get("$ref")
        if not isinstance(ref, str) or not ref.startswith("#"):
            return node
        target = _pointer(root, ref)
        if not isinstance(target, Mapping):
            return {k: v for k, v in node.items() if k != "$ref"}
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return {}


def _variants(schema: Mapping[str, Any], root: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    found = schema.get("anyOf") or schema.get("oneOf")
    return [resolve(v, root) for v in found] if isinstance(found, list) else []


def _non_null(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    """The object-like variant of ``anyOf [X, null]`` (or the schema itself)."""
    for variant in _variants(schema, root):
        if variant.get("type") != "null":
            return variant
    return schema


def _type_label(schema: Mapping[str, Any], root: Mapping[str, Any]) -> str:
    values = schema["enum"] if isinstance(schema.get("enum"), list) else None
    if values is None and "const" in schema:
        values = [schema["const"]]
    if values is not None:
        return " | ".join(json.dumps(v, ensure_ascii=False) for v in values)
    kind = schema.get("type")
    variants = _variants(schema, root)
    if isinstance(kind, list):
        label = "|".join(str(k) for k in kind)
    elif kind == "array":
        items = resolve(schema.get("items"), root)
        inner = _type_label(items, root) if items else "any"
        label = "array" if inner == "any" else f"array of {inner}"
    elif isinstance(kind, str):
        label = kind
    elif variants:
        label = "|".join(dict.fromkeys(_type_label(v, root) for v in variants))
    else:
        label = "object" if "properties" in schema else "any"
    return label


def _bounds(schema: Mapping[str, Any]) -> str:
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    high = schema.get("maximum", schema.get("exclusiveMaximum"))
    if low is None and high is None:
        return ""
    return f"{'' if low is None else low}..{'' if high is None else high}"


def _facts(schema: Mapping[str, Any], root: Mapping[str, Any], required: bool) -> str:
    facts = [_type_label(schema, root)]
    if required:
        facts.append("required")
    if schema.get("default") is not None:  # a null default only says "optional"
        facts.append(f"default {json.dumps(schema['default'], ensure_ascii=False)}")
    for variant in [schema, *_variants(schema, root)]:
        bounds = _bounds(variant)
        if bounds:
            facts.append(bounds)
            break
    return ", ".join(facts)


def _description(schema: Mapping[str, Any]) -> str:
    # Not the title: generators derive it from the name ("days" -> "Days"), which says nothing new.
    return " ".join(str(schema.get("description") or "").split())


def _object_lines(schema: Mapping[str, Any], root: Mapping[str, Any], indent: int, depth: int) -> list[str]:
    props = schema.get("properties")
    if not isinstance(props, Mapping) or depth > _MAX_DEPTH:
        return []
    required = schema.get("required")
    required_set = set(required) if isinstance(required, list) else set()
    lines: list[str] = []
    for name, raw in props.items():
        prop = resolve(raw, root)
        desc = _description(prop)
        line = f"{' ' * indent}{name} ({_facts(prop, root, name in required_set)})"
        lines.append(f"{line}: {desc}" if desc else line)
        lines.extend(_nested_lines(prop, root, indent + 2, depth + 1))
    return lines


def _nested_lines(prop: Mapping[str, Any], root: Mapping[str, Any], indent: int, depth: int) -> list[str]:
    inner = _non_null(prop, root)
    if inner.get("type") == "array":
        inner = _non_null(resolve(inner.get("items"), root), root)
    return _object_lines(inner, root, indent, depth)


def argument_tree(schema: Mapping[str, Any], indent: int = 2) -> list[str]:
    """One line per argument, nested objects indented under their parent: ``name (type, required, ...)``."""
    return _object_lines(resolve(schema, schema), schema, indent, 0)


# --- an example ----------------------------------------------------------------------------


def _hint(schema: Mapping[str, Any]) -> str | None:
    match = _HINT.search(str(schema.get("description") or ""))
    if not match:
        return None
    value = next(group for group in match.groups() if group)
    return value.rstrip(".:")


def _given(schema: Mapping[str, Any]) -> tuple[bool, Any]:
    """A value the schema itself offers: an example, a constant, an ``e.g.`` hint, a default, an enum."""
    examples = schema.get("examples")
    if isinstance(examples, list) and examples:
        return True, examples[0]
    if "const" in schema:
        return True, schema["const"]
    hint = _hint(schema)
    if hint is not None and not schema.get("enum") and _matches_type(schema.get("type", "string"), hint):
        return True, hint
    if schema.get("default") is not None:
        return True, schema["default"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return True, schema["enum"][0]
    return False, None


def _placeholder(kind: str, schema: Mapping[str, Any], name: str) -> Any:
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum"))
        value = low if isinstance(low, int | float) else 1
        return int(value) if kind == "integer" else float(value)
    fmt = schema.get("format")
    placeholders: dict[str, Any] = {"boolean": False, "null": None}
    if kind in placeholders:
        return placeholders[kind]
    return (_FORMAT_EXAMPLES.get(fmt, "") if isinstance(fmt, str) else "") or f"<{name}>"


def _example(schema: Mapping[str, Any], root: Mapping[str, Any], name: str, depth: int) -> Any:
    found, value = _given(schema)
    if found:
        return value
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        variant = _non_null(schema, root)
        if variant is not schema:
            return _example(variant, root, name, depth)
        kind = "object" if "properties" in schema else "string"
    if kind == "object":
        return _example_object(schema, root, depth + 1)
    if kind == "array":
        items = resolve(schema.get("items"), root)
        return [_example(items, root, name, depth + 1)] if items and depth < _MAX_DEPTH else []
    return _placeholder(str(kind), schema, name)


def _example_object(schema: Mapping[str, Any], root: Mapping[str, Any], depth: int) -> dict[str, Any]:
    props = schema.get("properties")
    if not isinstance(props, Mapping) or depth > _MAX_DEPTH:
        return {}
    required = schema.get("required")
    names = [n for n in props if isinstance(required, list) and n in required]
    if not names and depth > 1 and props:
        # A nested object with nothing required still needs something to mean anything
        # ({"location": {}} names no place): take the property with a hint, else the first.
        hinted = [n for n in props if _hint(resolve(props[n], root))]
        names = [hinted[0] if hinted else next(iter(props))]
    return {n: _example(resolve(props[n], root), root, n, depth) for n in names}


def example_arguments(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Arguments that have the schema's shape: required ones (nested objects filled in), with values
    from ``examples``, defaults, enums, ``e.g.`` hints in descriptions, or ``<name>`` placeholders."""
    return _example_object(resolve(schema, schema), schema, 1)


# --- what is wrong with a value ------------------------------------------------------------


def _kind_of(value: Any) -> str:
    for name, types in _JSON_TYPES.items():
        if isinstance(value, types) and not (name in ("integer", "number") and isinstance(value, bool)):
            return name
    return type(value).__name__


def _matches_type(kind: Any, value: Any) -> bool:
    kinds = kind if isinstance(kind, list) else [kind]
    for k in kinds:
        types = _JSON_TYPES.get(str(k))
        if types is None:
            return True
        if isinstance(value, bool) and k in ("integer", "number"):
            continue
        if k == "integer" and isinstance(value, float) and value.is_integer():
            return True
        if isinstance(value, types) and not (k == "integer" and isinstance(value, float)):
            return True
    return False


def _variant_problems(
    schema: Mapping[str, Any], root: Mapping[str, Any], value: Any, path: str, depth: int
) -> list[str]:
    variants = _variants(schema, root)
    per_variant = [_problems(v, root, value, path, depth + 1) for v in variants]
    if any(not p for p in per_variant):
        return []
    if all(v.get("type") == "null" or len(p) == 1 for v, p in zip(variants, per_variant, strict=True)):
        return [f"{path or 'arguments'}: expected {_type_label(schema, root)}, got {_kind_of(value)}"]
    return min(per_variant, key=len)


def _object_problems(
    schema: Mapping[str, Any], root: Mapping[str, Any], value: Mapping[str, Any], path: str, depth: int
) -> list[str]:
    found_props = schema.get("properties")
    props: Mapping[str, Any] = found_props if isinstance(found_props, Mapping) else {}
    found_required = schema.get("required")
    required: list[Any] = found_required if isinstance(found_required, list) else []
    prefix = f"{path}." if path else ""
    problems = [f"{prefix}{name}: required" for name in required if name not in value]
    for name, item in value.items():
        if name in props:
            problems += _problems(resolve(props[name], root), root, item, f"{prefix}{name}", depth + 1)
        elif schema.get("additionalProperties") is False:
            known = ", ".join(props) or "none"
            problems.append(f"{prefix}{name}: not an argument of this tool (arguments: {known})")
    return problems


def _problems(
    schema: Mapping[str, Any], root: Mapping[str, Any], value: Any, path: str, depth: int
) -> list[str]:
    where = path or "arguments"
    problems: list[str] = []
    kind = schema.get("type")
    if depth > _MAX_DEPTH:
        pass
    elif _variants(schema, root):
        problems = _variant_problems(schema, root, value, path, depth)
    elif isinstance(schema.get("enum"), list) and value not in schema["enum"]:
        got = json.dumps(value, ensure_ascii=False)
        problems = [f"{where}: expected one of {_type_label(schema, root)}, got {got}"]
    elif kind is not None and not _matches_type(kind, value):
        problems = [f"{where}: expected {_type_label(schema, root)}, got {_kind_of(value)}"]
    elif isinstance(value, dict):
        problems = _object_problems(schema, root, value, path, depth)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        items = resolve(schema["items"], root)
        for i, item in enumerate(value):
            problems += _problems(items, root, item, f"{where}[{i}]", depth + 1)
    return problems


def argument_problems(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> list[str]:
    """Where ``arguments`` do not fit the schema (types, required keys, enums, unknown keys), one
    line each; empty when they fit as far as this check sees (it does not check string formats,
    lengths or numeric bounds: the tool reports those itself)."""
    return _problems(resolve(schema, schema), schema, dict(arguments), "", 0)
