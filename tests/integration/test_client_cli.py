"""The CLI's query commands against fake services: rendering, --json, exit codes, no tracebacks.

(The same commands against a real stack started with `toolscout up` are in tests/e2e/test_cli_*.py.)
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import grpc
import pytest

from tests.support.fake_services import FakeStack, FakeState, fake_stack
from toolscout_cli.__main__ import main


@pytest.fixture
async def stack() -> AsyncIterator[FakeStack]:
    async with fake_stack() as running:
        yield running


async def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = await asyncio.to_thread(main, list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


async def test_servers_prints_a_table_and_json(stack: FakeStack, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = await run(capsys, "servers", "--target", stack.target)
    assert code == 0
    assert out.splitlines()[0].split() == [
        "Server",
        "Transport",
        "State",
        "Tools",
        "Restarts",
        "Deferred",
        "Serialized",
        "Last",
        "error",
    ]
    assert "weather" in out
    assert "reconnecting" in out
    assert "connection refused" in out
    code, out, _ = await run(capsys, "--json", "servers", "--target", stack.target)
    assert code == 0
    assert [s["state"] for s in json.loads(out)["servers"]] == ["ready", "reconnecting"]


async def test_tools_shows_loaded_and_deferred_status(
    stack: FakeStack, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = await run(capsys, "tools", "--target", stack.target)
    assert code == 0
    rows = {line.split()[0]: line.split()[2] for line in out.splitlines()[2:]}
    assert rows == {"time_get_current_time": "loaded", "weather_forecast": "deferred"}
    assert "1 loaded, 1 deferred" in err
    code, out, _ = await run(capsys, "tools", "--json", "--target", stack.target)
    data = json.loads(out)
    assert (data["loaded"], data["deferred"]) == (1, 1)


async def test_models_toolsets_and_manifest(stack: FakeStack, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = await run(capsys, "models", "--target", stack.target)
    assert code == 0
    assert "gpt-4.1" in out
    code, out, _ = await run(capsys, "toolsets", "--json", "--target", stack.target)
    assert json.loads(out)["toolsets"][0]["name"] == "basic"
    code, out, err = await run(capsys, "manifest", "--target", stack.target, "--toolset", "basic")
    assert code == 0
    assert out.strip() == "weather (1 tool): forecast"
    assert "9 tokens (budget 2000)" in err
    assert stack.state.last_requests["GetManifest"].toolset == "basic"


async def test_search_renders_matches_and_needs_something_to_search(
    stack: FakeStack, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = await run(capsys, "search", "weather today", "--target", stack.target)
    assert code == 0
    assert "weather_forecast" in out
    code, out, _ = await run(capsys, "search", "--json", "weather", "--target", stack.target)
    assert json.loads(out)["matches"][0]["tool"]["llm_name"] == "weather_forecast"
    code, out, err = await run(capsys, "search", "--target", stack.target)
    assert code == 2
    assert "search needs a QUERY" in err


async def test_call_prints_the_result_and_rejects_bad_json(
    stack: FakeStack, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = await run(
        capsys, "call", "time_get_current_time", "--args", '{"timezone":"UTC"}', "--target", stack.target
    )
    assert code == 0
    assert out.strip() == 'called time_get_current_time with {"timezone":"UTC"}'
    code, out, err = await run(capsys, "call", "x", "--args", "{nope", "--target", stack.target)
    assert code == 2
    assert "--args is not valid JSON" in err
    code, out, err = await run(capsys, "call", "x", "--args", "[1]", "--target", stack.target)
    assert code == 2
    assert "must be a JSON object" in err


async def test_unknown_tool_exits_3_in_the_clis_one_wording_listing_the_tools(
    stack: FakeStack, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _out, err = await run(capsys, "call", "nope", "--target", stack.target)
    assert code == 3
    # The service said "Unknown tool 'nope'"; the CLI words every not-found the same way.
    assert err.strip() == "toolscout: unknown tool 'nope' (tools: time_get_current_time, weather_forecast)"
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("status", "exit_code"),
    [
        (grpc.StatusCode.NOT_FOUND, 3),
        (grpc.StatusCode.INVALID_ARGUMENT, 2),
        (grpc.StatusCode.INTERNAL, 1),
        (grpc.StatusCode.PERMISSION_DENIED, 1),
    ],
)
async def test_server_errors_become_exit_codes_and_one_line(
    stack: FakeStack, capsys: pytest.CaptureFixture[str], status: grpc.StatusCode, exit_code: int
) -> None:
    stack.state.fail("ListModels", status, details="it went wrong")
    code, _, err = await run(capsys, "models", "--target", stack.target)
    assert code == exit_code
    assert err == "toolscout: it went wrong\n"


async def test_a_stack_that_is_not_running_exits_4_with_a_hint(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = await run(capsys, "servers", "--target", "127.0.0.1:1")
    assert code == 4
    assert out == ""
    assert err.startswith("toolscout: cannot reach the pool at 127.0.0.1:1: is the stack running?")
    assert len(err.splitlines()) == 1


async def test_chat_one_shot_streams_tool_activity_and_savings(
    stack: FakeStack, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = await run(capsys, "chat", "hello there", "--model", "gpt", "--target", stack.target)
    assert code == 0
    assert out == "echo: hello there\n"
    assert "→ search_tools" in err
    assert "+ discovered 1 tools: weather_forecast" in err
    assert "saved 360 (60%)" in err


async def test_chat_json_prints_the_final_result(
    stack: FakeStack, capsys: pytest.CaptureFixture[str]
) -> None:
    _code, out, _ = await run(capsys, "chat", "hi", "-m", "gpt", "--json", "--target", stack.target)
    data = json.loads(out)
    assert data["stop_reason"] == "completed"
    assert data["loaded_tools"] == ["weather_forecast"]


async def test_chat_repl_carries_history_and_discovered_tools_across_turns(
    stack: FakeStack, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = iter(["first", "second", "exit"])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(lines))
    code, out, err = await run(capsys, "chat", "-m", "gpt", "--target", stack.target)
    assert code == 0
    assert out == "echo: first\necho: second\n"
    request = stack.state.last_requests["StreamChat"]
    assert [m.content for m in request.messages] == ["first", "echo: first", "second"]
    assert list(request.discovered_tools) == ["weather_forecast"]
    assert "2 turns" in err
    assert "saved 720 (60%)" in err


async def test_chat_without_a_model_and_no_config_is_a_usage_error(
    stack: FakeStack, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TOOLSCOUT_CONFIG", raising=False)
    code, _, err = await run(capsys, "chat", "hi", "--target", stack.target)
    assert code == 2
    assert "--model" in err


async def test_bad_usage_exits_2_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        await run(capsys, "frobnicate")
    assert info.value.code == 2
    assert "toolscout: argument COMMAND: invalid choice" in capsys.readouterr().err


async def test_tokens_breaks_the_savings_down_per_server(
    stack: FakeStack, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _err = await run(capsys, "tokens", "--json", "--target", stack.target)
    assert code == 0
    data = json.loads(out)
    servers = {s["server"]: s for s in data["servers"]}
    assert servers["time"]["tokens_with_discovery"] == servers["time"]["tokens_without_discovery"] > 0
    assert servers["weather"]["tokens_with_discovery"] == 0
    assert servers["weather"]["tokens_saved"] == servers["weather"]["tokens_without_discovery"] > 0
    assert data["total"] == {
        "tokens_without_discovery": 300,
        "tokens_with_discovery": 120,
        "tokens_saved": 180,
    }
    code, out, _ = await run(capsys, "tokens", "--target", stack.target)
    assert code == 0
    assert out.splitlines()[-1].split()[:1] == ["TOTAL"]
    assert "180 (60%)" in out


async def test_search_and_manifest_send_an_inline_toolset(
    stack: FakeStack, capsys: pytest.CaptureFixture[str]
) -> None:
    inline = '{"servers": {"weather": true}}'
    code, _, _ = await run(capsys, "search", "weather", "--toolset-json", inline, "--target", stack.target)
    assert code == 0
    sent = stack.state.last_requests["SearchTools"]
    assert (sent.toolset, sent.toolset_json) == ("", inline)
    code, _, _ = await run(capsys, "manifest", "--toolset-json", inline, "--target", stack.target)
    assert code == 0
    assert stack.state.last_requests["GetManifest"].toolset_json == inline


async def test_tokens_shows_the_result_tokens_the_pool_shaped_per_server(
    capsys: pytest.CaptureFixture[str],
) -> None:
    state = FakeState()
    shaped = state.servers[0]
    shaped.result_tokens_returned, shaped.result_tokens_delivered, shaped.results_kept = 52_000, 1_900, 3
    async with fake_stack(state) as stack:
        code, out, _err = await run(capsys, "tokens", "--json", "--target", stack.target)
        assert code == 0
        assert json.loads(out)["results"] == [
            {
                "server": "time",
                "tokens_returned": 52_000,
                "tokens_delivered": 1_900,
                "tokens_saved": 50_100,
                "results_kept": 3,
            }
        ]
        code, out, _err = await run(capsys, "tokens", "--target", stack.target)
    assert code == 0
    assert "Result tokens returned" in out
    # The result table comes first; the definitions' TOTAL stays the last line.
    totals = [line.split() for line in out.splitlines() if line.startswith("TOTAL")]
    assert totals[0] == ["TOTAL", "52000", "1900", "50100", "(96%)", "3"]
    assert out.splitlines()[-1].startswith("TOTAL")
    assert "180 (60%)" in out.splitlines()[-1]
