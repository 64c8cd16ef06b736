"""The deferral table, config keys, native-mode limits and the neutral types native mode adds."""

from __future__ import annotations

import pytest
from toolscout.client import Tool

from orchestrator_svc.history import history_loaded_tools
from orchestrator_svc.messages import LLMRequest, LLMResult, Message, NativeItem, Usage
from orchestrator_svc.providers.base import LLMProvider
from orchestrator_svc.providers.deferral import (
    MAX_DEFERRED_TOOLS,
    ModelRule,
    ProviderApi,
    is_strict,
    native_limit_problem,
    resolve_deferral,
)
from orchestrator_svc.providers.registry import ModelRegistry
from toolscout_kit.config import ClientConfig, parse_config
from toolscout_kit.errors import ConfigError


@pytest.mark.parametrize(
    ("provider", "api", "model", "expected"),
    [
        ("anthropic", "messages", "claude-sonnet-4-5-20250929", "native"),
        ("anthropic", "messages", "claude-opus-4-5", "native"),
        ("anthropic", "messages", "claude-haiku-4-5@20251001", "native"),
        ("anthropic", "messages", "anthropic.claude-sonnet-4-5-20250929-v1:0", "native"),
        ("anthropic", "messages", "claude-opus-4-6", "native"),
        ("anthropic", "messages", "claude-fable-5-1", "native"),
        ("anthropic", "messages", "claude-sonnet-4-20250514", "append"),
        ("anthropic", "messages", "claude-opus-4-1", "append"),
        ("anthropic", "messages", "claude-3-5-sonnet-20241022", "append"),
        ("openai", "responses", "gpt-5.4", "native"),
        ("openai", "responses", "gpt-5.4-mini-2026-03-05", "native"),
        ("openai", "responses", "gpt-5.5", "native"),
        ("openai", "responses", "gpt-6", "native"),
        ("openai", "responses", "gpt-5.2", "append"),
        ("openai", "responses", "gpt-5-mini", "append"),
        ("openai", "responses", "gpt-4o", "append"),
        ("openai", "chat_completions", "gpt-5.4", "append"),
        ("ollama", "chat_completions", "qwen3:8b", "append"),
    ],
)
def test_auto_resolves_by_the_table(provider: str, api: str, model: str, expected: str) -> None:
    assert resolve_deferral(provider, api, model, "auto") == expected  # type: ignore[arg-type]


def test_configured_modes_win_over_the_table_and_patterns_extend_it() -> None:
    assert resolve_deferral("anthropic", "messages", "claude-sonnet-4-5", "append") == "append"
    assert resolve_deferral("anthropic", "messages", "claude-3-haiku", "native") == "native"
    assert resolve_deferral("openai", "responses", "my-finetune", "auto") == "append"
    assert resolve_deferral("openai", "responses", "my-finetune", "auto", native_models=["^my-"]) == "native"
    # Patterns never make Chat Completions native: it has no mechanism.
    assert (
        resolve_deferral("openai", "chat_completions", "my-finetune", "auto", native_models=[".*"])
        == "append"
    )


@pytest.mark.parametrize(
    ("provider", "api", "model"),
    [
        ("openai", "chat_completions", "gpt-4.1"),
        ("ollama", "chat_completions", "qwen3:8b"),
        ("anthropic", "messages", "claude-3-5-sonnet-20241022"),
        ("anthropic", "messages", "claude-fable-5-1"),
        ("openai", "responses", "gpt-5.4"),
    ],
)
def test_stable_is_taken_as_configured_on_every_api_and_auto_never_picks_it(
    provider: str, api: ProviderApi, model: str
) -> None:
    assert resolve_deferral(provider, api, model, "stable") == "stable"
    assert resolve_deferral(provider, api, model, "auto") in ("native", "append")


def test_native_on_an_api_without_a_mechanism_is_refused() -> None:
    with pytest.raises(ValueError, match="no native deferral"):
        resolve_deferral("openai", "chat_completions", "gpt-5.4", "native")


def test_a_custom_table_replaces_the_built_in_one() -> None:
    table = [ModelRule("native", "anthropic", "messages", r"claude-(?P<major>\d+)", (3, 0))]
    assert resolve_deferral("anthropic", "messages", "claude-3-haiku", "auto", table=table) == "native"


def test_strict_models_are_claude_from_5_1_or_configured() -> None:
    assert is_strict("anthropic", "messages", "claude-fable-5-1")
    assert is_strict("anthropic", "messages", "claude-fable-5-2-20261101")
    assert not is_strict("anthropic", "messages", "claude-sonnet-4-5")
    assert not is_strict("anthropic", "messages", "claude-sonnet-5")
    assert is_strict("anthropic", "messages", "claude-sonnet-4-5", strict_models=["sonnet"])
    assert not is_strict("anthropic", "messages", "claude-fable-5-1", configured=False)


def _config(**model: object) -> dict[str, object]:
    return {
        "clients": {
            "claude": {"provider": "anthropic", "api_key": "k"},
            "oai": {"provider": "openai", "api_key": "k", "api": "responses"},
            "chat": {"provider": "openai", "api_key": "k"},
            "local": {"provider": "ollama"},
        },
        "models": {"m": {"client": "claude", "model": "claude-sonnet-4-5", **model}},
    }


class _UnusedProvider:
    provider = "none"

    async def complete(self, request: LLMRequest, **kw: object) -> LLMResult:
        raise AssertionError("not called")

    async def aclose(self) -> None:
        pass


def _unused_provider(name: str, client: ClientConfig) -> LLMProvider:
    return _UnusedProvider()


def test_registry_resolves_deferral_api_and_strictness_per_model() -> None:
    data = _config()
    data["models"] = {
        "sonnet": {"client": "claude", "model": "claude-sonnet-4-5"},
        "fable": {"client": "claude", "model": "claude-fable-5-1"},
        "gpt": {"client": "oai", "model": "gpt-5.4"},
        "old": {"client": "chat", "model": "gpt-5.4"},
        "forced": {"client": "claude", "model": "claude-3-haiku", "deferral": "native", "strict_tools": True},
        "qwen": {"client": "local", "model": "qwen3"},
    }
    registry = ModelRegistry(parse_config(data), factory=_unused_provider)
    resolved = [registry.resolve(n) for n in ("sonnet", "fable", "gpt", "old", "forced", "qwen")]
    got = {r.name: (r.api, r.deferral, r.strict_tools) for r in resolved}
    assert got == {
        "sonnet": ("messages", "native", False),
        "fable": ("messages", "native", True),
        "gpt": ("responses", "native", False),
        "old": ("chat_completions", "append", False),
        "forced": ("messages", "native", True),
        "qwen": ("chat_completions", "append", False),
    }


def test_config_defaults_are_auto_cache_on_our_search() -> None:
    model = parse_config(_config()).models["m"]
    assert (model.deferral, model.prompt_cache, model.search, model.strict_tools) == (
        "auto",
        True,
        "ours",
        None,
    )
    assert parse_config(_config()).clients["chat"].api == "chat_completions"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"clients": {"c": {"provider": "ollama", "api": "responses"}}},
            "clients.c: api 'responses' is only for provider 'openai'",
        ),
        (
            {"clients": {"c": {"provider": "anthropic", "api": "responses"}}},
            "clients.c: api 'responses' is only for provider 'openai'",
        ),
        (
            {"model": {"client": "chat", "deferral": "native"}},
            "models.m.deferral: 'native' needs a client with native tool search",
        ),
        ({"model": {"client": "local", "deferral": "native"}}, "models.m.deferral: 'native' needs"),
        (
            {"model": {"client": "oai", "search": "provider"}},
            "models.m.search: 'provider' (Anthropic's own tool search) needs",
        ),
        (
            {"model": {"search": "provider", "deferral": "append"}},
            "models.m.search: 'provider' needs deferral",
        ),
        (
            {"model": {"search": "provider", "deferral": "stable"}},
            "models.m.search: 'provider' needs deferral 'native' or 'auto', not 'stable'",
        ),
        (
            {"model": {"deferral": "sometimes"}},
            "models.m.deferral: Input should be 'auto', 'native', 'append' or 'stable'",
        ),
        (
            {"toolscout": {"orchestrator": {"native_deferral_models": ["gpt-(5"]}}},
            "toolscout.orchestrator.native_deferral_models: 'gpt-(5' is not a valid regular expression",
        ),
    ],
)
def test_bad_deferral_settings_fail_at_load_naming_the_key(change: dict[str, object], expected: str) -> None:
    data = _config(**change.pop("model", {}))  # type: ignore[arg-type]
    clients = change.pop("clients", {})
    data["clients"] = {**data["clients"], **clients}  # type: ignore[dict-item]
    data.update(change)
    with pytest.raises(ConfigError) as err:
        parse_config(data, source="c.json")
    assert f"c.json: {expected}" in str(err.value)


# --- limits ----------------------------------------------------------------------------------


def _tool(name: str, *, deferred: bool = True) -> tuple[Tool, bool]:
    return Tool(
        "srv", name, name, description=f"{name} tool", input_schema_json='{"type":"object","properties":{}}'
    ), deferred


def _native(tools: list[tuple[Tool, bool]], messages: list[Message] | None = None) -> LLMRequest:
    declared = frozenset(t.llm_name for t, deferred in tools if deferred)
    sent = [t for t, _ in tools]
    return LLMRequest(
        "m", "", messages or [Message("user", "hi")], sent, deferral="native", deferred=declared
    )


def _reason(request: LLMRequest, api: ProviderApi = "messages") -> str:
    problem = native_limit_problem(request, api)
    return "" if problem is None else f"{problem.reason}: {problem.detail}"


def test_limits_accept_a_normal_native_request() -> None:
    assert (
        native_limit_problem(_native([_tool("search_tools", deferred=False), _tool("a")]), "messages") is None
    )


def test_limits_report_every_tool_deferred() -> None:
    assert _reason(_native([_tool("a"), _tool("b")])).startswith("no_eager_tool")


def test_limits_report_more_than_ten_thousand_deferred_tools() -> None:
    tools = [_tool("search_tools", deferred=False)] + [_tool(f"t{i}") for i in range(MAX_DEFERRED_TOOLS + 1)]
    assert _reason(_native(tools)).startswith("too_many_deferred")
    assert _reason(_native(tools[:-1])) == ""


def test_limits_report_a_reference_to_a_tool_not_declared() -> None:
    history = [Message("user", "hi"), Message("tool", "found", tool_call_id="s1", loaded_tools=["a", "gone"])]
    request = _native([_tool("search_tools", deferred=False), _tool("a")], history)
    assert _reason(request, "responses") == "unknown_reference: referenced tools not in tools: gone"


def test_limits_report_a_request_past_32_megabytes() -> None:
    big = Message("user", "x" * (33 * 1024 * 1024))
    assert _reason(_native([_tool("search_tools", deferred=False)], [big])).startswith("too_large")


# --- neutral types ---------------------------------------------------------------------------


def test_native_items_round_trip_through_json() -> None:
    item = NativeItem("anthropic", {"type": "server_tool_use", "id": "srvtoolu_1", "input": {"query": "x"}})
    assert NativeItem.from_json(item.to_json()) == item
    assert item.type == "server_tool_use"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{", "not valid JSON"),
        ("[]", "must be a JSON object"),
        ('{"provider": "gemini", "item": {"type": "x"}}', "unknown provider 'gemini'"),
        ('{"provider": "anthropic", "item": {"id": 1}}', "string 'type'"),
    ],
)
def test_malformed_native_items_are_refused(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        NativeItem.from_json(text)


def test_usage_adds_cache_writes_apart_from_reads() -> None:
    total = Usage(10, 1, 4, 2)
    total.add(Usage(5, 1, 0, 3))
    assert (total.input_tokens, total.cached_input_tokens, total.cache_write_tokens) == (15, 4, 5)


def test_the_loaded_set_comes_from_search_results_and_server_search_blocks() -> None:
    server_result = {
        "type": "tool_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": {
            "type": "tool_search_tool_search_result",
            "tool_references": [{"type": "tool_reference", "tool_name": "c"}],
        },
    }
    history = [
        Message("user", "hi"),
        Message("tool", "found", tool_call_id="s1", loaded_tools=["a", "b"]),
        Message("assistant", "", native_items=[NativeItem("anthropic", server_result)]),
        Message("tool", "again", tool_call_id="s2", loaded_tools=["a"]),
    ]
    assert history_loaded_tools(history) == ["a", "b", "c", "a"]
