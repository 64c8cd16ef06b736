"""Every query command of the CLI against a real stack started with `toolscout up` (a subprocess).

The stack runs our example MCP servers and mcp-server-time (weather and time deferred); chat goes
to a local fake OpenAI-compatible provider. The CLI runs as its own process, found through the
config's listen addresses (ports picked free by the test).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.cli_stack import ThreadedProvider, UpProcess, fixed_ports, run_cli, stack_config
from tests.support.fake_provider import FakeProvider, Reply, ScriptedCall
from tests.support.mcp_servers import free_port

pytestmark = pytest.mark.e2e


@dataclass
class RunningStack:
    config: Path
    provider: FakeProvider
    endpoints: dict[str, str]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    tmp = tmp_path_factory.mktemp("cli-stack")
    with ThreadedProvider() as provider:
        config = stack_config(tmp / "config.json", ports=fixed_ports(), provider_url=provider.openai_base_url)
        up = UpProcess(config)
        try:
            endpoints = up.wait_ready()
            # On a busy machine a server may connect after the pool's start-up wait; wait for all.
            states = up.server_states({"notes", "time", "weather"})
            assert {s["state"] for s in states.values()} == {"ready"}, states
            yield RunningStack(config, provider, endpoints)
        finally:
            code = up.stop()
        assert code == 0, up.stderr


def cli(stack: RunningStack, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    done = run_cli(*args, "-c", str(stack.config), stdin=stdin)
    assert "Traceback" not in done.stderr
    return done.returncode, done.stdout, done.stderr


def test_servers_lists_every_server_ready(stack: RunningStack) -> None:
    code, out, _ = cli(stack, "servers")
    assert code == 0
    rows = {line.split()[0]: line.split() for line in out.splitlines()[2:]}
    assert set(rows) == {"notes", "time", "weather"}
    assert all(row[2] == "ready" for row in rows.values())
    code, out, _ = cli(stack, "servers", "--json")
    servers = {s["name"]: s for s in json.loads(out)["servers"]}
    assert servers["weather"]["defer_loading"] is True
    assert servers["time"]["tool_count"] == 2


def test_tools_marks_deferred_servers_tools_as_deferred(stack: RunningStack) -> None:
    code, out, _err = cli(stack, "tools")
    assert code == 0
    assert out.splitlines()[0].split()[:3] == ["Name", "Server", "Status"]
    code, out, _ = cli(stack, "tools", "--json")
    tools = json.loads(out)["tools"]
    status = {t["server"]: {x["status"] for x in tools if x["server"] == t["server"]} for t in tools}
    assert status == {"notes": {"loaded"}, "time": {"deferred"}, "weather": {"deferred"}}
    code, out, _ = cli(stack, "tools", "--json", "--toolset", "weather_only")
    assert {t["server"] for t in json.loads(out)["tools"]} == {"weather"}


def test_toolsets_and_models_come_from_the_config(stack: RunningStack) -> None:
    code, out, _ = cli(stack, "toolsets", "--json")
    assert code == 0
    assert [t["name"] for t in json.loads(out)["toolsets"]] == ["weather_only"]
    code, out, _ = cli(stack, "models")
    assert code == 0
    assert out.splitlines()[2].split()[:3] == ["fake", "openai", "fake-model"]


def test_manifest_lists_the_deferred_servers_within_budget(stack: RunningStack) -> None:
    code, out, _err = cli(stack, "manifest")
    assert code == 0
    assert "weather" in out
    assert "time" in out
    assert "notes" not in out
    code, out, _ = cli(stack, "manifest", "--json")
    manifest = json.loads(out)
    assert 0 < manifest["tokens"] <= manifest["budget_tokens"]
    assert manifest["deferred_servers"] == 2


def test_search_finds_the_forecast_tool(stack: RunningStack) -> None:
    code, out, _ = cli(stack, "search", "daily weather forecast")
    assert code == 0
    assert out.splitlines()[2].split()[1] == "weather__get_forecast"
    code, out, _ = cli(stack, "search", "--json", "--server", "time")
    assert {m["tool"]["llm_name"] for m in json.loads(out)["matches"]} == {
        "time__get_current_time",
        "time__convert_time",
    }


def test_call_runs_a_real_tool_and_reports_tool_errors_with_exit_1(stack: RunningStack) -> None:
    code, out, _ = cli(stack, "call", "weather__list_cities")
    assert code == 0
    assert "Berlin" in out
    code, out, _ = cli(
        stack, "call", "time__get_current_time", "--args", '{"timezone": "Asia/Tokyo"}', "--json"
    )
    assert code == 0
    result = json.loads(out)
    assert result["server"] == "time"
    assert result["is_error"] is False
    assert "Asia/Tokyo" in result["content"][0]["text"]
    code, out, err = cli(stack, "call", "time__get_current_time", "--args", '{"timezone": "Mars/Olympus"}')
    assert code == 1
    assert "reported an error" in err


def test_unknown_tool_and_unknown_toolset_exit_3_with_one_line(stack: RunningStack) -> None:
    code, out, err = cli(stack, "call", "no_such_tool")
    assert code == 3
    assert out == ""
    assert err.startswith("toolscout: ")
    assert len(err.splitlines()) == 1
    code, _, err = cli(stack, "tools", "--toolset", "nope")
    assert code == 3
    assert err.startswith("toolscout: ")


def test_tokens_shows_savings_per_server(stack: RunningStack) -> None:
    code, out, _ = cli(stack, "tokens", "--json")
    assert code == 0
    data = json.loads(out)
    servers = {s["server"]: s for s in data["servers"]}
    assert servers["notes"]["tokens_saved"] == 0
    assert servers["weather"]["tokens_saved"] == servers["weather"]["tokens_without_discovery"] > 0
    total = data["total"]
    assert total["tokens_saved"] == total["tokens_without_discovery"] - total["tokens_with_discovery"] > 0
    code, out, _ = cli(stack, "tokens")
    assert out.splitlines()[-1].startswith("TOTAL")


def test_chat_discovers_a_tool_calls_it_and_reports_savings(stack: RunningStack) -> None:
    stack.provider.script(
        Reply.calls(ScriptedCall("search_tools", {"query": "current time timezone"})),
        Reply.calls(ScriptedCall("time__get_current_time", {"timezone": "Asia/Tokyo"})),
        Reply.answer("It is noon in Tokyo."),
    )
    code, out, err = cli(stack, "chat", "What time is it in Tokyo?", "--model", "fake")
    assert code == 0, err
    assert out == "It is noon in Tokyo.\n"
    assert "→ search_tools" in err
    assert "+ discovered" in err
    assert "time__get_current_time" in err
    assert "→ time__get_current_time" in err
    assert "saved" in err


def test_interactive_chat_keeps_discovered_tools_for_the_next_turn(stack: RunningStack) -> None:
    stack.provider.script(
        Reply.calls(ScriptedCall("search_tools", {"tool_names": ["weather__get_forecast"]})),
        Reply.answer("Found it."),
        Reply.calls(ScriptedCall("weather__get_forecast", {"location": "Berlin", "days": 1})),
        Reply.answer("Sunny."),
    )
    before = len(stack.provider.requests)
    code, out, err = cli(
        stack, "chat", "--model", "fake", "--json", stdin="find the forecast tool\nforecast Berlin\n"
    )
    assert code == 0, err
    turns = [json.loads(line) for line in out.splitlines()]
    assert len(turns) == 2
    assert "weather__get_forecast" in turns[0]["loaded_tools"]
    third = stack.provider.requests[before + 2]
    assert "weather__get_forecast" in third.tool_names
    assert turns[1]["stop_reason"] == "completed"


def test_bad_config_exits_2_naming_the_file(stack: RunningStack, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"servers": {"x": {"command": 1}}}')
    done = run_cli("servers", "-c", str(bad))
    assert done.returncode == 2
    assert done.stderr.startswith(f"toolscout: {bad}")
    assert "Traceback" not in done.stderr
    done = run_cli("servers", "-c", str(tmp_path / "missing.json"))
    assert done.returncode == 2
    assert "configuration file not found" in done.stderr


def test_a_stack_that_is_not_running_exits_4_with_a_hint() -> None:
    done = run_cli("tools", "--target", f"127.0.0.1:{free_port()}")
    assert done.returncode == 4
    assert "is the stack running?" in done.stderr
    assert len(done.stderr.splitlines()) == 1
