"""The compiled yes-check of argument schemas (:mod:`toolscout_kit.schema_check`) says "fits" only
where jsonschema does, on many schemas as MCP servers write them and many arguments; a schema
with a keyword it does not compile gets no check (jsonschema alone judges)."""

from __future__ import annotations

import itertools
import json
import random
from typing import Any

import jsonschema
import pytest

from toolscout_kit.arguments import argument_problems, schema_text_problems
from toolscout_kit.schema_check import compile_check

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string", "minLength": 1}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name"],
}
SCHEMAS: list[dict[str, Any]] = [
    {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "e.g. Paris", "maxLength": 8, "pattern": "^[A-Z]"},
            "days": {"type": "integer", "minimum": 1, "maximum": 7, "default": 3},
            "units": {"type": "string", "enum": ["c", "f"]},
            "when": {"type": "string", "format": "date"},
        },
        "required": ["city"],
        "additionalProperties": False,
    },
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
            "limit": {"anyOf": [{"type": "integer", "exclusiveMinimum": 0}, {"type": "null"}]},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
            "ratio": {"type": ["number", "null"], "exclusiveMaximum": 1},
        },
    },
    {
        "type": "object",
        "$defs": {"Person": PERSON},
        "properties": {
            "owner": {"$ref": "#/$defs/Person"},
            "people": {"type": "array", "items": {"$ref": "#/$defs/Person"}},
        },
        "required": ["owner"],
        "additionalProperties": {"type": "number"},
    },
    {
        "type": "object",
        "properties": {"flag": {"type": "boolean"}, "any": True, "never": False, "n": {"type": "number"}},
        "allOf": [{"required": ["flag"]}, {"properties": {"n": {"minimum": -1.5}}}],
        "nullable": True,
        "x-extra": {"type": "nothing"},
    },
    {"type": "object", "properties": {"mode": {"enum": ["a", 1, None, True]}}},
    {},
    {"type": "object"},
    # not compiled: jsonschema alone
    {"type": "object", "properties": {"x": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}},
    {"type": "object", "properties": {"x": {"const": 1}}},
    {"type": "object", "patternProperties": {"^a": {"type": "string"}}, "additionalProperties": False},
    {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "object",
        "properties": {"n": {"type": "integer"}},
    },
    {
        "type": "object",
        "$defs": {"Node": {"properties": {"next": {"$ref": "#/$defs/Node"}}}},
        "$ref": "#/$defs/Node",
    },
    {"type": "object", "properties": {"x": {"$id": "http://x/", "type": "string"}}},
    {"type": "object", "properties": {"x": {"type": "string"}}, "unevaluatedProperties": False},
]
NOT_COMPILED = 7

VALUES: tuple[Any, ...] = (
    None,
    True,
    False,
    0,
    1,
    -3,
    7,
    8,
    2.0,
    0.5,
    1.0,
    -1.5,
    -2.0,
    "",
    "a",
    "Paris",
    "paris",
    "Copenhagen",
    "c",
    "f",
    "2026-01-31",
    [],
    ["x"],
    ["x", "y", "z", "w"],
    [1],
    {},
    {"name": "ann"},
    {"name": "", "age": 3},
    {"name": "bo", "age": -1},
    {"name": "cy", "age": 2.0},
)
KEYS = (
    "text",
    "city",
    "days",
    "units",
    "when",
    "limit",
    "tags",
    "ratio",
    "owner",
    "people",
    "flag",
    "n",
    "any",
)


def _instances(rng: random.Random) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{}]
    for key, value in itertools.product(KEYS, VALUES):
        out.append({key: value})
    for _ in range(600):
        out.append({key: rng.choice(VALUES) for key in rng.sample(KEYS, rng.randint(1, 5))})
    return out


def _validator(schema: dict[str, Any]) -> Any:
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema)


def test_the_check_says_fits_only_where_jsonschema_does_and_often() -> None:
    rng = random.Random(36)  # noqa: S311  # reproducible test data, not secrets
    instances = _instances(rng)
    compiled = 0
    for schema in SCHEMAS:
        validator = _validator(schema)
        check = compile_check(schema, type(validator))
        if check is None:
            continue
        compiled += 1
        sure = 0
        for instance in instances:
            if check(instance):
                sure += 1
                assert validator.is_valid(instance), (schema, instance)
        valid = sum(validator.is_valid(instance) for instance in instances)
        # a check that says "not sure" to everything would pass the line above: it must not
        assert sure >= valid * 0.8, schema
    assert compiled == len(SCHEMAS) - NOT_COMPILED


@pytest.mark.parametrize("schema", SCHEMAS[-NOT_COMPILED:])
def test_a_schema_with_keywords_not_compiled_gets_no_check(schema: dict[str, Any]) -> None:
    assert compile_check(schema, type(_validator(schema))) is None


def test_argument_problems_are_jsonschemas_with_the_check_in_front() -> None:
    schema = SCHEMAS[1]
    text = json.dumps(schema)
    assert schema_text_problems(text, {"city": "Paris", "days": 3}) == []
    assert schema_text_problems(text, {"city": "paris", "days": 9, "x": 1}) == [
        "x: not an argument of this tool (arguments: city, days, units, when)",
        "city: 'paris' does not match '^[A-Z]'",
        "days: 9 is greater than the maximum of 7",
    ]
    assert argument_problems(schema, {"days": "3"}) == [
        "city: required",
        "days: expected integer, got string",
    ]
