"""``Chat`` honours ``per_user`` servers: the caller names its user (``x-toolscout-principal``), the
orchestrator passes that principal on to the pool, and each chat's tool calls run with that
user's own upstream token. Real orchestrator, discovery and pool over gRPC, the real OpenAI SDK
against the fake provider, ``oidc-provider`` with two users and an MCP server that records which
subject each call ran as.
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
from tests.support.fake_provider import FakeProvider, Reply, ScriptedCall
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
    with running_protected_server(auth_server.issuer) as server:
        yield server


def _tool_text(result: ChatResult) -> str:
    [tool] = [m for m in result.messages if m.role == "tool"]
    return tool.content


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
                "servers": {"protected": {"url": protected.url, "auth": {"type": "oauth", "per_user": True}}},
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
