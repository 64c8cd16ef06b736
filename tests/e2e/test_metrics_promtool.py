"""Every service's real /metrics output passes `promtool check metrics` and follows one naming
scheme per service; renamed metrics are still served under their old names for one release.

The three services run in process on free ports with a real MCP server and the fake provider; a
search, a tool call and a chat (search → discovered tool → answer) fill every family first.
"""

from __future__ import annotations

import re
import subprocess
import urllib.request
from pathlib import Path

import pytest
from toolscout import client as tc

from deploy import check
from tests.support.fake_provider import FakeProvider, RecordedRequest, Reply, ScriptedCall
from tests.support.mcp_servers import example_server_config
from tests.support.stack import running_stack
from toolscout_kit.config import parse_config

pytestmark = pytest.mark.e2e

_PREFIX = {
    "pool": "toolscout_pool_",
    "discovery": "toolscout_discovery_",
    "orchestrator": "toolscout_orchestrator_",
}
# Old names kept for one release (README "Metrics", CHANGELOG 0.2.0).
_DEPRECATED = {
    "toolscout_search_mode_active",
    "toolscout_llm_tokens",
    "toolscout_llm_call_duration_seconds",
    "toolscout_llm_errors",
    "toolscout_chat_iterations",
    "toolscout_chats",
    "toolscout_deferred_call_rejections",
    "toolscout_tokens_saved",
    "toolscout_definition_tokens_sent",
    "toolscout_definition_tokens_all",
    "toolscout_native_deferral_fallbacks",
    "toolscout_search_calls",
    "toolscout_discovered_tool_calls",
}


def _scrape(port: int | None) -> str:
    assert port is not None
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text: str = response.read().decode()
    return text


def _promtool_check(text: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(check.ensure_promtool(install=True)), "check", "metrics"],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _families(text: str) -> set[str]:
    return set(re.findall(r"^# TYPE (\S+) ", text, flags=re.MULTILINE))


async def test_every_services_metrics_pass_promtool_and_follow_one_prefix(tmp_path: Path) -> None:
    def respond(request: RecordedRequest) -> Reply:
        roles = [m["role"] for m in request.body["messages"]]
        if roles.count("tool") == 0:
            return Reply.calls(ScriptedCall("search_tools", {"query": "forecast for a city"}))
        if roles.count("tool") == 1:
            return Reply.calls(ScriptedCall("weather__get_forecast", {"location": {"city": "Berlin"}}))
        return Reply.answer("Sunny.")

    async with FakeProvider() as fake:
        fake.responder = respond
        config = parse_config(
            {
                "clients": {"oai": {"provider": "openai", "base_url": fake.openai_base_url, "api_key": "k"}},
                "models": {"gpt": {"client": "oai", "model": "gpt-test"}},
                "servers": {
                    "notes": example_server_config("notes"),
                    "weather": example_server_config("weather", defer_loading=True),
                },
                "tool_discovery": {"enabled": True},
            },
            base_dir=tmp_path,
        )
        async with running_stack(config) as stack:
            assert stack.orchestrator is not None
            async with tc.AsyncToolscoutClient.connect(
                pool=stack.pool.address,
                discovery=stack.discovery.address,
                orchestrator=stack.orchestrator.address,
            ) as ts:
                await ts.pool.call_tool("notes__list_tasks", {})
                await ts.discovery.search_tools("forecast")
                reply = await ts.orchestrator.chat("Weather in Berlin?", model="gpt", deadline=60)
                assert reply.text == "Sunny."
            scraped = {
                "pool": _scrape(stack.pool.metrics_port),
                "discovery": _scrape(stack.discovery.metrics_port),
                "orchestrator": _scrape(stack.orchestrator.metrics_port),
            }

    for service, text in scraped.items():
        done = _promtool_check(text)
        assert (done.returncode, done.stdout + done.stderr) == (0, ""), (
            f"{service}:\n{done.stdout}{done.stderr}"
        )
        ours = {f for f in _families(text) if f.startswith("toolscout_")}
        assert ours, service
        stray = {
            f
            for f in ours
            if not f.startswith(_PREFIX[service]) and re.sub(r"_(total|created)$", "", f) not in _DEPRECATED
        }
        assert stray == set(), f"{service}: not {_PREFIX[service]}*"
    orchestrator = scraped["orchestrator"]
    # The old names still answer, with the same values as the new ones.
    for old in ("toolscout_chats_total", "toolscout_llm_tokens_total", "toolscout_search_calls_total"):
        new = old.replace("toolscout_", "toolscout_orchestrator_", 1)
        old_lines = sorted(
            line.split(" ", 1)[1] for line in orchestrator.splitlines() if line.startswith(old + "{")
        )
        new_lines = sorted(
            line.split(" ", 1)[1] for line in orchestrator.splitlines() if line.startswith(new + "{")
        )
        assert old_lines == new_lines != [], old
    assert 'toolscout_orchestrator_search_calls_total{model="gpt"} 1.0' in orchestrator
    assert 'toolscout_orchestrator_discovered_tool_calls_total{model="gpt"} 1.0' in orchestrator
    assert "toolscout_pool_shards 1.0" in scraped["pool"]
    assert "toolscout_pool_shard_count" not in scraped["pool"]
    assert 'toolscout_discovery_search_mode_active{mode="bm25"} 1.0' in scraped["discovery"]
