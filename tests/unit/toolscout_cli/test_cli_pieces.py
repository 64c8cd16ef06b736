"""The CLI's pure pieces: exit codes, targets, output formatting, conversation accounting."""

from __future__ import annotations

import argparse
import io
import json
import sysconfig
from pathlib import Path

import grpc
import pytest
from toolscout.client import (
    ChatMessage,
    ChatResult,
    ChatStats,
    DiscoveryStats,
    ResultTokens,
    TokenUsage,
    error_for_code,
)

from toolscout_cli.__main__ import _provider_failed, build_parser
from toolscout_cli.chat import Conversation
from toolscout_cli.connection import client_target, exit_code_for, program, resolve_targets
from toolscout_cli.not_found import unknown
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


def test_the_savings_line_adds_the_tool_result_tokens_when_results_were_shaped() -> None:
    conv = Conversation(model="m")
    conv.record(ChatMessage.user("one"), _result(100, 400, ()))
    assert "tool results" not in conv.savings_line()
    shaped = ResultTokens("logs", tokens_returned=40_000, tokens_delivered=900, read_tokens=600)
    result = _result(100, 400, ())
    conv.record(
        ChatMessage.user("two"),
        ChatResult(result.messages, (), ChatStats(result_tokens=(shaped,)), "completed"),
    )
    assert conv.savings_line().endswith(
        " · tool results 40000 tokens, 1500 reached the model (read_result included)]"
    )


def test_a_conversation_where_discovery_costs_more_than_it_saves_shows_a_negative_saving() -> None:
    conv = Conversation(model="m")
    conv.record(ChatMessage.user("one"), _result(3938, 3717, ()))
    assert conv.tokens_saved == -221
    assert "sent 3938 of 3717 tokens, saved -221 (-6%)" in conv.savings_line()


@pytest.mark.parametrize(
    "code",
    [grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.FAILED_PRECONDITION],
)
def test_a_provider_failure_in_a_chat_is_told_apart_from_a_failing_stack(code: grpc.StatusCode) -> None:
    chat = "/toolscout.orchestrator.v1.Orchestrator/StreamChat"
    assert _provider_failed(
        error_for_code(code, "provider 'openai' unavailable after 3 attempts: x", method=chat)
    )
    assert not _provider_failed(error_for_code(code, "discovery unavailable", method=chat))
    assert not _provider_failed(
        error_for_code(code, "provider 'x'", method="/toolscout.mcp_pool.v1.McpPool/CallTool")
    )


def test_environment_targets_sit_between_the_flags_and_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOOLSCOUT_CONFIG", raising=False)
    monkeypatch.setenv("TOOLSCOUT_TARGET", "env:1")
    monkeypatch.setenv("TOOLSCOUT_POOL_TARGET", "envpool:2")
    targets = resolve_targets(_args())
    assert (targets.pool, targets.discovery, targets.orchestrator) == ("envpool:2", "env:1", "env:1")
    targets = resolve_targets(_args("--discovery-target", "flag:3"))
    assert (targets.pool, targets.discovery) == ("envpool:2", "flag:3")


def test_the_command_to_run_again_is_the_venv_path_relative_to_the_project(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scripts = Path(sysconfig.get_path("scripts"))
    monkeypatch.chdir(scripts.parent.parent)  # the project holding .venv/
    assert program() == str(Path(scripts.parent.name) / "bin" / "toolscout")
    monkeypatch.chdir("/")
    assert program() == str(scripts / "toolscout")


def test_not_found_names_the_kind_and_the_closest_names_or_all_of_them() -> None:
    assert unknown("tool", "get_forcast", ["get_forecast", "list_cities"]) == (
        "unknown tool 'get_forcast' (closest: get_forecast)"
    )
    assert (
        unknown("toolset", "nope", ["planning", "writing"])
        == "unknown toolset 'nope' (toolsets: planning, writing)"
    )
    assert unknown("model", "x", []) == "unknown model 'x' (no models configured)"
    assert unknown("tool", "zzz", [], closest=[]) == "unknown tool 'zzz' (no similar names)"
    assert unknown("tool", "t", [f"n{i:02}" for i in range(20)]).endswith("n11, ... 8 more)")
    assert unknown("tool", "x", ["y"], where=" on server 's'") == "unknown tool 'x' on server 's' (tools: y)"


def test_call_help_shows_an_llm_name_with_the_double_underscore() -> None:
    subparsers = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert "time__get_current_time" in subparsers.choices["call"].format_help()
    assert "describe" in subparsers.choices
