"""System prompts: explicit, template, default; template errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from toolscout.client import Tool

from orchestrator_svc.errors import TemplateError
from orchestrator_svc.prompts import DEFAULT_SYSTEM_PROMPT, SystemPrompts

TOOLS = [Tool("a", "b", "a_b", description="does b", input_schema_json='{"type": "object"}')]


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
