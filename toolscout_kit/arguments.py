"""A tool's input schema for people and LLMs: the argument tree, example arguments, and whether
given arguments fit (validated with ``jsonschema``), with the expected shape when they do not.

``toolscout describe`` prints the tree and the example; ``call_tool`` (the MCP gateway and the
orchestrator's ``deferral: stable``, through :mod:`toolscout_kit.call_tool`) and the CLI after a
failed ``call`` answer arguments that do not fit with the same shape, so a person and a model read
the same thing. What is wrong is decided from each ``ValidationError``'s fields (``validator``,
``validator_value``, ``absolute_path``, ``context``), never by its English message, which is
only shown as is for keywords without a sentence of our own (``minimum``, ``pattern``, ...).

MCP servers send JSON Schema as their SDK generates it: pydantic puts nested models under ``$defs``
and points at them with ``$ref``, optional values are ``anyOf [X, null]``. The tree and the example
follow local references (``#/...``) and stop at a fixed depth, so a recursive schema cannot loop.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

import jsonschema
import referencing.exceptions
from jsonschema.exceptions import SchemaError, ValidationError

from toolscout_kit.schema_check import Check, compile_check

__all__ = [
    "argument_problems",
    "argument_tree",
    "example_arguments",
    "expected_shape",
    "resolve",
    "schema_text_problems",
]

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


# --- what is wrong with a value (jsonschema) ------------------------------------------------


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


@functools.lru_cache(maxsize=4096)
def _validator(schema_json: str) -> Any:
    """A compiled validator for the schema (by its canonical JSON), or None when the schema itself
    is not valid JSON Schema: then the tool is left to judge its arguments."""
    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError:
        return None
    return cls(schema)


def _path(error: ValidationError) -> str:
    out = ""
    for part in error.absolute_path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _type_names(schema: Any) -> list[str]:
    kind = schema.get("type") if isinstance(schema, Mapping) else None
    if isinstance(kind, list):
        return [str(k) for k in kind]
    return [kind] if isinstance(kind, str) else []


def _variants_line(error: ValidationError, schema: Mapping[str, Any], where: str) -> list[str]:
    variants = error.validator_value if isinstance(error.validator_value, list) else []
    # Every variant failed on its type alone (``anyOf [string, null]``): one line naming them all.
    if all(e.validator == "type" and not e.relative_path for e in error.context):
        names = [n for v in variants for n in _type_names(resolve(v, schema))]
        if names:
            return [f"{where}: expected {'|'.join(dict.fromkeys(names))}, got {_kind_of(error.instance)}"]
    return _describe(jsonschema.exceptions.best_match(error.context), schema)


def _describe(error: ValidationError, schema: Mapping[str, Any]) -> list[str]:
    where = _path(error) or "arguments"
    prefix = f"{_path(error)}." if error.absolute_path else ""
    kind = error.validator
    lines = [f"{where}: {error.message}"]
    if kind == "required" and isinstance(error.instance, Mapping):
        # jsonschema raises one error per missing name without naming it in a field: every missing
        # name comes from the keyword's own list (argument_problems drops the repeats).
        names = error.validator_value if isinstance(error.validator_value, list) else []
        lines = [f"{prefix}{name}: required" for name in names if name not in error.instance]
    elif kind == "type":
        wanted = "|".join(_type_names(error.schema)) or str(error.validator_value)
        lines = [f"{where}: expected {wanted}, got {_kind_of(error.instance)}"]
    elif kind == "enum":
        values = error.validator_value if isinstance(error.validator_value, list) else []
        choices = " | ".join(json.dumps(v, ensure_ascii=False) for v in values)
        lines = [f"{where}: expected one of {choices}, got {json.dumps(error.instance, ensure_ascii=False)}"]
    elif kind == "additionalProperties" and isinstance(error.instance, Mapping):
        props = error.schema.get("properties") if isinstance(error.schema, Mapping) else None
        known = list(props) if isinstance(props, Mapping) else []
        listed = ", ".join(known) or "none"
        lines = [
            f"{prefix}{name}: not an argument of this tool (arguments: {listed})"
            for name in error.instance
            if name not in known
        ]
    elif kind in ("anyOf", "oneOf") and error.context:
        lines = _variants_line(error, schema, where)
    return lines


def _ordered(errors: Iterable[ValidationError]) -> list[ValidationError]:
    # Missing arguments first (what a caller most often forgot), then by where in the arguments.
    return sorted(errors, key=lambda e: (e.validator != "required", [str(p) for p in e.absolute_path]))


def argument_problems(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> list[str]:
    """Where ``arguments`` do not fit the schema, one line each (``location: required``, ``days:
    expected integer, got string``); empty when they fit. String formats are not checked (the tool
    judges those), and a schema that is not valid JSON Schema (or refers outside itself) checks
    nothing: the tool then answers for itself."""
    canonical = json.dumps(schema, sort_keys=True, ensure_ascii=False)
    return _problems(_validator(canonical), schema, arguments, _check(canonical))


@functools.lru_cache(maxsize=4096)
def _check(schema_json: str) -> Check | None:
    """The compiled yes-check of a schema (by its canonical JSON), when it has one."""
    validator = _validator(schema_json)
    return compile_check(json.loads(schema_json), type(validator)) if validator is not None else None


@functools.lru_cache(maxsize=4096)
def _compiled(schema_json: str) -> tuple[Any, dict[str, Any], Check | None]:
    """The validator, the schema and its compiled yes-check (:mod:`toolscout_kit.schema_check`)
    of a schema written as JSON object text (not an object: ``{}``)."""
    try:
        parsed = json.loads(schema_json) if schema_json else {}
    except ValueError:
        parsed = {}
    schema: dict[str, Any] = parsed if isinstance(parsed, dict) else {}
    canonical = json.dumps(schema, sort_keys=True, ensure_ascii=False)
    return _validator(canonical), schema, _check(canonical)


def schema_text_problems(schema_json: str, arguments: Mapping[str, Any]) -> list[str]:
    """:func:`argument_problems` for a schema as a tool definition carries it (JSON object text):
    each text is parsed and compiled once, not on every call (a call's hot path)."""
    validator, schema, check = _compiled(schema_json)
    return _problems(validator, schema, arguments, check)


def _problems(
    validator: Any, schema: Mapping[str, Any], arguments: Mapping[str, Any], check: Check | None
) -> list[str]:
    """The problems of ``arguments``: none when the compiled check says they surely fit, else
    jsonschema's (whose verdict stands: the check only ever says yes)."""
    if validator is None:
        return []
    instance = dict(arguments)
    try:
        if check is not None and check(instance):
            return []
        errors = _ordered(validator.iter_errors(instance))
    except (referencing.exceptions.Unresolvable, RecursionError):
        return []
    return list(dict.fromkeys(line for error in errors for line in _describe(error, schema)))


def expected_shape(name: str, schema: Mapping[str, Any], problems: Iterable[str]) -> str:
    """What a caller reads when its arguments do not fit: the problems, every argument of the tool
    (as ``toolscout describe`` prints them) and example arguments."""
    lines = [f"The arguments do not fit what {name} takes:"]
    lines += [f"  {problem}" for problem in problems]
    tree = argument_tree(schema)
    lines.append("Expected arguments:" if tree else "Expected arguments: none")
    lines += tree
    example = json.dumps(example_arguments(schema), ensure_ascii=False)
    lines.append(f"Example arguments: {example}")
    return "\n".join(lines)
