"""The sealed ``requestState`` of 2026-07-28 ``input_required`` rounds (``mcp_gateway_svc.input_rounds``)."""

from __future__ import annotations

import json

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError
from toolscout.client import CallRequest, PromptRequest, ResourceReadRequest

from mcp_gateway_svc import input_rounds
from mcp_gateway_svc.input_rounds import HostRound, InputRounds, RoundOf
from toolscout_kit.token_store import TOKEN_KEY_ENV

KEY = {TOKEN_KEY_ENV: "a-shared-deployment-secret-of-enough-length"}
ASKED = json.dumps(
    {
        "resultType": "input_required",
        "inputRequests": {"who": {"method": "roots/list"}},
        "requestState": "server-state",
    }
)


TOOL = RoundOf.TOOL


def _sealed(rounds: InputRounds, name: str = "greet") -> str:
    state = rounds.wrap(TOOL, name, "rounds", ASKED).request_state
    assert state is not None
    return state


def test_replicas_sharing_the_key_resume_each_others_rounds_and_the_host_cannot_read_the_state() -> None:
    asked = InputRounds(KEY).wrap(TOOL, "greet", "rounds", ASKED)
    assert asked.input_requests is not None
    assert isinstance(asked.input_requests["who"], types.ListRootsRequest)
    assert asked.request_state is not None
    assert "server-state" not in asked.request_state
    answers = {"who": {"roots": [{"uri": "file:///work"}]}}
    resumed = InputRounds(KEY).resume(
        TOOL, "greet", HostRound(answers, asked.request_state, "{}"), server="rounds"
    )
    assert resumed.request_state == "server-state"
    assert json.loads(resumed.input_responses_json) == answers
    assert resumed.host_capabilities_json == "{}"


def test_without_a_shared_key_only_the_issuing_process_resumes() -> None:
    issuer = InputRounds({})
    state = _sealed(issuer)
    assert (
        issuer.resume(TOOL, "greet", HostRound(None, state), server="rounds").request_state == "server-state"
    )
    with pytest.raises(MCPError) as caught:
        InputRounds({}).resume(TOOL, "greet", HostRound(None, state), server="rounds")
    assert caught.value.code == types.INVALID_PARAMS


@pytest.mark.parametrize(
    ("name", "server"), [("other", "rounds"), ("greet", "elsewhere")], ids=["tool", "server"]
)
def test_a_state_issued_for_another_tool_is_refused(name: str, server: str) -> None:
    rounds = InputRounds(KEY)
    with pytest.raises(MCPError) as caught:
        rounds.resume(TOOL, name, HostRound(None, _sealed(rounds)), server=server)
    assert caught.value.code == types.INVALID_PARAMS


def test_an_expired_state_and_answers_that_are_not_input_responses_are_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rounds = InputRounds(KEY)
    state = _sealed(rounds)
    later = input_rounds.time.time() + input_rounds.STATE_SECONDS + 1
    monkeypatch.setattr(input_rounds.time, "time", lambda: later)
    with pytest.raises(MCPError) as expired:
        rounds.resume(TOOL, "greet", HostRound(None, state), server="rounds")
    monkeypatch.undo()
    with pytest.raises(MCPError) as malformed:
        rounds.resume(TOOL, "greet", HostRound({"who": {"nothing": "here"}}, state), server="rounds")
    assert expired.value.code == malformed.value.code == types.INVALID_PARAMS


def test_a_state_issued_to_another_caller_is_refused() -> None:
    rounds = InputRounds(KEY)
    asked = rounds.wrap(TOOL, "greet", "rounds", ASKED, principal="alice")
    assert asked.request_state is not None
    own = rounds.resume(
        TOOL, "greet", HostRound(None, asked.request_state), server="rounds", principal="alice"
    )
    assert own.request_state == "server-state"
    with pytest.raises(MCPError) as caught:
        rounds.resume(
            TOOL, "greet", HostRound(None, asked.request_state), server="rounds", principal="mallory"
        )
    assert caught.value.code == types.INVALID_PARAMS


@pytest.mark.parametrize(
    ("of", "name"),
    [(RoundOf.RESOURCE, "greet"), (RoundOf.PROMPT, "greet"), (RoundOf.RESOURCE, "file:///other")],
    ids=["a-resource-of-that-name", "a-prompt-of-that-name", "another-resource"],
)
def test_a_state_issued_for_a_tool_or_another_resource_is_refused(of: RoundOf, name: str) -> None:
    rounds = InputRounds(KEY)
    with pytest.raises(MCPError) as caught:
        rounds.resume(of, name, HostRound(None, _sealed(rounds)))
    assert caught.value.code == types.INVALID_PARAMS


def test_a_read_routed_by_the_pool_is_resumed_and_its_answer_must_come_from_the_same_server() -> None:
    uri = "mem://greeting"
    rounds = InputRounds(KEY)
    state = rounds.wrap(RoundOf.RESOURCE, uri, "rounds", ASKED, principal="alice").request_state
    assert state is not None
    resumed = InputRounds(KEY).resume(RoundOf.RESOURCE, uri, HostRound(None, state), principal="alice")
    assert (resumed.request_state, resumed.issued_by) == ("server-state", "rounds")
    resumed.answered_by("rounds")
    with pytest.raises(MCPError) as caught:
        resumed.answered_by("elsewhere")
    assert caught.value.code == types.INVALID_PARAMS
    # A first read (no state) is bound to no server yet.
    InputRounds(KEY).resume(RoundOf.RESOURCE, uri, HostRound()).answered_by("elsewhere")


def test_a_round_is_applied_to_each_pool_request_in_the_same_four_fields() -> None:
    rounds = InputRounds(KEY)
    state = rounds.wrap(RoundOf.PROMPT, "greeting", "rounds", ASKED).request_state
    resumed = rounds.resume(
        RoundOf.PROMPT, "greeting", HostRound({"who": {"roots": []}}, state, '{"roots":{}}')
    )
    for request in (
        CallRequest.to("greet"),
        ResourceReadRequest("mem://greeting"),
        PromptRequest("greeting"),
    ):
        applied = resumed.applied_to(request)
        assert type(applied) is type(request)
        assert applied.accept_input_required
        assert applied.request_state == "server-state"
        assert json.loads(applied.input_responses_json) == {"who": {"roots": []}}
        assert applied.host_capabilities_json == '{"roots":{}}'
