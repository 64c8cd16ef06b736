"""The system prompt: explicit > the model's Jinja2 template > the configured default."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
from toolscout.client import Tool

from orchestrator_svc.errors import TemplateError
from orchestrator_svc.messages import tool_schema
from toolscout_kit.config import ToolscoutConfig
from toolscout_kit.errors import ConfigError

__all__ = ["DEFAULT_SYSTEM_PROMPT", "SystemPrompts", "check_templates"]

DEFAULT_SYSTEM_PROMPT = (
    "You are a helpful assistant. Use the available tools when they help you answer; "
    "if a tool you need is not loaded, use search_tools to find and load it."
)


class SystemPrompts:
    """Renders ``<templates_dir>/<template>.j2`` with the tools actually sent to the model."""

    def __init__(self, templates_dir: Path, default_prompt: str | None = None) -> None:
        self._default = default_prompt or DEFAULT_SYSTEM_PROMPT
        self._dir = templates_dir
        # Prompts are plain text for a model, not HTML: escaping would corrupt them.
        self._env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(templates_dir)),
            autoescape=False,  # noqa: S701
            undefined=jinja2.StrictUndefined,
            keep_trailing_newline=False,
        )

    def load(self, template: str) -> jinja2.Template:
        """The compiled ``<template>.j2``.

        Raises:
            TemplateError: missing, or not valid Jinja2.
        """
        try:
            return self._env.get_template(f"{template}.j2")
        except jinja2.TemplateNotFound:
            raise TemplateError(f"system prompt template {template!r} not found in {self._dir}") from None
        except jinja2.TemplateError as err:
            raise TemplateError(f"system prompt template {template!r} is invalid: {err}") from None

    def resolve(self, *, explicit: str, template: str | None, tools: list[Tool]) -> str:
        """Raises TemplateError when the model's template is missing or fails to render."""
        if explicit:
            return explicit
        if not template:
            return self._default
        compiled = self.load(template)
        try:
            return compiled.render(tools=[_tool_view(t) for t in tools]).strip()
        except jinja2.TemplateError as err:
            raise TemplateError(f"system prompt template {template!r} failed to render: {err}") from None


def _tool_view(tool: Tool) -> dict[str, Any]:
    # casual-mcp templates read tool.name / tool.description / tool.parameters.
    return {
        "name": tool.llm_name,
        "description": tool.description,
        "parameters": tool_schema(tool),
        "server": tool.server,
        "tool": tool.name,
    }


def check_templates(config: ToolscoutConfig) -> None:
    """Loads every model's template once, so that a missing or broken one stops the start-up
    instead of the model's first chat.

    Raises:
        ConfigError: naming each model whose template cannot be loaded.
    """
    settings = config.toolscout.orchestrator
    prompts = SystemPrompts(config.resolve_path(settings.templates_dir))
    problems = []
    for name, model in config.models.items():
        if model.template:
            try:
                prompts.load(model.template)
            except TemplateError as err:
                problems.append(f"models.{name}.template: {err.message}")
    if problems:
        raise ConfigError("\n".join(problems))
