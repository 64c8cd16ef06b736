"""Every query command of the CLI against a real stack started with `toolscout up` (a subprocess).

The stack runs our example MCP servers and mcp-server-time (weather and time deferred); chat goes
to a local fake OpenAI-compatible provider. The CLI runs as its own process, found through the
config's listen addresses (ports picked free by the test).
"""

from __future__ import annotations

import json
import shlex
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
        config = stack_config(
            tmp / "config.json",
            ports=fixed_ports(),
            provider_url=provider.openai_base_url,
            # One small tool behind search_tools: discovery costs more than it saves here.
            extra_tool_sets={
                "cities": {"description": "the city list", "servers": {"weather": ["list_cities"]}}
            },
            # Anthropic's own API, with no key anywhere; and an OpenAI-compatible server that is not
            # running (a base_url elsewhere: no key needed).
            extra_clients={
                "claude": {"provider": "anthropic"},
                "offline": {
                    "provider": "openai",
                    "base_url": f"http://127.0.0.1:{free_port()}/v1",
                    "max_retries": 0,
                },
            },
            extra_models={
                "keyless": {"client": "claude", "model": "claude-sonnet-4-6"},
                "offline": {"client": "offline", "model": "m"},
            },
        )
        up = UpProcess(config, env={"ANTHROPIC_API_KEY": "", "OPENAI_API_KEY": ""})
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


def test_servers_shows_which_servers_run_their_writes_one_at_a_time_and_why(stack: RunningStack) -> None:
    """notes has 6 tools: 2 annotated readOnlyHint, delete_note only destructiveHint, 3 none."""
    code, out, _ = cli(stack, "servers")
    assert code == 0
    header, _rule, *lines = out.splitlines()
    column = header.index("Serialized")
    cells = {line.split()[0]: line[column:].split("  ")[0].strip() for line in lines}
    assert cells == {"notes": "4 of 6 (3 unannotated)", "time": "-", "weather": "-"}
    code, out, _ = cli(stack, "servers", "--json")
    notes = {s["name"]: s for s in json.loads(out)["servers"]}["notes"]
    assert (notes["serialize_writes"], notes["serialized_tools"], notes["unannotated_tools"]) == (True, 4, 3)


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
    assert sorted(t["name"] for t in json.loads(out)["toolsets"]) == ["cities", "weather_only"]
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


def test_describe_expands_nested_arguments_and_its_example_call_runs(stack: RunningStack) -> None:
    code, out, _ = cli(stack, "describe", "weather__get_forecast")
    assert code == 0
    lines = out.splitlines()
    assert "  location (object, required): A place: either a known city name or coordinates." in lines
    assert "    city (string|null): City name, e.g. 'Berlin'" in lines
    example = lines[lines.index("Example:") + 1].strip()
    assert example.endswith("""call weather__get_forecast --args '{"location": {"city": "Berlin"}}'""")
    code, out, _ = cli(stack, *shlex.split(example)[3:])  # after the program and its -c CONFIG
    assert code == 0
    assert out.startswith("Berlin forecast")
    code, out, _ = cli(stack, "describe", "get_forecast", "--server", "weather", "--json")
    described = json.loads(out)
    assert described["example_arguments"] == {"location": {"city": "Berlin"}}
    assert described["input_schema"]["required"] == ["location"]
    assert described["status"].startswith("deferred")


def test_tools_json_includes_each_input_schema(stack: RunningStack) -> None:
    code, out, _ = cli(stack, "tools", "--json", "--server", "weather")
    assert code == 0
    schemas = {t["name"]: t["input_schema"] for t in json.loads(out)["tools"]}
    assert schemas["weather__get_forecast"]["properties"]["location"] == {"$ref": "#/$defs/Location"}


def test_call_with_arguments_of_the_wrong_shape_prints_what_the_tool_takes(stack: RunningStack) -> None:
    code, out, err = cli(
        stack, "call", "weather__get_forecast", "--args", '{"location": "Berlin", "days": 2}'
    )
    assert code == 2
    assert out == ""  # not sent: the tool never saw it
    assert (
        "toolscout: the arguments do not fit what weather__get_forecast takes (the call was not sent):" in err
    )
    assert "  location: expected object, got string" in err
    assert "    city (string|null): City name, e.g. 'Berlin'" in err
    assert """call weather__get_forecast --args '{"location": {"city": "Berlin"}}'""" in err


def test_call_with_a_missing_argument_says_so_once(stack: RunningStack) -> None:
    code, out, err = cli(stack, "call", "weather__get_forecast", "--args", "{}")
    assert code == 2
    assert out == ""
    lines = err.splitlines()
    assert lines[:3] == [
        "toolscout: the arguments do not fit what weather__get_forecast takes (the call was not sent):",
        "  location: required",
        "expected arguments:",
    ]
    # The problem once; the rest is what the tool takes and an example.
    assert [line for line in lines if "required" in line] == [
        "  location: required",
        "  location (object, required): A place: either a known city name or coordinates.",
    ]
    assert lines[-1].startswith("example: ")


def test_a_range_the_schema_states_is_refused_before_the_call_with_the_problem_once(
    stack: RunningStack,
) -> None:
    code, out, err = cli(
        stack, "call", "weather__get_forecast", "--args", '{"location": {"city": "Berlin"}, "days": 30}'
    )
    assert code == 2
    assert out == ""  # not sent: the tool printed nothing
    lines = err.splitlines()
    assert lines[:3] == [
        "toolscout: the arguments do not fit what weather__get_forecast takes (the call was not sent):",
        "  days: 30 is greater than the maximum of 7",
        "expected arguments:",
    ]
    assert [line for line in lines if "maximum" in line] == ["  days: 30 is greater than the maximum of 7"]


def test_a_tool_error_that_is_not_about_arguments_prints_no_shape(stack: RunningStack) -> None:
    code, _, err = cli(stack, "call", "weather__get_forecast", "--args", '{"location": {"city": "Atlantis"}}')
    assert code == 1
    assert "unknown city" in _
    assert "expected arguments" not in err


def test_a_misspelt_tool_is_not_found_with_the_closest_names_everywhere(stack: RunningStack) -> None:
    expected = "toolscout: unknown tool 'weather__get_forcast' (closest: weather__get_forecast"
    for command in (["call"], ["describe"], ["search", "--tool"]):
        code, _, err = cli(stack, *command, "weather__get_forcast")
        assert code == 3, command
        assert err.splitlines()[0].startswith(expected), (command, err)
    code, _, err = cli(stack, "call", "get_forcast", "--server", "weather")
    assert code == 3
    assert err == "toolscout: unknown tool 'get_forcast' on server 'weather' (closest: get_forecast)\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["tools", "--toolset", "nope"], "unknown toolset 'nope' (toolsets: cities, weather_only)"),
        (["manifest", "--toolset", "weather_onyl"], "unknown toolset 'weather_onyl' (closest: weather_only)"),
        (["search", "x", "--server", "wether"], "unknown server 'wether' (closest: weather)"),
        (["tools", "--server", "wether"], "unknown server 'wether' (closest: weather)"),
        (["chat", "hi", "--model", "fak"], "unknown model 'fak' (closest: fake)"),
    ],
)
def test_every_kind_of_not_found_has_one_wording_and_exit_3(
    stack: RunningStack, args: list[str], message: str
) -> None:
    code, out, err = cli(stack, *args)
    assert (code, out, err) == (3, "", f"toolscout: {message}\n")


def test_search_limit_also_caps_a_server_browse(stack: RunningStack) -> None:
    code, out, err = cli(stack, "search", "--server", "weather", "--limit", "2")
    assert code == 0
    assert len(out.splitlines()) == 2 + 2
    assert "2 of 4 matches" in err
    code, out, _ = cli(stack, "search", "--server", "weather", "--limit", "2", "--json")
    assert len(json.loads(out)["matches"]) == 2


def test_tokens_for_anthropic_counts_every_row_in_one_labelled_estimate(stack: RunningStack) -> None:
    code, out, err = cli(stack, "tokens", "--provider", "anthropic", "--json")
    assert code == 0
    data = json.loads(out)
    assert (data["encoding"], data["estimate"]) == ("cl100k_base", True)
    servers = {s["server"]: s for s in data["servers"]}
    total = data["total"]
    assert total["tokens_without_discovery"] == sum(s["tokens_without_discovery"] for s in servers.values())
    code, out, err = cli(stack, "tokens", "--provider", "anthropic")
    assert out.splitlines()[-1].startswith("TOTAL (estimate)")
    assert "for anthropic, counted in cl100k_base · an estimate" in err


def test_tokens_show_a_negative_saving_when_discovery_costs_more(stack: RunningStack) -> None:
    code, out, _ = cli(stack, "tokens", "--toolset", "cities", "--json")
    assert code == 0
    total = json.loads(out)["total"]
    assert total["tokens_with_discovery"] > total["tokens_without_discovery"]
    assert total["tokens_saved"] == total["tokens_without_discovery"] - total["tokens_with_discovery"] < 0
    code, out, _ = cli(stack, "tokens", "--toolset", "cities")
    assert out.splitlines()[-1].split()[-2] == str(total["tokens_saved"])


def test_a_chat_whose_provider_keeps_failing_exits_5_not_4(stack: RunningStack) -> None:
    stack.provider.script(*[Reply.error(503, "overloaded") for _ in range(3)])
    code, _, err = cli(stack, "chat", "hi", "--model", "fake")
    assert code == 5, err
    assert err.startswith("toolscout: provider 'local' unavailable")
    assert len(err.splitlines()) == 1


def test_a_chat_model_whose_client_has_no_key_is_a_configuration_error_exit_2(stack: RunningStack) -> None:
    code, _, err = cli(stack, "chat", "hi", "--model", "keyless")
    assert code == 2, err
    assert err == (
        "toolscout: client 'claude' has no API key: set ANTHROPIC_API_KEY in the environment of the "
        "stack (toolscout up, or the orchestrator), or clients.claude.api_key\n"
    )


def test_a_provider_that_cannot_be_reached_names_the_url_and_exits_5(stack: RunningStack) -> None:
    code, _, err = cli(stack, "chat", "hi", "--model", "offline")
    config = json.loads(stack.config.read_text())
    url = config["clients"]["offline"]["base_url"] + "/chat/completions"
    assert code == 5, err
    assert (
        err
        == f"toolscout: provider 'offline' unavailable after 1 attempts: connection error to {url}: Connection refused\n"
    )


def test_tls_against_a_plaintext_stack_is_one_line_and_exit_4(stack: RunningStack) -> None:
    code, _, err = cli(stack, "servers", "--tls")
    assert code == 4
    assert len(err.splitlines()) == 1, err
    assert "the TLS handshake failed" in err
    assert "drop --tls" in err
