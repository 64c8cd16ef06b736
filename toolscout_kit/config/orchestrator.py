"""``toolscout.orchestrator``: the orchestrator service's tool loop."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from toolscout_kit.config._base import ServiceSettings

__all__ = ["RESULT_FORMATS", "OrchestratorSettings", "ResultFormat"]

ResultFormat = Literal["result", "function_result", "function_args_result"]
RESULT_FORMATS: tuple[ResultFormat, ...] = ("result", "function_result", "function_args_result")


class OrchestratorSettings(ServiceSettings):
    listen: str = "127.0.0.1:50053"
    metrics_port: int = Field(default=9103, ge=-1, le=65535)
    pool_target: str = "127.0.0.1:50051"
    discovery_target: str = "127.0.0.1:50052"
    max_iterations: int = Field(default=50, ge=1, le=1000)
    # casual-mcp's TOOL_RESULT_FORMAT environment variable wins over this when the config loads.
    tool_result_format: ResultFormat | None = None
    # Tool result text longer than this is cut with a visible marker before reaching the LLM.
    max_tool_result_chars: int = Field(default=50_000, ge=256)
    default_system_prompt: str | None = None
    # Folder of Jinja2 system prompt templates (<name>.j2); relative to the config file.
    templates_dir: str = "prompt-templates"
    # Regular expressions (searched in the model id, case-insensitive) of models that support
    # native deferral beyond the built-in table: ``deferral: auto`` resolves to native for them
    # on Anthropic and on OpenAI's Responses API (never on Chat Completions).
    native_deferral_models: list[str] = Field(default_factory=list)
    # Regular expressions of models that reject changes to ``tools`` mid-conversation, beyond
    # the built-in table (e.g. every model, ``".*"``, for Anthropic accounts that enforce it).
    strict_tools_models: list[str] = Field(default_factory=list)

    @field_validator("native_deferral_models", "strict_tools_models")
    @classmethod
    def _patterns_compile(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as err:
                raise ValueError(f"{pattern!r} is not a valid regular expression: {err}") from None
        return patterns

    @property
    def result_format(self) -> ResultFormat:
        """The format of tool results (``TOOL_RESULT_FORMAT`` was applied when the config loaded)."""
        return self.tool_result_format or "result"
