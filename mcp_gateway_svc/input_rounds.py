"""MCP 2026-07-28 multi-round-trip requests (``input_required`` results) relayed through the gateway.

A server behind the pool may answer ``tools/call``, ``resources/read`` or ``prompts/get`` with an
``InputRequiredResult``: what it needs from the host (``inputRequests``: sampling, elicitation,
roots) and its own opaque ``requestState``. The pool passes it on whole
(``CallToolResult.input_required_json``, ``FeatureReply.input_required_json``); the host answers
by sending the same request again with ``inputResponses`` and the ``requestState`` it got, and the
retry reaches the server with the server's own state.

The state the host sees is not the server's: :class:`InputRounds` seals the server's state together
with the routing (which request it answers, :class:`RoundOf`; the name the host asked by: the tool's
name, the resource's URI or the prompt's name; the server that answered) and the time it was
issued, with the ``mcp`` SDK's :class:`~mcp.server.request_state.AESGCMRequestStateCodec`
(AES-256-GCM: the host can neither read nor alter it). The key is derived from
``$TOOLSCOUT_TOKEN_KEY``, the secret every replica of a deployment already shares (per-user tokens and
login links need it), so any replica resumes a round another one started; during a key rotation a
state sealed under a key of ``$TOOLSCOUT_TOKEN_KEY_PREVIOUS`` still opens
(:mod:`toolscout_kit.token_keys`). Without that variable
each gateway process seals with a key of its own: a retry then works only on the replica that
issued the state. A state that does not unseal (altered, expired, from another deployment) or that
was issued for another request (another kind, name or server) or to another caller (principal) is
refused with -32602 (invalid params), and nothing reaches the server — except that a read or a
prompt is routed by the pool (by URI or name), so the server of its retry is known from the
answer only: one from another server than the state's is refused the same way
(:meth:`Resumed.answered_by`), and the host never gets it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

import mcp_types as types
from mcp.server.request_state import AESGCMRequestStateCodec, InvalidRequestState
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError
from toolscout.client import InputRoundRequest

from toolscout_kit.token_keys import KeyUse, TokenKeys

__all__ = ["STATE_SECONDS", "HostRound", "InputRounds", "Resumed", "RoundOf"]

# How long a host has to answer one round (the SDK's own default for request state).
STATE_SECONDS = 600.0
_VERSION = 1
# Clocks of replicas may differ by this much.
_SKEW_SECONDS = 60.0
_REFUSED = "requestState is not one this gateway issued, or it expired; send the request again without it"


class RoundOf(StrEnum):
    """What a round belongs to, the request the host sends again with its answers: a tool's
    ``tools/call``, a resource's ``resources/read``, a prompt's ``prompts/get``."""

    TOOL = "tool"
    RESOURCE = "resource"
    PROMPT = "prompt"


R = TypeVar("R", bound=InputRoundRequest)


@dataclass(frozen=True, slots=True)
class HostRound:
    """What a 2026-07-28 host's request carries of a round: its answers and the state it got
    (both None on a first request)."""

    input_responses: Mapping[str, Any] | None = None
    request_state: str | None = None
    # The host's sampling / elicitation / roots capabilities (JSON object text), declared to the server.
    capabilities_json: str = ""


@dataclass(frozen=True, slots=True)
class Resumed:
    """A round for the pool: the host's answers (JSON object text, "" none), the server's own state,
    and the server the state was issued by ("" on a first request)."""

    input_responses_json: str = ""
    request_state: str = ""
    host_capabilities_json: str = ""
    issued_by: str = ""
    of: RoundOf = RoundOf.TOOL

    def applied_to(self, request: R) -> R:
        """``request`` (to the pool) as one that relays ``input_required`` results, carrying this round."""
        return dataclasses.replace(request, **self.fields())

    def fields(self) -> dict[str, Any]:
        """The fields :meth:`applied_to` sets (for a request built with them at once)."""
        return {
            "accept_input_required": True,
            "input_responses_json": self.input_responses_json,
            "request_state": self.request_state,
            "host_capabilities_json": self.host_capabilities_json,
        }

    def answered_by(self, server: str) -> None:
        """Checks the server that answered a retry routed by the pool (a read, a prompt).

        Raises:
            MCPError: INVALID_PARAMS: the state was issued by another server.
        """
        if self.issued_by and server != self.issued_by:
            raise MCPError(
                types.INVALID_PARAMS,
                f"requestState was issued for another {self.of}; send it again without it",
            )


class InputRounds:
    """Seals the routing and the server's state into the ``requestState`` hosts see, and opens it."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        # The current key seals, every key (current, then previous ones) opens.
        secrets = TokenKeys.from_env(environ).derived(KeyUse.REQUEST_STATE)
        self._codec = AESGCMRequestStateCodec(secrets or [os.urandom(32)])

    def wrap(
        self, of: RoundOf, name: str, server: str, asked_json: str, *, principal: str = ""
    ) -> types.InputRequiredResult:
        """The server's ``InputRequiredResult`` (JSON text) as the host gets it: the state sealed
        with the routing (``of``: the request; ``name``: what the host asked for, as it asked;
        ``server``: the one that answered) and the caller (``principal``: only the same caller
        resumes it)."""
        asked = types.InputRequiredResult.model_validate_json(asked_json)
        payload = {
            "v": _VERSION,
            "k": of.value,
            "name": name,
            "server": server,
            "p": principal,
            "t": time.time(),
            "state": asked.request_state,
        }
        sealed = self._codec.seal(json.dumps(payload, separators=(",", ":")).encode())
        return asked.model_copy(update={"request_state": sealed})

    def resume(
        self,
        of: RoundOf,
        name: str,
        host_round: HostRound,
        *,
        server: str | None = None,
        principal: str = "",
    ) -> Resumed:
        """The pool's part of a host's ``of`` request for ``name`` by ``principal``, a retry when
        it carries a state. ``server``: the server the request goes to, when known before it is
        sent (a tool's); None: the pool routes it (check the answer with :meth:`Resumed.answered_by`).

        Raises:
            MCPError: INVALID_PARAMS: the state was not issued by this deployment, expired, or was
                issued for another request, name or server, or to another caller; or the answers
                are not MCP input responses.
        """
        answers = ""
        if host_round.input_responses is not None:
            try:
                checked = types.InputResponseRequestParams(input_responses=dict(host_round.input_responses))
            except ValidationError:
                raise MCPError(types.INVALID_PARAMS, "inputResponses are not MCP input responses") from None
            answers = json.dumps(
                checked.model_dump(by_alias=True, mode="json", exclude_none=True)["inputResponses"],
                separators=(",", ":"),
            )
        if host_round.request_state is None:
            return Resumed(answers, "", host_round.capabilities_json, of=of)
        payload = self._open(host_round.request_state)
        issued_by = payload.get("server")
        # States sealed before rounds covered reads and prompts name no kind: they were tools'.
        if (
            payload.get("k", RoundOf.TOOL.value) != of.value
            or payload.get("name") != name
            or not isinstance(issued_by, str)
            or (server is not None and issued_by != server)
        ):
            raise MCPError(types.INVALID_PARAMS, f"requestState was issued for another {of} than {name!r}")
        if payload.get("p") != principal:
            raise MCPError(types.INVALID_PARAMS, "requestState was issued to another caller")
        state = payload.get("state")
        return Resumed(
            answers, state if isinstance(state, str) else "", host_round.capabilities_json, issued_by, of
        )

    def _open(self, sealed: str) -> dict[str, Any]:
        try:
            payload = json.loads(self._codec.unseal(sealed))
        except (InvalidRequestState, ValueError):
            raise MCPError(types.INVALID_PARAMS, _REFUSED) from None
        issued = payload.get("t") if isinstance(payload, dict) else None
        if (
            not isinstance(payload, dict)
            or payload.get("v") != _VERSION
            or not isinstance(issued, int | float)
            or not -_SKEW_SECONDS <= time.time() - issued <= STATE_SECONDS
        ):
            raise MCPError(types.INVALID_PARAMS, _REFUSED)
        return payload
