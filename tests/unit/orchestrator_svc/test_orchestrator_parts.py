"""Pure parts of the orchestrator: reasoning split, history rebuild, prompts, results, registry, errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from orchestrator_svc import errors as orch_errors
from orchestrator_svc.errors import ProviderAuthError, TemplateError
from orchestrator_svc.history import discovery_candidates, not_loaded_error, recorded_searches
from orchestrator_svc.messages import Attachment, Message, ToolCall, ToolDef, Usage
from orchestrator_svc.metrics import OrchestratorMetrics
from orchestrator_svc.prompts import DEFAULT_SYSTEM_PROMPT, SystemPrompts
from orchestrator_svc.providers.base import looks_like_tools_rejected
from orchestrator_svc.providers.registry import OLLAMA_DEFAULT_BASE_URL, ModelRegistry, build_provider
from orchestrator_svc.reasoning import ThinkSplitter, split_reasoning
from orchestrator_svc.results import cap_text, format_result, outcome_text
from orchestrator_svc.seams import ToolOutcome
from toolscout_kit.config import ClientConfig, parse_config
from toolscout_kit.errors import ToolscoutError
from toolscout_kit.status import status_for


@pytest.mark.parametrize(
    ("text", "answer", "reasoning"),
    [
        ("plain", "plain", ""),
        ("<think>a</think>b", "b", "a"),
        ("<thinking>\nstep\n</thinking>\n\nDone.", "Done.", "step"),
        ("x <think>unclosed", "x", "unclosed"),
        ("a < b and c > d", "a < b and c > d", ""),
    ],
)
def test_split_reasoning_separates_think_tags(text: str, answer: str, reasoning: str) -> None:
    assert split_reasoning(text) == (answer, reasoning)


def test_think_tags_split_across_chunks_never_leak_into_the_answer() -> None:
    splitter = ThinkSplitter()
    pieces = []
    for chunk in ["Hi <th", "ink>sec", "ret</thi", "nk> there <", "3"]:
        pieces += splitter.feed(chunk)
    pieces += splitter.flush()
    assert "".join(p for k, p in pieces if k == "text") == "Hi  there <3"
    assert "".join(p for k, p in pieces if k == "reasoning") == "secret"


DEFERRED = frozenset({"weather_forecast", "weather_alerts", "files_read"})


def rebuild_discovered(
    messages: list[Message],
    explicit: list[str],
    deferred: frozenset[str],
    found: dict[str, list[str]] | None = None,
) -> list[str]:
    # Discovery keeps the candidates that are deferred tools of the toolset, in order.
    return [n for n in discovery_candidates(messages, explicit, found) if n in deferred]


def successful_searches(messages: list[Message]) -> list[ToolCall]:
    recorded, unrecorded = recorded_searches(messages)
    assert recorded == {}
    return unrecorded


def test_history_rebuild_uses_explicit_names_calls_and_search_results_in_order() -> None:
    messages = [
        Message("user", "hi"),
        Message("assistant", "", [ToolCall("s1", "search_tools", '{"query": "x"}')]),
        # The text also names a tool the search did not load: only the replayed result counts.
        Message("tool", "Found weather_alerts (closest: weather_forecast)", tool_call_id="s1"),
        Message("assistant", "", [ToolCall("c1", "files_read", "{}"), ToolCall("c2", "clock_now", "{}")]),
        Message("tool", "contents", tool_call_id="c1", name="files_read"),
    ]
    assert successful_searches(messages) == [messages[1].tool_calls[0]]
    found = rebuild_discovered(
        messages, ["weather_forecast", "unknown"], DEFERRED, {"s1": ["weather_alerts"]}
    )
    assert found == ["weather_forecast", "weather_alerts", "files_read"]
    assert rebuild_discovered(messages, [], DEFERRED, {"s1": ["weather_alerts"]}) == [
        "weather_alerts",
        "files_read",
    ]


def test_recorded_search_results_need_no_replay() -> None:
    messages = [
        Message("assistant", "", [ToolCall("s1", "search_tools", '{"query": "x"}')]),
        Message("tool", "Found weather_alerts", tool_call_id="s1", loaded_tools=["weather_alerts"]),
        Message("assistant", "", [ToolCall("s2", "search_tools", '{"query": "y"}')]),
        Message("tool", "Found nothing new", tool_call_id="s2", loaded_tools=[]),
        Message("assistant", "", [ToolCall("s3", "search_tools", '{"query": "z"}')]),
        Message("tool", "Found files_read", tool_call_id="s3"),
    ]
    recorded, unrecorded = recorded_searches(messages)
    assert recorded == {"s1": ["weather_alerts"], "s2": []}
    assert unrecorded == [messages[4].tool_calls[0]]


def test_history_rebuild_ignores_failed_searches_and_rejected_calls() -> None:
    messages = [
        Message("assistant", "", [ToolCall("s1", "search_tools", "{}"), ToolCall("c1", "files_read", "{}")]),
        Message("tool", "Error: no tool named weather_alerts", tool_call_id="s1", is_error=True),
        Message("tool", not_loaded_error("files_read"), tool_call_id="c1", is_error=True),
    ]
    assert successful_searches(messages) == []
    assert rebuild_discovered(messages, [], DEFERRED) == []


TOOLS = [ToolDef("a_b", "does b", {"type": "object"}, "a", "b")]


def test_prompt_precedence_is_explicit_then_template_then_default(tmp_path: Path) -> None:
    (tmp_path / "t.j2").write_text("{% for t in tools %}[{{ t.name }}: {{ t.description }}]{% endfor %}\n")
    prompts = SystemPrompts(tmp_path)
    assert prompts.resolve(explicit="mine", template="t", tools=TOOLS) == "mine"
    assert prompts.resolve(explicit="", template="t", tools=TOOLS) == "[a_b: does b]"
    assert prompts.resolve(explicit="", template=None, tools=TOOLS) == DEFAULT_SYSTEM_PROMPT
    assert SystemPrompts(tmp_path, "custom").resolve(explicit="", template=None, tools=[]) == "custom"


def test_missing_or_broken_template_is_a_template_error(tmp_path: Path) -> None:
    (tmp_path / "bad.j2").write_text("{{ nope.attr }}")
    prompts = SystemPrompts(tmp_path)
    with pytest.raises(TemplateError, match="'gone' not found"):
        prompts.resolve(explicit="", template="gone", tools=[])
    with pytest.raises(TemplateError, match="failed to render"):
        prompts.resolve(explicit="", template="bad", tools=[])


def test_result_formats_follow_casual_mcp() -> None:
    call = ToolCall("1", "add", '{"a": 1, "b": "x"}')
    assert format_result("result", call, "3") == "3"
    assert format_result("function_result", call, "3") == "add → 3"
    assert format_result("function_args_result", call, "3") == "add(a=1, b='x') → 3"


def test_cap_marks_truncation_visibly() -> None:
    assert cap_text("abc", 3) == "abc"
    assert cap_text("abcdef", 3) == "abc\n[... truncated: 3 more characters not shown]"


def test_outcome_text_keeps_images_as_attachments_and_falls_back_to_structured_content() -> None:
    image = Attachment("image", data=b"x", mime_type="image/png")
    text, attachments = outcome_text(
        ToolOutcome([Attachment("text", text="a"), image, Attachment("text", text="b")])
    )
    assert (text, attachments) == ("a\nb", [image])
    assert outcome_text(ToolOutcome([], structured_content_json='{"x": 1}')) == ('{"x": 1}', [])


@pytest.mark.parametrize(
    ("status", "message", "expected"),
    [
        (400, "registry.ollama.ai/library/gemma does not support tools", True),
        (400, '"auto" tool choice requires --enable-auto-tool-choice', True),
        (400, "No endpoints found that support tool use", True),
        (400, "messages: field required", False),
        (500, "tools broke", False),
    ],
)
def test_tool_rejections_are_recognised_across_servers(status: int, message: str, expected: bool) -> None:
    assert looks_like_tools_rejected(status, message) is expected


def test_missing_api_key_is_a_clear_precondition_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ProviderAuthError, match="set ANTHROPIC_API_KEY"):
        build_provider("claude", ClientConfig(provider="anthropic"))
    with pytest.raises(ProviderAuthError, match="set OPENAI_API_KEY"):
        build_provider("oai", ClientConfig(provider="openai"))


async def test_ollama_needs_no_key_and_defaults_to_the_local_openai_compatible_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    config = parse_config(
        {
            "clients": {
                "local": {"provider": "ollama"},
                "remote": {"provider": "ollama", "base_url": "http://gpu:11434"},
            },
            "models": {
                "m": {"client": "local", "model": "qwen3"},
                "r": {"client": "remote", "model": "qwen3"},
            },
        }
    )
    registry = ModelRegistry(config)
    local = registry.resolve("m").provider
    remote = registry.resolve("r").provider
    assert local.provider == "ollama"
    assert str(local._client.base_url) == OLLAMA_DEFAULT_BASE_URL + "/"  # type: ignore[attr-defined]
    assert str(remote._client.base_url) == "http://gpu:11434/v1/"  # type: ignore[attr-defined]
    await registry.aclose()


def test_every_orchestrator_error_maps_to_a_status_code() -> None:
    classes = [getattr(orch_errors, name) for name in orch_errors.__all__]
    for cls in classes:
        assert issubclass(cls, ToolscoutError)
        assert status_for(cls("x")) is not None, cls


def test_metric_names_are_the_documented_contract() -> None:
    registry = CollectorRegistry()
    metrics = OrchestratorMetrics(registry)
    metrics.record_llm_call("openai", "gpt", 0.1, Usage(1, 2, 3))
    metrics.record_llm_error("openai", "gpt", "rate_limited")
    metrics.record_chat("gpt", "", "completed", 2, 100, 300)
    metrics.deferred_rejections.labels("gpt").inc()
    metrics.search_calls.labels("gpt").inc()
    metrics.discovered_tool_calls.labels("gpt").inc()
    samples = {(s.name, tuple(sorted(s.labels))) for family in registry.collect() for s in family.samples}
    expected = {
        ("toolscout_llm_tokens_total", ("model", "provider", "type")),
        ("toolscout_llm_call_duration_seconds_count", ("model", "provider")),
        ("toolscout_llm_errors_total", ("model", "provider", "reason")),
        ("toolscout_chat_iterations_count", ()),
        ("toolscout_chats_total", ("model", "outcome")),
        ("toolscout_deferred_call_rejections_total", ("model",)),
        ("toolscout_tokens_saved_total", ("model", "toolset")),
        ("toolscout_definition_tokens_sent_total", ("model", "toolset")),
        ("toolscout_definition_tokens_all_total", ("model", "toolset")),
        ("toolscout_search_calls_total", ("model",)),
        ("toolscout_discovered_tool_calls_total", ("model",)),
    }
    assert expected <= samples
    saved = registry.get_sample_value("toolscout_tokens_saved_total", {"model": "gpt", "toolset": "_all"})
    assert saved == 200
    types = {
        registry.get_sample_value(
            "toolscout_llm_tokens_total", {"provider": "openai", "model": "gpt", "type": t}
        )
        for t in ("input", "output", "cached_input")
    }
    assert types == {1, 2, 3}


def test_toolset_servers_are_listed_with_their_mode() -> None:
    from orchestrator_svc.servicer import _toolset_server
    from toolscout_kit.config import ExcludeSpec

    assert (_toolset_server("a", True).mode, list(_toolset_server("a", True).tools)) == ("all", [])
    assert (_toolset_server("a", False).mode, list(_toolset_server("a", False).tools)) == ("include", [])
    assert list(_toolset_server("a", ["x"]).tools) == ["x"]
    excluded = _toolset_server("a", ExcludeSpec(exclude=["y"]))
    assert (excluded.mode, list(excluded.tools)) == ("exclude", ["y"])
