"""The output-schema check of the pool's plain call (the kit's compiled yes-check,
``toolscout_kit.schema_check``, for the validator class the SDK picks) never says "fits" where
jsonschema, as the SDK runs it (``validator_for``, an empty registry), says not, on thousands of
generated output schemas and values, and says it for most values that fit."""

from __future__ import annotations

import random
from typing import Any

import pytest
from jsonschema.validators import validator_for
from referencing import Registry

from toolscout_kit.schema_check import compile_check

_TYPES = ["object", "array", "string", "boolean", "null", "number", "integer"]


def _sdk_validator(schema: Any) -> Any:
    """The validator the SDK compiles for an output schema (ClientSession._output_schema_validator)."""
    cls = validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, registry=Registry())


def _sdk_verdict(schema: Any, value: Any) -> bool:
    return bool(_sdk_validator(schema).is_valid(value))


def _schema(rng: random.Random, depth: int, defs: list[str], refs: bool = False) -> Any:
    """A schema of the handled keywords; ``refs``: it may refer to a definition (only below a
    property or an item, so that a reference always goes one level into the value)."""
    if depth <= 0 or rng.random() < 0.15:
        return rng.choice([True, False, {}, {"type": rng.choice(_TYPES)}])
    schema: dict[str, Any] = {}
    if rng.random() < 0.7:
        schema["type"] = rng.choice(_TYPES) if rng.random() < 0.7 else rng.sample(_TYPES, rng.randint(1, 3))
    if rng.random() < 0.5:
        names = rng.sample(["a", "b", "c", "result", "n"], rng.randint(0, 3))
        schema["properties"] = {name: _schema(rng, depth - 1, defs, True) for name in names}
    if rng.random() < 0.4:
        schema["required"] = rng.sample(["a", "b", "c", "result"], rng.randint(0, 2))
    if rng.random() < 0.3:
        schema["additionalProperties"] = rng.choice([True, False, _schema(rng, depth - 1, defs, True)])
    if rng.random() < 0.3:
        schema["items"] = _schema(rng, depth - 1, defs, True)
    for key in ("anyOf", "allOf", "oneOf"):
        if rng.random() < 0.12:
            schema[key] = [_schema(rng, depth - 1, defs, refs) for _ in range(rng.randint(1, 3))]
    if refs and defs and rng.random() < 0.3:
        schema["$ref"] = f"#/$defs/{rng.choice(defs)}"
    if rng.random() < 0.2:
        schema["title"] = "T"
    if rng.random() < 0.1:
        schema["format"] = "date-time"
    if rng.random() < 0.1:
        schema["x-vendor"] = {"anything": 1}
    return schema


def _value(rng: random.Random, depth: int) -> Any:
    scalars: list[Any] = [None, True, False, 0, 1, -3, 2**70, 0.5, -1.25, float("inf"), float("nan")]
    scalars += [1.0, 0.0, -2.0, "", "x", "2024-01-01T00:00:00Z"]
    kind = rng.random() if depth > 0 else 0.0
    if kind > 0.8:
        return [_value(rng, depth - 1) for _ in range(rng.randint(0, 3))]
    if kind > 0.6:
        names = rng.sample(["a", "b", "c", "result", "n", "zz"], rng.randint(0, 4))
        return {name: _value(rng, depth - 1) for name in names}
    return rng.choice(scalars)


@pytest.mark.parametrize("seed", range(8))
def test_the_compiled_check_agrees_with_jsonschema_on_generated_schemas_and_values(seed: int) -> None:
    _compare(random.Random(seed))  # noqa: S311  # reproducible test data, not secrets


def _compare(rng: random.Random) -> None:
    compared = decided = 0
    for _ in range(150):
        defs = ["A", "B"] if rng.random() < 0.4 else []
        schema = _schema(rng, 3, defs)
        if not isinstance(schema, dict):
            schema = {"anyOf": [schema]}
        if defs:
            # Definitions that may refer to each other and to themselves (recursion).
            schema["$defs"] = {name: _schema(rng, 2, defs) for name in defs}
        if rng.random() < 0.2:
            schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
        validator = _sdk_validator(schema)
        fits = compile_check(schema, type(validator))
        if fits is None:
            continue
        for _ in range(25):
            value = _value(rng, 3)
            valid = bool(validator.is_valid(value))
            if fits(value):
                assert valid, (schema, value)
            decided += valid and fits(value)
            compared += 1
    assert compared > 1500
    assert decided > compared // 10


def test_what_the_generated_schemas_would_miss_checks_as_the_sdk_does() -> None:
    schema = {
        "type": "object",
        "properties": {
            "result": {"type": "string"},
            "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}},
        },
        "required": ["result"],
        "additionalProperties": False,
        "$defs": {"Item": {"type": "object", "properties": {"child": {"type": "object"}}, "required": []}},
        "x-fastmcp-wrap-result": True,
    }
    validator = _sdk_validator(schema)
    fits = compile_check(schema, type(validator))
    assert fits is not None
    for value in (
        {"result": "x"},
        {"result": 1},
        {},
        {"result": "x", "other": 1},
        {"result": "x", "items": [{"child": {"child": 1}}]},
        {"result": "x", "items": [{"child": 3}]},
        [],
        "text",
    ):
        assert fits(value) == _sdk_verdict(schema, value), value
