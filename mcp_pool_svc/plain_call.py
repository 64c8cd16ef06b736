"""A plain ``tools/call`` on the pool's session without ``ClientSession.call_tool``'s detours.

:func:`plain_call_tool` is ``call_tool`` for a call that asks for nothing else (no progress, no
retry of an input round, no result claims), on a session of any revision and transport: the same request
(the session's own stamp), the same checks of the answer. ``send_request`` builds a
``CallToolRequest`` model only to dump it again, checks the result against its revision's wire
type with a ``TypeAdapter`` round trip whose dump is thrown away, and ``validate_tool_result``
walks every error of the output schema (``best_match(iter_errors(...))``) even for a valid
result. Here the request is the dict the dump would give, the wire type is validated without the
dump, and the output schema is checked by the kit's compiled yes-check, made once per schema
(:mod:`toolscout_kit.schema_check`), with the session's own compiled validator's ``is_valid``
behind it where that check is not sure; only an invalid result takes the SDK's detailed walk, for
its exact error. The request goes through the session's dispatcher (``send_raw``), which POSTs it itself
at 2026-07-28 over streamable HTTP (:mod:`mcp_pool_svc.lean`).

It relies on pieces of the pinned SDK that are not public (``ClientSession._stamp``,
``_session_read_timeout_seconds``, ``_tool_output_schemas``, ``_output_schema_validator``,
``_call_tool_adapter``, and the module's ``_clamp_inbound_ttl``, ``_later_revision_fields``,
``_input_required_unexpected``): ``tests/unit/mcp_pool_svc/test_pool_plain_call.py`` compares
both paths' requests and verdicts at every protocol revision, so an SDK that changes them fails
there.
"""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types
from mcp.client import UnexpectedClaimedResult
from mcp.client.session import (
    ClientSession,
    _clamp_inbound_ttl,
    _input_required_unexpected,
    _later_revision_fields,
)
from mcp.shared.dispatcher import CallOptions
from mcp_types.methods import SERVER_RESULTS
from pydantic import TypeAdapter
from referencing.exceptions import Unresolvable

from toolscout_kit.schema_check import Check, compile_check

__all__ = ["plain_call_tool", "plain_meta"]

# Keys of a request's _meta that ask for more than a plain call (progress: the SDK's own path).
_NOT_PLAIN_META = frozenset({"progressToken", "progress_token"})
# Per session, per tool: the output schema a check was compiled for, and the check.
_CHECKS: weakref.WeakKeyDictionary[ClientSession, dict[str, tuple[Any, Check]]] = weakref.WeakKeyDictionary()
# The wire type of a tools/call result per revision, validated without the dump (one adapter each).
_WIRE_RESULTS: dict[str, TypeAdapter[Any]] = {}


def plain_meta(meta: dict[str, Any]) -> bool:
    """Whether a call's ``_meta`` asks for nothing :func:`plain_call_tool` leaves out."""
    return not meta or _NOT_PLAIN_META.isdisjoint(meta)


def _wire_result(version: str) -> TypeAdapter[Any] | None:
    """The wire type of a tools/call result at ``version`` (None: the SDK knows none, and checks
    nothing at that step either)."""
    adapter = _WIRE_RESULTS.get(version)
    if adapter is None:
        wire: Any = SERVER_RESULTS.get(("tools/call", version))
        if wire is None:
            return None
        adapter = _WIRE_RESULTS[version] = TypeAdapter(wire)
    return adapter


async def plain_call_tool(
    session: ClientSession,
    send_raw: Callable[[str, Any, Any], Awaitable[dict[str, Any]]],
    name: str,
    arguments: dict[str, Any],
    meta: dict[str, Any],
    *,
    allow_input_required: bool = False,
) -> mcp_types.CallToolResult | mcp_types.InputRequiredResult:
    """``session.call_tool(name, arguments, meta=meta or None, allow_input_required=...)`` (a
    2026-07-28 server's ``input_required`` answer returned, not raised, when allowed: the first
    round of a host's call, whose retry goes the SDK's way) on a session whose protocol
    version is negotiated (any revision, any transport), with the request sent through
    ``send_raw`` (the session's dispatcher's ``send_raw_request``, which takes the lean POST where
    it applies); see the module's doc. ``meta`` passes :func:`plain_meta`.

    Raises:
        MCPError: the server's error, or the connection's.
        pydantic.ValidationError: the result is not a valid result at the negotiated revision.
        RuntimeError: as ``call_tool``: an input-required answer, or structured content that does
            not conform to the tool's output schema (the SDK's own message).
        UnexpectedClaimedResult: as ``call_tool``.
    """
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if meta:
        params["_meta"] = dict(meta)
    data: dict[str, Any] = {"method": "tools/call", "params": params}
    opts: CallOptions = {}
    session._stamp(data, opts)  # the session's own stamp (see the module's doc)
    if session._session_read_timeout_seconds is not None:
        opts["timeout"] = session._session_read_timeout_seconds
    raw = await send_raw("tools/call", data["params"], opts)
    _clamp_inbound_ttl(raw)
    version = session.protocol_version or "2025-11-25"
    wire = _wire_result(version)
    if wire is not None:
        wire.validate_python(raw, by_name=False)
    if not (foreign := _later_revision_fields("tools/call", version)).isdisjoint(raw):
        raw = {key: value for key, value in raw.items() if key not in foreign}
    result = session._call_tool_adapter.validate_python(raw, by_name=False)
    if isinstance(result, mcp_types.InputRequiredResult):
        if allow_input_required:
            return result
        raise _input_required_unexpected("call_tool")
    if not isinstance(result, mcp_types.CallToolResult):
        raise UnexpectedClaimedResult(result)
    if not result.is_error:
        await _check_output(session, name, result)
    return result


def _compiled_check(session: ClientSession, name: str, schema: dict[str, Any]) -> Check:
    """The check of a tool's output schema, made once per schema the session holds for the tool:
    the kit's compiled yes-check (:mod:`toolscout_kit.schema_check`: True only where jsonschema
    agrees), asking the session's own compiled validator where it is not sure.

    Raises:
        RuntimeError: the schema is not a valid JSON Schema (the SDK's refusal, on every call, as
            the SDK refuses it: nothing is kept for it).
    """
    checks = _CHECKS.get(session)
    if checks is None:
        checks = _CHECKS[session] = {}
    entry = checks.get(name)
    if entry is None or entry[0] is not schema:
        validator = session._output_schema_validator(name, schema)  # the SDK's compile and refusal
        fits = compile_check(schema, type(validator))
        if fits is None:
            entry = checks[name] = (schema, validator.is_valid)
        else:
            entry = checks[name] = (schema, lambda value: fits(value) or validator.is_valid(value))
    return entry[1]


async def _check_output(session: ClientSession, name: str, result: mcp_types.CallToolResult) -> None:
    """``session.validate_tool_result(name, result)``, answered by ``is_valid`` when it passes.

    Raises:
        RuntimeError: as ``validate_tool_result`` (which gives an invalid result its message).
    """
    schemas = session._tool_output_schemas
    schema = schemas.get(name)
    if name not in schemas or schema is None:
        if name not in schemas:
            await session.validate_tool_result(name, result)  # lists the tools first, as the SDK does
        return
    if result.structured_content is None and "structured_content" not in result.model_fields_set:
        raise RuntimeError(f"Tool {name} has an output schema but did not return structured content")
    check = _compiled_check(session, name, schema)
    try:
        valid = check(result.structured_content)
    except Unresolvable as err:
        raise RuntimeError(f"Invalid schema for tool {name}: {err}") from err
    if not valid:
        await session.validate_tool_result(name, result)
