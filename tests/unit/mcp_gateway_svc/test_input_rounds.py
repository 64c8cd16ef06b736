"""The sealed ``requestState`` of 2026-07-28 ``input_required`` rounds (``mcp_gateway_svc.input_rounds``)."""

from __future__ import annotations

import json

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from mcp_gateway_svc import input_rounds
from mcp_gateway_svc.input_rounds import HostRound, InputRounds
from toolscout_kit.token_store import TOKEN_KEY_ENV

KEY = {TOKEN_KEY_ENV: "a-shared-deployment-secret-of-enough-length"}
ASKED = json.dumps(
    {
        "resultType": "input_required",
        "inputRequests": {"who": {"method": "roots/list"}},
        "requestState": "server-state",
    }
)


def _sealed(rounds: InputRounds, name: str = "greet") -> str:
    state = rounds.wrap(name, "rounds", "greet", ASKED).request_state
    assert state is not None
    return state


def test_replicas_sharing_the_key_resume_each_others_rounds_and_the_host_cannot_read_the_state() -> None:
    asked = InputRounds(KEY).wrap("greet", "rounds", "greet", ASKED)
    assert asked.input_requests is not None
    assert isinstance(asked.input_requests["who"], types.ListRootsRequest)
    assert asked.request_state is not None
    assert "server-state" not in asked.request_state
    answers = {"who": {"roots": [{"uri": "file:///work"}]}}
    resumed = InputRounds(KEY).resume("greet", "rounds", HostRound(answers, asked.request_state, "{}"))
    assert resumed.request_state == "server-state"
    assert json.loads(resumed.input_responses_json) == answers
    assert resumed.host_capabilities_json == "{}"


def test_without_a_shared_key_only_the_issuing_process_resumes() -> None:
    issuer = InputRounds({})
    state = _sealed(issuer)
    assert issuer.resume("greet", "rounds", HostRound(None, state)).request_state == "server-state"
    with pytest.raises(MCPError) as caught:
        InputRounds({}).resume("greet", "rounds", HostRound(None, state))
    assert caught.value.code == types.INVALID_PARAMS


@pytest.mark.parametrize(
    ("name", "server"), [("other", "rounds"), ("greet", "elsewhere")], ids=["tool", "server"]
)
def test_a_state_issued_for_another_tool_is_refused(name: str, server: str) -> None:
    rounds = InputRounds(KEY)
    with pytest.raises(MCPError) as caught:
        rounds.resume(name, server, HostRound(None, _sealed(rounds)))
    assert caught.value.code == types.INVALID_PARAMS


def test_an_expired_state_and_answers_that_are_not_input_responses_are_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rounds = InputRounds(KEY)
    state = _sealed(rounds)
    later = input_rounds.time.time() + input_rounds.STATE_SECONDS + 1
    monkeypatch.setattr(input_rounds.time, "time", lambda: later)
    with pytest.raises(MCPError) as expired:
        rounds.resume("greet", "rounds", HostRound(None, state))
    monkeypatch.undo()
    with pytest.raises(MCPError) as malformed:
        rounds.resume("greet", "rounds", HostRound({"who": {"nothing": "here"}}, state))
    assert expired.value.code == malformed.value.code == types.INVALID_PARAMS


def test_a_state_issued_to_another_caller_is_refused() -> None:
    rounds = InputRounds(KEY)
    asked = rounds.wrap("greet", "rounds", "greet", ASKED, principal="alice")
    assert asked.request_state is not None
    own = rounds.resume("greet", "rounds", HostRound(None, asked.request_state), principal="alice")
    assert own.request_state == "server-state"
    with pytest.raises(MCPError) as caught:
        rounds.resume("greet", "rounds", HostRound(None, asked.request_state), principal="mallory")
    assert caught.value.code == types.INVALID_PARAMS
