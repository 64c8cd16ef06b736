"""Every model's system prompt template is loaded when the stack starts, not at its first chat."""

from __future__ import annotations

from pathlib import Path

import pytest
from toolscout.client import Tool

from orchestrator_svc.prompts import SystemPrompts, check_templates
from tests.support.mcp_servers import REPO_ROOT
from toolscout_kit.config import ToolscoutConfig, load_config, parse_config
from toolscout_kit.errors import ConfigError

EXAMPLE_CONFIG = REPO_ROOT / "examples" / "casual_mcp_config.json"


def test_the_example_configs_templates_all_load() -> None:
    config = load_config(EXAMPLE_CONFIG)
    assert any(model.template for model in config.models.values())
    check_templates(config)


def test_the_shipped_default_template_lists_the_tools_and_explains_search_tools() -> None:
    prompts = SystemPrompts(EXAMPLE_CONFIG.parent / "prompt-templates")
    tools = [
        Tool(
            "time",
            "get_current_time",
            "time__get_current_time",
            description="Get current time in a specific timezone",
        ),
        Tool("", "search_tools", "search_tools", description="Search the deferred tools."),
    ]
    text = prompts.resolve(explicit="", template="default", tools=tools)
    assert "- time__get_current_time (time): Get current time in a specific timezone" in text
    assert "call search_tools" in text
    assert "search_tools" not in prompts.resolve(explicit="", template="default", tools=tools[:1])


def _config(tmp_path: Path, **templates: str) -> ToolscoutConfig:
    models = {
        name: {"client": "c", "model": "m", "template": template} for name, template in templates.items()
    }
    return parse_config(
        {
            "clients": {"c": {"provider": "openai"}},
            "models": models,
            "toolscout": {"orchestrator": {"templates_dir": "t"}},
        },
        base_dir=tmp_path,
    )


def test_a_missing_or_broken_template_is_a_config_error_naming_each_model(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "broken.j2").write_text("{% if %}")
    (tmp_path / "t" / "good.j2").write_text("Hello {{ tools | length }}")
    with pytest.raises(ConfigError) as err:
        check_templates(_config(tmp_path, a="good", b="gone", c="broken"))
    lines = err.value.message.splitlines()
    assert [line.split(":")[0] for line in lines] == ["models.b.template", "models.c.template"]
    assert "'gone' not found" in lines[0]
    assert "'broken' is invalid" in lines[1]
