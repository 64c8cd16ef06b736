"""A fast, exact verdict on structured content for the output schemas most tools declare.

The ``mcp`` SDK checks a tool's structured content against its output schema with ``jsonschema``
(Draft 2020-12, no format assertion, references only within the schema). Even compiled, that
check walks a chain of validator objects per keyword and per level: on a small result it was the
largest single part of the pool's CPU per call. Most output schemas are generated (pydantic,
FastMCP) from a handful of keywords, whose meaning is simple: :func:`compile_check` turns such a
schema into nested plain functions that give the same verdict, and returns None for any schema
that uses anything else (then ``jsonschema`` decides, as before). The verdict is only valid or
not: an invalid result still goes to the SDK, which finds its error message.

Handled: boolean schemas; ``type`` (one or a list); ``properties``, ``required``,
``additionalProperties`` (without ``patternProperties``); ``items`` (without ``prefixItems``);
``anyOf``, ``allOf``, ``oneOf``; ``$ref`` to ``#/$defs/<name>`` of the same document (also
recursive); annotations that assert nothing (``title``, ``description``, ``default``,
``format`` ...) and vendor keywords (``x-...``). A ``$schema`` other than 2020-12 is not handled
(the SDK picks another draft's validator for it). ``tests/unit/mcp_pool_svc/test_pool_schema_check.py``
compares both verdicts on thousands of generated schemas and values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["Check", "compile_check"]

Check = Callable[[Any], bool]

# Keywords that assert nothing in Draft 2020-12 as the SDK's validator runs it (formats are
# annotations without a format checker; $defs matter only through $ref, handled below).
_ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "$comment",
        "deprecated",
        "readOnly",
        "writeOnly",
        "format",
        "contentMediaType",
        "contentEncoding",
        "contentSchema",
        "$defs",
        "definitions",
    }
)
_HANDLED = frozenset(
    {"type", "properties", "required", "additionalProperties", "items", "anyOf", "allOf", "oneOf", "$ref"}
)
_DRAFT_2020_12 = frozenset(
    {"https://json-schema.org/draft/2020-12/schema", "https://json-schema.org/draft/2020-12/schema#"}
)
_DEFS = "#/$defs/"


def _is_integer(value: Any) -> bool:
    # As jsonschema's Draft 6+ type checker: 1.0 is an integer; inf and nan are not.
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and value.is_integer()


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


_TYPES: dict[str, Check] = {
    "object": lambda value: isinstance(value, dict),
    "array": lambda value: isinstance(value, list),
    "string": lambda value: isinstance(value, str),
    "boolean": lambda value: isinstance(value, bool),
    "null": lambda value: value is None,
    "number": _is_number,
    "integer": _is_integer,
}


class _Unsupported(Exception):
    """The schema uses something this module does not handle."""


def compile_check(schema: Any) -> Check | None:
    """A function giving ``jsonschema``'s verdict (valid or not) on a value for ``schema``, a
    schema the SDK accepted (``check_schema`` passed); None when the schema uses anything not
    handled (see the module's doc)."""
    if not isinstance(schema, dict | bool):
        return None
    if isinstance(schema, dict) and "$schema" in schema and schema["$schema"] not in _DRAFT_2020_12:
        return None
    try:
        return _Compiler(schema).compile(schema, root=True)
    except _Unsupported:
        return None


class _Compiler:
    def __init__(self, root: Any) -> None:
        self._root = root
        self._defs: dict[str, Check] = {}

    def compile(self, schema: Any, *, root: bool = False) -> Check:
        if schema is True:
            return _accept
        if schema is False:
            return _refuse
        if not isinstance(schema, dict):
            raise _Unsupported
        for key in schema:
            if key in _HANDLED or key in _ANNOTATIONS or key.startswith("x-") or (root and key == "$schema"):
                continue
            raise _Unsupported
        checks: list[Check] = []
        if "type" in schema:
            checks.append(_type_check(schema["type"]))
        object_check = self._object_check(schema)
        if object_check is not None:
            checks.append(object_check)
        if "items" in schema:
            item = self.compile(schema["items"])
            checks.append(lambda value: not isinstance(value, list) or all(item(v) for v in value))
        checks += self._applicators(schema)
        if not checks:
            return _accept
        if len(checks) == 1:
            return checks[0]
        return lambda value: all(check(value) for check in checks)

    def _applicators(self, schema: dict[str, Any]) -> list[Check]:
        checks: list[Check] = []
        if "anyOf" in schema:
            options = [self.compile(s) for s in _subschemas(schema["anyOf"])]
            checks.append(lambda value: any(option(value) for option in options))
        if "allOf" in schema:
            parts = [self.compile(s) for s in _subschemas(schema["allOf"])]
            checks.append(lambda value: all(part(value) for part in parts))
        if "oneOf" in schema:
            choices = [self.compile(s) for s in _subschemas(schema["oneOf"])]
            checks.append(lambda value: sum(1 for choice in choices if choice(value)) == 1)
        if "$ref" in schema:
            checks.append(self._ref(schema["$ref"]))
        return checks

    def _object_check(self, schema: dict[str, Any]) -> Check | None:
        if not any(key in schema for key in ("properties", "required", "additionalProperties")):
            return None
        properties = {name: self.compile(sub) for name, sub in (schema.get("properties") or {}).items()}
        required = tuple(schema.get("required") or ())
        extra = self.compile(schema["additionalProperties"]) if "additionalProperties" in schema else None

        def check(value: Any) -> bool:
            if not isinstance(value, dict):
                return True
            for name in required:
                if name not in value:
                    return False
            for name, item in value.items():
                sub = properties.get(name)
                if sub is not None:
                    if not sub(item):
                        return False
                elif extra is not None and not extra(item):
                    return False
            return True

        return check

    def _ref(self, ref: Any) -> Check:
        """A reference to ``#/$defs/<name>`` of the root (compiled once, looked up when run, so a
        definition may refer to itself)."""
        if not isinstance(ref, str) or not ref.startswith(_DEFS):
            raise _Unsupported
        name = ref[len(_DEFS) :]
        if not name or any(c in name for c in "/~%#") or not isinstance(self._root, dict):
            raise _Unsupported
        defs = self._root.get("$defs")
        if not isinstance(defs, dict) or name not in defs:
            raise _Unsupported
        if name not in self._defs:
            self._defs[name] = _refuse  # a placeholder while it compiles (recursion)
            compiled = self.compile(defs[name])
            self._defs[name] = compiled
        table = self._defs

        def referred(value: Any) -> bool:
            return table[name](value)

        return referred


def _subschemas(value: Any) -> list[Any]:
    if not isinstance(value, list) or not value:
        raise _Unsupported
    return value


def _type_check(kind: Any) -> Check:
    names = [kind] if isinstance(kind, str) else kind
    if not isinstance(names, list) or not names or any(name not in _TYPES for name in names):
        raise _Unsupported
    checks = [_TYPES[name] for name in names]
    if len(checks) == 1:
        return checks[0]
    return lambda value: any(check(value) for check in checks)


def _accept(value: Any) -> bool:
    return True


def _refuse(value: Any) -> bool:
    return False
