"""The CLI's pure pieces: exit codes, targets, output formatting, conversation accounting."""

from __future__ import annotations

import argparse
import io
import json

import grpc
import pytest
from toolscout.client import ChatMessage, ChatResult, ChatStats, DiscoveryStats, TokenUsage, error_for_code

from toolscout_cli.__main__ import build_parser
from toolscout_cli.chat import Conversation
from toolscout_cli.connection import client_target, exit_code_for, resolve_targets
from toolscout_cli.output import Output, to_jsonable, truncate


@pytest.mark.parametrize(
    ("code", "exit_code"),
    [
        (grpc.StatusCode.NOT_FOUND, 3),
        (grpc.StatusCode.UNAVAILABLE, 4),
        (grpc.StatusCode.INVALID_ARGUMENT, 2),
        (grpc.StatusCode.INTERNAL, 1),
        (grpc.StatusCode.DEADLINE_EXCEEDED, 1),
    ],
)
def test_client_errors_map_to_documented_exit_codes(code: grpc.StatusCode, exit_code: int) -> None:
    assert exit_code_for(error_for_code(code, "x")) == exit_code


@pytest.mark.parametrize(
    ("listen", "target"),
    [
        ("0.0.0.0:50051", "127.0.0.1:50051"),
        ("[::]:50052", "127.0.0.1:50052"),
        (":50053", "127.0.0.1:50053"),
        ("10.0.0.5:50051", "10.0.0.5:50051"),
        ("unix:/tmp/s", "unix:/tmp/s"),
    ],
)
def test_wildcard_listen_addresses_are_dialled_on_loopback(listen: str, target: str) -> None:
    assert client_target(listen) == target


def _args(*argv: str) -> argparse.Namespace:
    args = build_parser().parse_args([*argv, "servers"])
    for name in ("pool_target", "discovery_target", "orchestrator_target", "ca_file"):
        setattr(args, name, getattr(args, name, None))
    return args


def test_targets_default_to_the_standard_ports_without_a_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOOLSCOUT_CONFIG", raising=False)
    monkeypatch.setenv("TOOLSCOUT_AUTH_TOKEN", "tok")
    targets = resolve_targets(_args())
    assert (targets.pool, targets.discovery, targets.orchestrator) == (
        "127.0.0.1:50051",
        "127.0.0.1:50052",
        "127.0.0.1:50053",
    )
    assert targets.token == "tok"
    assert not targets.tls


def test_target_sets_all_three_and_per_service_targets_win(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOOLSCOUT_CONFIG", raising=False)
    targets = resolve_targets(_args("--target", "h:1", "--discovery-target", "d:2"))
    assert (targets.pool, targets.discovery, targets.orchestrator) == ("h:1", "d:2", "h:1")


def test_to_jsonable_handles_dataclasses_tuples_and_bytes() -> None:
    value = {"usage": TokenUsage(input_tokens=3), "blob": b"\x00\x01", "names": ("a",)}
    assert to_jsonable(value) == {
        "usage": {
            "input_tokens": 3,
            "output_tokens": 0,
            "cached_input_tokens": 0,
            "cache_write_input_tokens": 0,
        },
        "blob": "AAE=",
        "names": ["a"],
    }


def test_tables_align_columns_and_cut_long_last_cells(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    buf = io.StringIO()
    Output(json_mode=False, out=buf).table(("Name", "Description"), [("a", "x" * 100), ("bbb", "short")])
    lines = buf.getvalue().splitlines()
    assert lines[0] == "Name  Description"
    assert lines[2].startswith("a     xxx")
    assert lines[2].endswith("…")
    assert len(lines[2]) <= 40
    assert lines[3] == "bbb   short"


def test_truncate_makes_one_line() -> None:
    assert truncate("a\nb   c", 10) == "a b c"
    assert truncate("abcdef", 4) == "abc…"


def test_json_output_is_one_document_per_line() -> None:
    buf = io.StringIO()
    Output(json_mode=True, out=buf).json({"k": ("v",)})
    assert json.loads(buf.getvalue()) == {"k": ["v"]}


def _result(sent: int, total: int, loaded: tuple[str, ...]) -> ChatResult:
    return ChatResult(
        messages=(ChatMessage(role="assistant", content="ok"),),
        loaded_tools=loaded,
        stats=ChatStats(
            usage=TokenUsage(input_tokens=10, output_tokens=2),
            discovery=DiscoveryStats(definition_tokens_sent=sent, definition_tokens_all=total),
        ),
        stop_reason="completed",
    )


def test_conversation_carries_history_and_tools_and_sums_savings() -> None:
    conv = Conversation(model="m")
    conv.record(ChatMessage.user("one"), _result(100, 400, ("t1",)))
    conv.record(ChatMessage.user("two"), _result(150, 400, ("t1", "t2")))
    assert [m.content for m in conv.history] == ["one", "ok", "two", "ok"]
    assert conv.discovered == ("t1", "t2")
    assert conv.tokens_saved == 550
    assert conv.savings_line().startswith(
        "[2 turns · tool definitions sent 250 of 800 tokens, saved 550 (69%)"
    )
