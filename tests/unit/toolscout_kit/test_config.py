"""The config loader: casual-mcp's file unchanged, env expansion, and clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from toolscout.client import Deferral, GatewayMode

from toolscout_kit.config import (
    ExcludeSpec,
    RemoteServerConfig,
    StdioServerConfig,
    load_config,
    parse_config,
    resolve_config_path,
)
from toolscout_kit.errors import ConfigError

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

CASUAL_MCP_EXAMPLE = {
    "clients": {
        "openai": {"provider": "openai"},
        "ollama": {"provider": "ollama", "base_url": "http://localhost:11434"},
    },
    "models": {
        "gpt-4.1": {"client": "openai", "model": "gpt-4.1", "template": "default"},
        "qwen": {"client": "ollama", "model": "qwen2.5:7b"},
    },
    "servers": {
        "core-tools": {"command": "python", "args": ["servers/core.py"]},
        "research-tools": {"command": "python", "args": ["servers/research.py"], "defer_loading": True},
        "data-tools": {"url": "http://localhost:9000", "transport": "streamable-http", "defer_loading": True},
        "legacy": {"url": "http://localhost:9001/sse", "transport": "sse"},
        "plain-http": {"url": "http://localhost:9002/mcp", "transport": "http"},
    },
    "tool_sets": {
        "research": {
            "description": "Research tools",
            "servers": {"research-tools": True, "core-tools": {"exclude": ["rm"]}, "data-tools": ["query"]},
        }
    },
    "tool_discovery": {"enabled": True, "defer_all": False, "max_search_results": 5},
}


def _write(tmp_path: Path, data: object, name: str = "casual_mcp_config.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data) if name.endswith(".json") else str(data))
    return path


def test_casual_mcp_config_file_loads_unchanged(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, CASUAL_MCP_EXAMPLE))
    assert isinstance(config.servers["core-tools"], StdioServerConfig)
    assert isinstance(config.servers["data-tools"], RemoteServerConfig)
    assert config.servers["research-tools"].defer_loading is True
    assert config.tool_discovery.enabled
    assert config.tool_discovery.max_search_results == 5
    assert config.tool_sets["research"].servers["core-tools"] == ExcludeSpec(exclude=["rm"])
    assert config.models["qwen"].client == "ollama"
    assert config.base_dir == tmp_path


def test_remote_transports_resolve_like_casual_mcp(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, CASUAL_MCP_EXAMPLE))
    resolved = {
        n: s.resolved_transport for n, s in config.servers.items() if isinstance(s, RemoteServerConfig)
    }
    assert resolved == {"data-tools": "streamable-http", "legacy": "sse", "plain-http": "streamable-http"}


def test_example_config_in_repository_loads() -> None:
    config = load_config(EXAMPLES / "casual_mcp_config.json")
    assert config.servers
    assert config.tool_discovery.enabled


def test_yaml_config_loads(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "servers:\n  time:\n    command: uvx\n    args: [mcp-server-time]\n    defer_loading: true\n"
    )
    config = load_config(path)
    assert config.servers["time"].defer_loading


def test_environment_variables_expand_with_defaults(tmp_path: Path) -> None:
    data = {
        "clients": {"local": {"provider": "openai", "base_url": "${TS_TEST_URL:-http://localhost:1234/v1}"}},
        "servers": {"s": {"command": "${TS_TEST_CMD}", "env": {"TOKEN": "${TS_TEST_CMD}"}}},
    }
    config = parse_config(data, env={"TS_TEST_CMD": "my-server"})
    assert config.clients["local"].base_url == "http://localhost:1234/v1"
    server = config.servers["s"]
    assert isinstance(server, StdioServerConfig)
    assert server.command == "my-server"
    assert server.env == {"TOKEN": "my-server"}


def test_missing_environment_variable_names_the_key_path() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({"servers": {"s": {"command": "x", "args": ["${TS_NOT_SET}"]}}}, source="f.json", env={})
    assert err.value.message == "f.json: servers.s.args[0]: environment variable ${TS_NOT_SET} is not set"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            {"servers": {"a": {"command": "x", "defer_loadng": True}}},
            "servers.a: unknown key 'defer_loadng' (closest: defer_loading)",
        ),
        ({"servers": {"a": {"url": "ftp://x"}}}, "servers.a.url: String should match pattern"),
        (
            {"servers": {"a": {"url": "http://x", "transport": "grpc"}}},
            "servers.a.transport: Input should be",
        ),
        ({"servers": {"a": {"command": ""}}}, "servers.a.command: String should have at least 1 character"),
        ({"models": {"m": {"client": "nope", "model": "x"}}}, "models.m.client: unknown client 'nope'"),
        ({"tool_sets": {"t": {"servers": {"zz": True}}}}, "tool_sets.t.servers.zz: unknown server 'zz'"),
        ({"clients": {"c": {"provider": "gemini"}}}, "clients.c.provider: Input should be 'openai'"),
        ({"tool_discovery": {"max_search_results": 0}}, "tool_discovery.max_search_results: Input should be"),
        ({"toolscout": {"pool": {"bogus": 1}}}, "toolscout.pool: unknown key 'bogus' (keys: blip_grace, "),
        (
            {"toolscout": {"security": {"tls_cert_file": "c.pem"}}},
            "tls_cert_file and tls_key_file must be set",
        ),
        ([1, 2], "the top level must be an object"),
    ],
)
def test_each_kind_of_bad_config_names_file_path_and_problem(data: object, expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(data, source="bad.json", env={})
    assert err.value.message.startswith("bad.json: ")
    assert expected in err.value.message


def test_invalid_json_reports_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text('{\n  "servers": {,}\n}')
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert f"{path}: invalid JSON at line 2" in err.value.message


def test_invalid_yaml_reports_line(tmp_path: Path) -> None:
    path = tmp_path / "c.yml"
    path.write_text("servers:\n  a: [unclosed\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert f"{path}: invalid YAML at line" in err.value.message


def test_config_path_comes_from_argument_or_environment_not_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, CASUAL_MCP_EXAMPLE)
    monkeypatch.delenv("TOOLSCOUT_CONFIG", raising=False)
    with pytest.raises(ConfigError, match="pass --config PATH or set TOOLSCOUT_CONFIG"):
        resolve_config_path(None)
    monkeypatch.setenv("TOOLSCOUT_CONFIG", str(tmp_path / "casual_mcp_config.json"))
    assert resolve_config_path(None) == tmp_path / "casual_mcp_config.json"


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="configuration file not found"):
        load_config(tmp_path / "nope.json")


def test_relative_paths_resolve_against_the_config_folder(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, CASUAL_MCP_EXAMPLE))
    assert config.resolve_path("servers/core.py") == tmp_path / "servers/core.py"
    assert config.resolve_path("/abs/x") == Path("/abs/x")


def test_mcp_tool_cache_ttl_is_honoured_as_in_casual_mcp() -> None:
    assert parse_config({}, env={}).toolscout.pool.effective_tool_cache_ttl == 30.0
    assert parse_config({}, env={"MCP_TOOL_CACHE_TTL": "5"}).toolscout.pool.effective_tool_cache_ttl == 5.0
    assert parse_config({}, env={"MCP_TOOL_CACHE_TTL": "-1"}).toolscout.pool.effective_tool_cache_ttl == 0.0
    with pytest.raises(ConfigError, match="MCP_TOOL_CACHE_TTL"):
        parse_config({}, env={"MCP_TOOL_CACHE_TTL": "soon"})


def test_environment_overrides_are_resolved_once_when_the_config_loads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MCP_TOOL_CACHE_TTL", "5")
    monkeypatch.setenv("TOOL_RESULT_FORMAT", "function_result")
    config = parse_config({})
    monkeypatch.setenv("MCP_TOOL_CACHE_TTL", "soon")
    monkeypatch.delenv("TOOL_RESULT_FORMAT")
    assert config.toolscout.pool.effective_tool_cache_ttl == 5.0
    assert config.toolscout.orchestrator.result_format == "function_result"


def test_a_configured_tool_cache_ttl_wins_over_the_environment() -> None:
    config = parse_config({"toolscout": {"pool": {"tool_cache_ttl": 7}}}, env={"MCP_TOOL_CACHE_TTL": "5"})
    assert config.toolscout.pool.effective_tool_cache_ttl == 7.0


def test_result_format_default_comes_from_env_then_config() -> None:
    configured = {"toolscout": {"orchestrator": {"tool_result_format": "function_result"}}}
    assert parse_config({}, env={}).toolscout.orchestrator.result_format == "result"
    assert parse_config(configured, env={}).toolscout.orchestrator.result_format == "function_result"
    env = {"TOOL_RESULT_FORMAT": "function_args_result"}
    assert parse_config(configured, env=env).toolscout.orchestrator.result_format == "function_args_result"
    with pytest.raises(ConfigError, match="TOOL_RESULT_FORMAT"):
        parse_config({}, env={"TOOL_RESULT_FORMAT": "xml"})


def test_api_key_is_never_shown_in_repr() -> None:
    config = parse_config({"clients": {"c": {"provider": "openai", "api_key": "sk-very-secret-value"}}})
    assert "sk-very-secret-value" not in repr(config)


def test_search_defaults_to_bm25_with_the_local_embedder_and_no_cache() -> None:
    search = parse_config({}, env={}).toolscout.search
    assert (search.mode, search.embedder.type, search.cache_dir, search.min_similarity) == (
        "bm25",
        "local",
        None,
        None,
    )


def test_an_embedder_can_be_named_or_described() -> None:
    named = parse_config({"toolscout": {"search": {"mode": "hybrid", "embedder": "local"}}}, env={})
    assert named.toolscout.search.embedder.type == "local"
    remote = parse_config(
        {
            "toolscout": {
                "search": {
                    "mode": "hybrid",
                    "cache_dir": "cache/embeddings",
                    "embedder": {
                        "type": "openai-compatible",
                        "base_url": "http://127.0.0.1:11434/v1",
                        "model": "nomic-embed-text",
                        "api_key_env": "EMBED_KEY",
                        "batch_size": 32,
                        "query_timeout": 0.5,
                        "query_prefix": "search_query: ",
                    },
                }
            }
        },
        env={},
    )
    embedder = remote.toolscout.search.embedder
    assert (embedder.model, embedder.batch_size, embedder.query_timeout) == ("nomic-embed-text", 32, 0.5)
    assert remote.resolve_path("cache/embeddings") == remote.base_dir / "cache/embeddings"


@pytest.mark.parametrize(
    ("search", "expected"),
    [
        ({"mode": "semantic"}, "toolscout.search.mode: Input should be 'bm25' or 'hybrid'"),
        (
            {"embedder": "remote"},
            "toolscout.search.embedder.type: Input should be 'local' or 'openai-compatible'",
        ),
        ({"embedder": {"type": "openai-compatible"}}, "type 'openai-compatible' needs base_url and model"),
        ({"embedder": {"model": "e5"}}, "model: only for type 'openai-compatible'"),
        ({"embedder": {"type": "openai-compatible", "base_url": "ftp://x", "model": "m"}}, "base_url"),
        ({"embedder": {"query_timeout": 0}}, "query_timeout: Input should be greater than 0"),
        ({"min_similarity": 2}, "min_similarity: Input should be less than or equal to 1"),
        (
            {"cache": "x"},
            "toolscout.search: unknown key 'cache' (keys: cache_dir, embedder, min_similarity, mode)",
        ),
    ],
)
def test_bad_search_settings_name_the_key_and_the_problem(search: dict[str, object], expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({"toolscout": {"search": search}}, source="bad.json", env={})
    assert expected in err.value.message


def test_gateway_settings_default_to_a_local_meta_endpoint_and_check_toolsets_and_token_names() -> None:
    from toolscout_kit.config import parse_config

    gateway = parse_config({}).toolscout.gateway
    assert (gateway.listen, gateway.metrics_port, gateway.mode, gateway.tokens) == (
        "127.0.0.1:50054",
        9104,
        "meta",
        {},
    )
    assert gateway.mode_for("anything") == "meta"
    with pytest.raises(ConfigError) as bad:
        parse_config(
            {
                "tool_sets": {"a": {}},
                "toolscout": {
                    "gateway": {"modes": {"b": "all"}, "default_toolset": "c", "tokens": {"T": ["a", "d"]}}
                },
            }
        )
    assert bad.value.message.splitlines() == [
        "<config>: toolscout.gateway.modes.b: unknown toolset 'b' (tool_sets: a)",
        "<config>: toolscout.gateway.default_toolset: unknown toolset 'c' (tool_sets: a)",
        "<config>: toolscout.gateway.tokens.T: unknown toolset 'd' (tool_sets: a, or '*')",
    ]
    with pytest.raises(ConfigError, match="the name of an environment variable"):
        parse_config({"toolscout": {"gateway": {"tokens": {"not a name": ["*"]}}}})
    with pytest.raises(ConfigError, match="mode"):
        parse_config({"toolscout": {"gateway": {"mode": "lazy"}}})


def test_modes_parse_into_the_client_librarys_enums_and_unknown_ones_list_the_choices() -> None:
    config = parse_config(
        {
            "clients": {"c": {"provider": "openai"}},
            "models": {"m": {"client": "c", "model": "x", "deferral": "stable"}},
            "tool_sets": {"a": {"servers": {}}},
            "toolscout": {"gateway": {"mode": "progressive", "modes": {"a": "all"}}},
        }
    )
    assert config.models["m"].deferral is Deferral.STABLE
    assert parse_config({"clients": {}}).toolscout.gateway.mode is GatewayMode.META
    gateway = config.toolscout.gateway
    assert (gateway.mode, gateway.mode_for("a")) == (GatewayMode.PROGRESSIVE, GatewayMode.ALL)
    assert all(isinstance(m, GatewayMode) for m in gateway.client_modes.values())
    with pytest.raises(ConfigError, match=r"gateway\.mode: Input should be 'meta', 'progressive' or 'all'"):
        parse_config({"toolscout": {"gateway": {"mode": "lazy"}}})


def test_keys_casual_mcp_ignores_are_accepted_with_a_warning_naming_each() -> None:
    config = parse_config(
        {
            "$schema": "https://example.com/casual_mcp_config.schema.json",
            "servers": {"s": {"command": "x", "notes": "ours, for people", "comment": "not command"}},
            "models": {"m": {"client": "c", "model": "x", "comment": "cheap one"}},
            "clients": {"c": {"provider": "openai"}},
        },
        source="c.json",
        env={},
    )
    assert config.load_warnings == (
        "c.json: $schema: not a key toolscout knows: ignored, as casual-mcp does",
        "c.json: servers.s.notes: not a key toolscout knows: ignored, as casual-mcp does",
        "c.json: servers.s.comment: not a key toolscout knows: ignored, as casual-mcp does",
        "c.json: models.m.comment: not a key toolscout knows: ignored, as casual-mcp does",
    )
    assert "notes" not in config.servers["s"].model_dump()


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            {"tool_discovery": {"enabld": True}},
            "c.json: tool_discovery: unknown key 'enabld' (closest: enabled)",
        ),
        ({"severs": {}}, "c.json: <root>: unknown key 'severs' (closest: servers)"),
        (
            {"clients": {"c": {"provider": "openai", "base_ur": "http://x"}}},
            "c.json: clients.c: unknown key 'base_ur' (closest: base_url)",
        ),
        (
            {"servers": {"s": {"url": "http://x/mcp", "header": {}}}},
            "c.json: servers.s: unknown key 'header' (closest: headers)",
        ),
        (
            {"servers": {"s": {"command": "x"}}, "tool_sets": {"t": {"servers": {"s": {"exclud": ["a"]}}}}},
            "c.json: tool_sets.t.servers.s: unknown key 'exclud' (closest: exclude)",
        ),
        ({"toolscout": {"poll": {}}}, "c.json: toolscout: unknown key 'poll' (closest: pool)"),
    ],
)
def test_an_unknown_key_like_a_known_one_is_an_error_naming_the_closest_keys(
    data: dict[str, object], expected: str
) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(data, source="c.json", env={})
    assert err.value.message == expected


@pytest.mark.parametrize(
    ("configured", "env", "expected"),
    [("hybrid", "bm25", "bm25"), ("bm25", "hybrid", "hybrid"), ("hybrid", "", "hybrid")],
)
def test_toolscout_search_mode_replaces_the_configured_search_mode(
    configured: str, env: str, expected: str
) -> None:
    config = parse_config({"toolscout": {"search": {"mode": configured}}}, env={"TOOLSCOUT_SEARCH_MODE": env})
    assert config.toolscout.search.mode == expected


def test_a_bad_toolscout_search_mode_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({}, env={"TOOLSCOUT_SEARCH_MODE": "semantic"})
    assert err.value.message == "TOOLSCOUT_SEARCH_MODE: expected bm25 or hybrid, got 'semantic'"


def test_namespace_tools_is_top_level_with_a_per_server_override() -> None:
    config = parse_config(
        {
            "namespace_tools": False,
            "servers": {"a": {"command": "x"}, "b": {"command": "x", "namespace_tools": True}},
        }
    )
    assert not config.namespaced("a")
    assert config.namespaced("b")
    assert parse_config({"servers": {"a": {"command": "x"}}}).namespaced("a")


def test_bare_tool_names_on_a_sharded_pool_are_a_config_error_naming_the_servers() -> None:
    data = {
        "namespace_tools": False,
        "servers": {"a": {"command": "x"}},
        "toolscout": {"pool": {"shards": {"count": 2}}},
    }
    with pytest.raises(ConfigError, match=r"namespace_tools: false \(servers a\) needs an unsharded pool"):
        parse_config(data)


def test_every_section_model_is_imported_from_the_package_itself() -> None:
    import importlib
    import pkgutil

    from pydantic import BaseModel

    import toolscout_kit.config as package

    exported = set(package.__all__)
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for name in getattr(module, "__all__", ()):
            value = getattr(module, name)
            if isinstance(value, type) and issubclass(value, BaseModel) and not info.name.startswith("_"):
                assert name in exported, f"{info.name}.{name} is not re-exported by toolscout_kit.config"
    assert all(getattr(package, name) is not None for name in exported)
