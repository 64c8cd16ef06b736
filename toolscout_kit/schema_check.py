"""A compiled yes-check of the argument schemas tools commonly declare, for a call's hot path.

``jsonschema`` walks a schema anew for every instance (a validator per subschema it descends
into): 10-15 µs for a small object schema on every call. Most tools declare an object of typed
properties, as pydantic and zod write them (``type``, ``properties``, ``required``,
``additionalProperties``, string ``enum``, ``anyOf`` with ``null``, ``items``, bounds, ``pattern``,
local ``$ref``); :func:`compile_check` turns such a schema, once, into a predicate that says in a
microsecond or two that arguments surely fit. It never says that they do not: False means "not
sure", and ``jsonschema`` then judges (and explains) as before
(:func:`toolscout_kit.arguments.schema_text_problems`), so the verdict is always ``jsonschema``'s.
Each keyword is checked as ``jsonschema`` checks it (only on instances of its type, with the same
type rules); a schema with any keyword the validator acts on that is not compiled here gets no
predicate at all.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Callable, Mapping
from typing import Any

import jsonschema

__all__ = ["Check", "compile_check"]

Check = Callable[[Any], bool]

# Dialects whose keywords below mean the same (draft 6 on: integers include 1.0, numeric
# exclusive bounds).
_DIALECTS = (
    jsonschema.Draft6Validator,
    jsonschema.Draft7Validator,
    jsonschema.Draft201909Validator,
    jsonschema.Draft202012Validator,
)
# Keywords that change how references resolve: a schema with them is left to jsonschema.
_UNSUPPORTED = frozenset({"$id", "id", "$anchor", "$dynamicAnchor", "$recursiveAnchor"})
_MAX_REFS = 64


class _Unsupported(Exception):
    """The schema uses something not compiled here."""


def _number(value: Any) -> bool:
    return isinstance(value, numbers.Number) and not isinstance(value, bool)


def _integer(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


# jsonschema's type checker of draft 6 on.
_TYPES: dict[str, Check] = {
    "array": lambda v: isinstance(v, list),
    "boolean": lambda v: isinstance(v, bool),
    "integer": _integer,
    "null": lambda v: v is None,
    "number": _number,
    "object": lambda v: isinstance(v, dict),
    "string": lambda v: isinstance(v, str),
}


def compile_check(schema: Any, validator_type: type[Any]) -> Check | None:
    """A predicate true only for instances ``validator_type(schema)`` finds valid (validated
    without a format checker, as :mod:`toolscout_kit.arguments` builds it); None when the schema
    uses anything not compiled here."""
    if validator_type not in _DIALECTS:
        return None
    try:
        return _Compiler(schema, frozenset(validator_type.VALIDATORS)).node(schema)
    except (_Unsupported, RecursionError):
        return None


def _all(checks: list[Check]) -> Check:
    if not checks:
        return lambda v: True
    if len(checks) == 1:
        return checks[0]
    return lambda v: all(check(v) for check in checks)


def _bound(value: Any) -> Any:
    if not _number(value):
        raise _Unsupported
    return value


class _Compiler:
    def __init__(self, root: Any, keywords: frozenset[str]) -> None:
        self._root = root
        self._keywords = keywords
        self._refs: list[str] = []

    def node(self, schema: Any) -> Check:
        if schema is True:
            return lambda v: True
        if schema is False:
            return lambda v: False
        if not isinstance(schema, Mapping):
            raise _Unsupported
        checks: list[Check] = []
        for keyword, value in schema.items():
            if keyword in _UNSUPPORTED:
                raise _Unsupported
            if keyword == "format" or keyword not in self._keywords:
                continue  # an annotation (no format checker), or a keyword the validator ignores
            compile_keyword = _KEYWORDS.get(keyword)
            if compile_keyword is None:
                raise _Unsupported
            checks.append(compile_keyword(self, value, schema))
        return _all(checks)

    def ref(self, value: Any) -> Check:
        if not isinstance(value, str) or not value.startswith("#/") or "%" in value:
            raise _Unsupported
        if value in self._refs or len(self._refs) > _MAX_REFS:
            raise _Unsupported  # recursive: jsonschema's
        node: Any = self._root
        for raw in value[2:].split("/"):
            key = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, list) and key.isdigit() and int(key) < len(node):
                node = node[int(key)]
            elif isinstance(node, Mapping) and key in node:
                node = node[key]
            else:
                raise _Unsupported
        self._refs.append(value)
        try:
            return self.node(node)
        finally:
            self._refs.pop()


def _type(c: _Compiler, value: Any, schema: Any) -> Check:
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not names or any(n not in _TYPES for n in names):
        raise _Unsupported
    checks = [_TYPES[n] for n in names]
    return checks[0] if len(checks) == 1 else (lambda v: any(check(v) for check in checks))


def _properties(c: _Compiler, value: Any, schema: Any) -> Check:
    if not isinstance(value, Mapping):
        raise _Unsupported
    props = {name: c.node(sub) for name, sub in value.items()}

    def check(v: Any) -> bool:
        if not isinstance(v, dict):
            return True
        return all(prop(v[name]) for name, prop in props.items() if name in v)

    return check


def _required(c: _Compiler, value: Any, schema: Any) -> Check:
    if not isinstance(value, list) or any(not isinstance(name, str) for name in value):
        raise _Unsupported
    names = tuple(value)
    return lambda v: not isinstance(v, dict) or all(name in v for name in names)


def _additional(c: _Compiler, value: Any, schema: Any) -> Check:
    if "patternProperties" in schema:
        raise _Unsupported
    props = schema.get("properties", {})
    known = frozenset(props) if isinstance(props, Mapping) else frozenset()
    extra = c.node(value)

    def check(v: Any) -> bool:
        if not isinstance(v, dict):
            return True
        return all(extra(item) for name, item in v.items() if name not in known)

    return check


def _enum(c: _Compiler, value: Any, schema: Any) -> Check:
    if not isinstance(value, list):
        raise _Unsupported
    # Strings only: equal to a string member is jsonschema's equal; anything else is not sure.
    strings = frozenset(member for member in value if isinstance(member, str))
    return lambda v: isinstance(v, str) and v in strings


def _size(of: type[str] | type[list[Any]], least: bool) -> Callable[[_Compiler, Any, Any], Check]:
    """``minLength``/``maxLength`` (``of`` str) and ``minItems``/``maxItems`` (list): a bound on
    ``len`` of the instances of ``of``."""

    def compile_size(c: _Compiler, value: Any, schema: Any) -> Check:
        bound = _bound(value)
        if least:
            return lambda v: not isinstance(v, of) or not len(v) < bound
        return lambda v: not isinstance(v, of) or not len(v) > bound

    return compile_size


def _limit(compare: Callable[[Any, Any], bool]) -> Callable[[_Compiler, Any, Any], Check]:
    """A numeric bound: ``compare(instance, bound)`` true is a failure, as jsonschema words it."""

    def compile_limit(c: _Compiler, value: Any, schema: Any) -> Check:
        bound = _bound(value)
        return lambda v: not _number(v) or not compare(v, bound)

    return compile_limit


def _pattern(c: _Compiler, value: Any, schema: Any) -> Check:
    if not isinstance(value, str):
        raise _Unsupported
    try:
        search = re.compile(value).search
    except re.error:
        raise _Unsupported from None
    return lambda v: not isinstance(v, str) or search(v) is not None


def _items(c: _Compiler, value: Any, schema: Any) -> Check:
    if "prefixItems" in schema or isinstance(value, list):
        raise _Unsupported
    item = c.node(value)
    return lambda v: not isinstance(v, list) or all(item(x) for x in v)


def _any_of(c: _Compiler, value: Any, schema: Any) -> Check:
    if not isinstance(value, list) or not value:
        raise _Unsupported
    branches = [c.node(sub) for sub in value]
    return lambda v: any(branch(v) for branch in branches)


def _all_of(c: _Compiler, value: Any, schema: Any) -> Check:
    if not isinstance(value, list) or not value:
        raise _Unsupported
    return _all([c.node(sub) for sub in value])


_KEYWORDS: dict[str, Callable[[_Compiler, Any, Any], Check]] = {
    "type": _type,
    "properties": _properties,
    "required": _required,
    "additionalProperties": _additional,
    "enum": _enum,
    "minLength": _size(str, least=True),
    "maxLength": _size(str, least=False),
    "minItems": _size(list, least=True),
    "maxItems": _size(list, least=False),
    "minimum": _limit(lambda v, b: v < b),
    "maximum": _limit(lambda v, b: v > b),
    "exclusiveMinimum": _limit(lambda v, b: v <= b),
    "exclusiveMaximum": _limit(lambda v, b: v >= b),
    "pattern": _pattern,
    "items": _items,
    "anyOf": _any_of,
    "allOf": _all_of,
    "$ref": lambda c, value, schema: c.ref(value),
}
