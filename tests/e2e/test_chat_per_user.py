"""``Chat`` honours ``per_user`` servers: the caller names its user (``x-toolscout-principal``), the
orchestrator passes that principal on to the pool, and each chat's tool calls run with that
user's own upstream token; its plans and searches are that user's too (discovery's per-principal
view: the model is offered and finds the tools the server lists to them, never another's nor the
stack's). Real orchestrator, discovery and pool over gRPC, the real OpenAI SDK against the fake
provider, ``oidc-provider`` with two users and an MCP server that records which subject each call
ran as and lists a tool ``notebook_<subject>`` to each subject only.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from cryptography.fernet import Fernet
from toolscout.client import (
    PRINCIPAL_KEY,
    AsyncOrchestratorClient,
    ChatFinished,
    ChatResult,
    InvalidArgumentError,
    principal_metadata,
)

from tests.support.cli_stack import run_cli
from tests.support.fake_provider import FakeProvider, RecordedRequest, Reply, ScriptedCall
from tests.support.oauth_servers import (
    AuthServer,
    ProtectedServer,
    login_as,
    running_authorization_server,
    running_protected_server,
)
from tests.support.stack import running_stack
from toolscout_cli.connection import EXIT_USAGE
from toolscout_kit.config import parse_config
from toolscout_kit.token_store import STACK_PRINCIPAL, TokenStore

pytestmark = [pytest.mark.e2e]

USERS = {"app:alice": "alice", "app:bob": "bob"}
TOOL = "protected__whoami"


@pytest.fixture(scope="module")
def auth_server() -> Iterator[AuthServer]:
    with running_authorization_server(account="operator") as server:
        yield server


@pytest.fixture(scope="module")
def protected(auth_server: AuthServer) -> Iterator[ProtectedServer]:
    with running_protected_server(auth_server.issuer, per_subject_tools=True) as server:
        yield server


def _tool_text(result: ChatResult) -> str:
    [tool] = [m for m in result.messages if m.role == "tool"]
    return tool.content


NOTEBOOKS = {f"protected__notebook_{user}" for user in ("operator", *USERS.values())}


def _tool_results(request: RecordedRequest) -> list[str]:
    return [str(m["content"]) for m in request.body["messages"] if m["role"] == "tool"]


async def _plans_and_searches_as_each_principal(
    fake: FakeProvider, orchestrator: AsyncOrchestratorClient
) -> None:
    """Each principal's chat is offered, finds and calls its own ``notebook_<subject>`` (a deferred
    tool of the per_user server), never another's nor the stack's (the operator's); a chat naming
    nobody plans and searches the stack's list as before."""
    for principal, user in [*USERS.items(), ("", "operator")]:
        for stream in (False, True):
            mine = f"protected__notebook_{user}"
            fake.script(
                Reply.calls(ScriptedCall("search_tools", {"query": "private notebook"})),
                # Nobody named: the stack's notebook is found, but not called (it needs a sign-in).
                *([Reply.calls(ScriptedCall(mine, {}))] if principal else []),
                Reply.answer("done"),
            )
            start = len(fake.requests)
            metadata = principal_metadata(principal) if principal else ()
            if stream:
                events = orchestrator.stream_chat("my notes?", model="gpt", metadata=metadata)
                [final] = [e async for e in events if isinstance(e, ChatFinished)]
                result = final.result
            else:
                result = await orchestrator.chat("my notes?", model="gpt", metadata=metadata)
            first, after_search, *rest = fake.requests[start:]
            # The first request offers the eager tools and search_tools, no notebook of anyone.
            assert "protected__whoami" in first.tool_names
            assert "search_tools" in first.tool_names
            assert not NOTEBOOKS & set(first.tool_names)
            # The search found their own notebook only, and the next request offers it alone.
            [found] = _tool_results(after_search)
            assert [n for n in sorted(NOTEBOOKS) if n in found] == [mine], found
            assert NOTEBOOKS & set(after_search.tool_names) == {mine}
            if principal:
                # Called as them, on their own session.
                [called] = rest
                assert NOTEBOOKS & set(called.tool_names) == {mine}
                assert _tool_results(called)[-1] == f"notebook of: {user}"
            assert result.text == "done"
            # What the chat loaded (to pass back next turn) is their own notebook too.
            assert NOTEBOOKS & set(result.loaded_tools) == {mine}


async def test_each_chat_calls_a_per_user_server_as_the_principal_its_caller_names(
    protected: ProtectedServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("TOOLSCOUT_TOKEN_FILE", str(tmp_path / "tokens.json"))
    monkeypatch.setenv("TOOLSCOUT_TOKEN_KEY", Fernet.generate_key().decode())
    store = TokenStore.from_env()
    # The stack's own authorization (an operator) lists the server's tools; calls never use it.
    await login_as(protected.url, store, STACK_PRINCIPAL, "operator")
    for principal, user in USERS.items():
        await login_as(protected.url, store, principal, user)
    replies: list[str] = []
    async with FakeProvider() as fake:
        config = parse_config(
            {
                "clients": {
                    "oai": {"provider": "openai", "base_url": fake.openai_base_url, "api_key": "sk-e2e-0"}
                },
                "models": {"gpt": {"client": "oai", "model": "gpt-e2e"}},
                "servers": {
                    "protected": {
                        "url": protected.url,
                        "auth": {"type": "oauth", "per_user": True},
                        # notebook_<subject> is found by search; whoami loads with every request.
                        "defer_loading": True,
                        "always_load": ["whoami"],
                    }
                },
                "tool_discovery": {"enabled": True},
            },
            base_dir=tmp_path,
        )
        async with running_stack(config) as stack:
            assert stack.orchestrator is not None
            async with AsyncOrchestratorClient.connect(stack.orchestrator.address) as orchestrator:

                async def chat(metadata: tuple[tuple[str, str], ...] = ()) -> ChatResult:
                    fake.script(Reply.calls(ScriptedCall(TOOL, {})), Reply.answer("done"))
                    result = await orchestrator.chat("who am I?", model="gpt", metadata=metadata)
                    replies.append(_tool_text(result))
                    return result

                # No principal named, or the stack's: not sent, the model reads that a sign-in is needed.
                before = len(protected.subjects())
                for metadata in ((), principal_metadata(STACK_PRINCIPAL)):
                    refused = _tool_text(await chat(metadata))
                    assert refused.startswith("Error:")
                    assert "protected" in refused
                assert len(protected.subjects()) == before
                # A malformed principal is the caller's error.
                with pytest.raises(InvalidArgumentError, match=PRINCIPAL_KEY):
                    await orchestrator.chat("hi", model="gpt", metadata=((PRINCIPAL_KEY, "two words"),))
                # Two users' chats in a random order: each ran as its own caller, never another.
                rng = random.Random(33)  # noqa: S311 - a test's randomness
                sequence = [rng.choice(list(USERS)) for _ in range(24)]
                for principal in sequence:
                    result = await chat(principal_metadata(principal))
                    assert _tool_text(result) == f"subject: {USERS[principal]}"
                # StreamChat names its principal the same way.
                for principal, user in USERS.items():
                    fake.script(Reply.calls(ScriptedCall(TOOL, {})), Reply.answer("done"))
                    events = orchestrator.stream_chat(
                        "who am I?", model="gpt", metadata=principal_metadata(principal)
                    )
                    [final] = [e async for e in events if isinstance(e, ChatFinished)]
                    replies.append(_tool_text(final.result))
                    assert _tool_text(final.result) == f"subject: {user}"
                    sequence.append(principal)
                await _plans_and_searches_as_each_principal(fake, orchestrator)
                # The CLI's `toolscout chat --as PRINCIPAL` names it the same way.
                fake.script(Reply.calls(ScriptedCall(TOOL, {})), Reply.answer("done"))
                target = ("--orchestrator-target", stack.orchestrator.address, "--model", "gpt", "--json")
                done = await anyio.to_thread.run_sync(
                    lambda: run_cli("chat", "who am I?", *target, "--as", "app:bob", timeout=60)
                )
                assert done.returncode == 0, done.stderr
                tool_texts = [
                    m["content"] for m in json.loads(done.stdout)["messages"] if m["role"] == "tool"
                ]
                assert tool_texts == ["subject: bob"]
                sequence.append("app:bob")
                refused = await anyio.to_thread.run_sync(
                    lambda: run_cli("chat", "hi", *target, "--as", "two words")
                )
                assert refused.returncode == EXIT_USAGE, refused.stderr
                assert "--as" in refused.stderr
                ran_as = protected.wait_subjects(before + len(sequence))[before:]
                assert Counter(ran_as) == Counter(USERS[p] for p in sequence)  # 0 cross-user uses
                assert "operator" not in ran_as
    secrets = [
        token
        for _key, entry in store.entries()
        for token in (entry.get("tokens") or {}).values()
        if isinstance(token, str) and len(token) > 20
    ]
    assert secrets
    printed = capfd.readouterr()
    logs = caplog.text + printed.out + printed.err
    assert "CallTool" in logs  # the services' log lines are among what is checked
    said = "\n".join(replies) + logs
    assert not [s for s in secrets if s in said]
