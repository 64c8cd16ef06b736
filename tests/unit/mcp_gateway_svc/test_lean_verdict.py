"""The lean path judges a ``tools/call``'s parameters as the SDK does
(:func:`mcp_gateway_svc.lean_rules.accepted` against :func:`mcp_types.methods.validate_client_request`),
deciding plain parameters itself: the verdicts are compared on many inputs of every era."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from mcp_types import methods as spec_methods
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from mcp_gateway_svc.lean_rules import _surely_valid, accepted

_ABSENT = object()
NAMES = ("echo", "", 1, 1.5, None, True, [], {}, _ABSENT)
ARGUMENTS = (_ABSENT, None, {}, {"a": 1, "b": [None]}, [], "x", 1, False)
VERSIONS = ("2026-07-28", "2025-11-25", "", 3, None, _ABSENT)
CAPABILITIES = (
    {},
    {"sampling": {}},
    {"sampling": 1},
    {"roots": {"listChanged": True}},
    {"elicitation": "bad"},
    {"experimental": {"x": {"y": 1}}},
    {"extensions": []},
    {"other": 1},
    None,
    [],
    _ABSENT,
)
INFOS = (
    _ABSENT,
    None,
    {"name": "host", "version": "1"},
    {"name": "host"},
    {"name": 1, "version": "1"},
    {"name": "host", "version": "1", "title": None, "description": "d", "websiteUrl": "https://x"},
    {"name": "host", "version": "1", "title": 3},
    {"name": "host", "version": "1", "icons": []},
    {"name": "host", "version": "1", "icons": [{"src": 1}]},
    {"name": "host", "version": "1", "icons": None},
    {"name": "host", "version": "1", "website_url": 5, "extra": [1]},
    "host",
)
EXTRAS = (
    {},
    {"progressToken": 1},
    {"progressToken": [1]},
    {"io.modelcontextprotocol/logLevel": "info"},
    {"io.modelcontextprotocol/logLevel": "loud"},
    {"other": None, "toolscout/timeoutSeconds": 2},
)
LEGACY_METAS = (
    _ABSENT,
    None,
    {},
    {"progressToken": "t"},
    {"progressToken": 1.5},
    {"progress_token": []},
    [],
    "m",
    1,
)


def _set(target: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    if value is not _ABSENT:
        target[key] = value
    return target


def _modern_metas() -> list[Any]:
    metas: list[Any] = [None, [], "meta", _ABSENT]
    for version, caps, info, extra in itertools.product(VERSIONS, CAPABILITIES, INFOS, EXTRAS):
        meta = _set({}, "io.modelcontextprotocol/protocolVersion", version)
        _set(meta, "io.modelcontextprotocol/clientCapabilities", caps)
        _set(meta, "io.modelcontextprotocol/clientInfo", info)
        metas.append(meta | extra)
    return metas


def _params(metas: list[Any]) -> list[dict[str, Any]]:
    out = [_set({"name": "echo", "arguments": {"x": 1}}, "_meta", meta) for meta in metas]
    for name, arguments, meta in itertools.product(NAMES, ARGUMENTS, metas[-8:] + metas[:4]):
        out.append(_set(_set(_set({}, "name", name), "arguments", arguments), "_meta", meta))
    out.append({"name": "echo", "task": {"ttl": 1}})
    out.append({"name": "echo", "requestState": "s"})
    return out


def _sdk(version: str, params: dict[str, Any]) -> bool:
    try:
        spec_methods.validate_client_request("tools/call", version, params)
    except (ValidationError, KeyError):
        return False
    return True


@pytest.mark.parametrize("version", [*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS])
def test_the_lean_paths_verdict_on_a_calls_parameters_is_the_sdks(version: str) -> None:
    modern = version in MODERN_PROTOCOL_VERSIONS
    inputs = _params(_modern_metas() if modern else list(LEGACY_METAS))
    decided_here = 0
    for params in inputs:
        assert accepted(version, params) == _sdk(version, params), params
        decided_here += _surely_valid(version, params)
    # the plain shapes are decided here (so the comparison covers the cheap path too)
    assert decided_here > (50 if modern else 5)


def test_a_plain_call_of_either_era_is_decided_without_the_sdk() -> None:
    envelope = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "host", "version": "1"},
    }
    assert _surely_valid("2026-07-28", {"name": "echo", "arguments": {"a": 1}, "_meta": envelope})
    assert _surely_valid("2025-11-25", {"name": "echo", "arguments": {"a": 1}})
    assert not _surely_valid("2025-11-25", {"name": "echo", "arguments": {"a": 1}, "task": {}})
