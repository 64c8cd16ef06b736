"""Booleans in the config are JSON true/false (or the "true"/"false" a ${VAR} expands to); "yes",
1 or "on" are mistakes reported at load, not read as true. Toolset filters are stricter still."""

from __future__ import annotations

from typing import Any

import pytest

from toolscout_kit.config import parse_config
from toolscout_kit.errors import ConfigError


def server(**extra: Any) -> dict[str, Any]:
    return {"servers": {"a": {"command": "x", **extra}}}


@pytest.mark.parametrize("value", ["yes", "on", 1, 0, "1", None])
def test_a_server_flag_that_is_not_a_boolean_is_an_error(value: object) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(server(defer_loading=value), source="c.json")
    assert err.value.message == f"c.json: servers.a.defer_loading: expected true or false, not {value!r}"


@pytest.mark.parametrize(
    ("value", "expected"), [(True, True), (False, False), ("true", True), ("False", False)]
)
def test_booleans_and_what_a_variable_expands_to_are_accepted(value: object, expected: bool) -> None:
    assert parse_config(server(serialize_writes=value)).servers["a"].serialize_writes is expected


def test_a_variable_can_set_a_flag() -> None:
    config = parse_config(
        {**server(defer_loading="${DEFER:-true}"), "tool_discovery": {"enabled": "${ON}"}},
        env={"ON": "true"},
    )
    assert config.servers["a"].defer_loading is True
    assert config.tool_discovery.enabled is True


@pytest.mark.parametrize(
    ("section", "key"),
    [("tool_discovery", "enabled"), ("tool_discovery", "defer_all")],
)
def test_discovery_switches_are_strict_too(section: str, key: str) -> None:
    with pytest.raises(ConfigError, match=f"{section}.{key}: expected true or false, not 'yes'"):
        parse_config({section: {key: "yes"}})


@pytest.mark.parametrize("value", ["yes", "true", 1, None])
def test_a_toolset_filter_takes_only_json_booleans(value: object) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({**server(), "tool_sets": {"t": {"servers": {"a": value}}}}, source="c.json")
    assert err.value.message == (
        'c.json: tool_sets.t.servers.a: expected true, false, a list of tool names or {"exclude": [...]}'
    )


def test_the_embedder_breaker_settings_have_safe_defaults_and_bounds() -> None:
    embedder = parse_config({}).toolscout.search.embedder
    assert (embedder.breaker_failures, embedder.breaker_probe_interval) == (3, 2.0)
    with pytest.raises(ConfigError, match="breaker_failures"):
        parse_config({"toolscout": {"search": {"embedder": {"type": "local", "breaker_failures": 0}}}})
