"""The SDK's rules for a lean ``tools/call`` (:mod:`mcp_gateway_svc.lean`), each in one pass.

The verdict on the call's parameters is :func:`mcp_types.methods.validate_client_request`'s:
plain parameters (a string ``name``, ``arguments`` an object, the era's ``_meta`` without members
the surface models check further) are judged by a dozen type checks (:func:`accepted`), anything
else by the SDK. The answer is the SDK runner's: the result's per-version sieve (the surface
models' validate and dump, :func:`mcp_types.methods.serialize_server_result`), then the
2026-07-28 ``resultType`` and ``serverInfo`` stamps (:func:`wire_result`); a pool's plain result
(text blocks, ``structuredContent`` and ``_meta`` objects of values JSON keeps as they are) is
written in that form directly, without the MCP models built and dumped twice
(:func:`pool_result_wire`: the sieve keeps such a result as it is). The tests compare both rules
with the SDK's on many inputs of every protocol version.
"""

from __future__ import annotations

import json
import math
import weakref
from collections.abc import Mapping
from typing import Any

import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    CORE_RESULT_TYPES,
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
)
from mcp_types import methods as spec_methods
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ValidationError
from toolscout.client import CallToolResult

from mcp_gateway_svc.calls import mcp_result

__all__ = ["METHOD", "PLAIN_PARAMS", "accepted", "pool_result_wire", "wire_result"]

METHOD = "tools/call"
# The parameters a plain call carries; a task, an input_required round's answers or state go the
# SDK's way.
PLAIN_PARAMS = frozenset({"name", "arguments", "_meta"})

# What a tools/call's parameters may declare that the surface models check further: 2026-07-28
# client capabilities and client info members (others are ignored; by alias only).
_CHECKED_CAPABILITIES = frozenset({"elicitation", "experimental", "extensions", "roots", "sampling"})
_INFO_TEXTS = ("description", "title", "websiteUrl")


def accepted(version: str, params: Mapping[str, Any]) -> bool:
    """Whether the SDK accepts ``params`` of a ``tools/call`` at ``version``
    (:func:`mcp_types.methods.validate_client_request`'s verdict): plain parameters are judged
    here (a dozen type checks where the models' validation took 6-9 µs), anything else by the
    SDK. The tests compare both verdicts on many inputs."""
    if _surely_valid(version, params):
        return True
    try:
        spec_methods.validate_client_request(METHOD, version, params)
    except (ValidationError, KeyError):
        return False
    return True


def _surely_valid(version: str, params: Mapping[str, Any]) -> bool:
    """True for parameters the surface model of ``version`` surely accepts: a string ``name``,
    ``arguments`` an object or null, and a ``_meta`` as the era wants it without the members
    whose values it checks further (2026-07-28: no declared capability, a plain client info).
    False: not sure (the SDK judges)."""
    if (
        not params.keys() <= PLAIN_PARAMS
        or type(params.get("name")) is not str
        or type(params.get("arguments", {})) not in (dict, type(None))
    ):
        return False
    meta = params.get("_meta")
    if version in HANDSHAKE_PROTOCOL_VERSIONS:
        return meta is None or (type(meta) is dict and "progressToken" not in meta)
    if version not in MODERN_PROTOCOL_VERSIONS or type(meta) is not dict:
        return False
    capabilities = meta.get(CLIENT_CAPABILITIES_META_KEY)
    info = meta.get(CLIENT_INFO_META_KEY)
    return (
        type(meta.get(PROTOCOL_VERSION_META_KEY)) is str
        and type(capabilities) is dict
        and capabilities.keys().isdisjoint(_CHECKED_CAPABILITIES)
        and "progressToken" not in meta
        and types.LOG_LEVEL_META_KEY not in meta
        and (info is None or _plain_info(info))
    )


def _plain_info(info: Any) -> bool:
    """A client info the 2026-07-28 ``Implementation`` surely accepts (no icons to check)."""
    return (
        type(info) is dict
        and type(info.get("name")) is str
        and type(info.get("version")) is str
        and info.get("icons") is None
        and all(type(info.get(key)) in (str, type(None)) for key in _INFO_TEXTS)
    )


def wire_result(server: Server[Any], version: str, result: BaseModel) -> dict[str, Any]:
    """A handler's ``tools/call`` result in its wire form, as the SDK's runner shapes it (the
    per-version sieve, then the 2026-07-28 ``resultType`` and ``serverInfo`` stamps)."""
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    modern = version in MODERN_PROTOCOL_VERSIONS
    result_type = dumped.get("resultType")
    if not modern or not isinstance(result_type, str) or result_type in CORE_RESULT_TYPES:
        dumped = spec_methods.serialize_server_result(METHOD, version, dumped)
    if not modern:
        return dumped
    if dumped.get("resultType") is None:
        dumped["resultType"] = "complete"
    meta = dumped.get("_meta")
    if meta is None:
        dumped["_meta"] = {SERVER_INFO_META_KEY: server.server_info_stamp}
    elif isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None:
        dumped["_meta"] = {**meta, SERVER_INFO_META_KEY: server.server_info_stamp}
    return dumped


def pool_result_wire(server: Server[Any], version: str, result: CallToolResult | BaseModel) -> dict[str, Any]:
    """A lean call's result in its wire form: what :func:`wire_result` gives for its MCP form
    (:func:`~mcp_gateway_svc.calls.mcp_result` of a pool's result), written directly for a plain
    result of the MCP server (:func:`_plain_wire`). The dict is serialized at once and not kept."""
    if isinstance(result, CallToolResult):
        wire = _plain_wire(server, version in MODERN_PROTOCOL_VERSIONS, result)
        if wire is not None:
            return wire
        result = mcp_result(result)
    return wire_result(server, version, result)


class _Unsure(ValueError):
    """A value the SDK's dump writes otherwise than JSON reads it (a non-finite number)."""


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400: the dump writes null
        raise _Unsure(text)
    return value


def _constant(text: str) -> Any:
    raise _Unsure(text)  # NaN, Infinity: the dump writes null


# JSON as json.loads reads it, refusing what the SDK's dump would write otherwise (one decoder:
# json.loads with hooks builds one per call).
_DECODER = json.JSONDecoder(parse_float=_finite, parse_constant=_constant)


def _object(text: str) -> dict[str, Any] | None:
    """The JSON object in ``text`` as :func:`~toolscout.client.types.parse_json_object` reads it;
    None when that is not an object, or holds a value the SDK's dump would change."""
    try:
        value = _DECODER.decode(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


# A plain text block of the pool (the MCP server's block had nothing but its text).
_PLAIN_TEXT = ("", '{"type":"text"}')
# The ``_meta`` member the 2026-07-28 result declares, by its name (by its alias: below).
_DECLARED_BY_NAME = "io_modelcontextprotocol_server_info"
_STAMPS: weakref.WeakKeyDictionary[Server[Any], dict[str, Any]] = weakref.WeakKeyDictionary()


def _plain_wire(server: Server[Any], modern: bool, result: CallToolResult) -> dict[str, Any] | None:
    """The wire form of a plain pool result (text blocks only, no kept-result link, ``_meta`` and
    ``structuredContent`` JSON objects of values JSON keeps as they are), None for any other.

    For such a result the SDK's sieve (the surface models' validate and dump) keeps every member
    as it is, in its model's field order: ``_meta``, ``content`` (``text``, ``type``), ``isError``,
    ``resultType`` (2026-07-28), ``structuredContent``; then the ``serverInfo`` stamp. The tests
    compare this with :func:`wire_result` of :func:`~mcp_gateway_svc.calls.mcp_result` on many
    results, both eras."""
    if result.result_handle:
        return None
    content = []
    for block in result.content:
        if block.type != "text" or block.raw_json not in _PLAIN_TEXT:
            return None
        content.append({"text": block.text, "type": "text"})
    meta = None
    if result.meta_json:
        # (a 2026-07-28 ``_meta`` is a model whose dump drops null members)
        meta = None if modern and "null" in result.meta_json else _object(result.meta_json)
        if meta is None or (modern and _DECLARED_BY_NAME in meta):
            return None
        if modern and SERVER_INFO_META_KEY in meta:
            # The MCP server's own stamp (it wins): the declared member, first in the dump.
            meta = {SERVER_INFO_META_KEY: meta[SERVER_INFO_META_KEY]} | meta
    structured = None
    if result.structured_content_json:
        structured = _object(result.structured_content_json)
        if structured is None:
            return None
    wire: dict[str, Any] = {} if meta is None else {"_meta": meta}
    wire["content"] = content
    wire["isError"] = result.is_error
    if modern:
        wire["resultType"] = "complete"
    if structured is not None:
        wire["structuredContent"] = structured
    if modern and (meta is None or SERVER_INFO_META_KEY not in meta):
        stamp = _STAMPS.get(server)
        if stamp is None:
            stamp = _STAMPS[server] = server.server_info_stamp
        # (shared, not copied: the answer is serialized at once and never changed)
        wire["_meta"] = (
            {SERVER_INFO_META_KEY: stamp} if meta is None else {**meta, SERVER_INFO_META_KEY: stamp}
        )
    return wire
