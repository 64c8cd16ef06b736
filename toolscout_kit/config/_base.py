"""What every config section is built from: strict models, strict booleans, service basics."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

__all__ = ["AtLeastOne", "Flag", "Seconds", "ServiceSettings", "Strict", "check_result_budget"]


def _flag(value: Any) -> Any:
    """A boolean is JSON ``true``/``false``; "yes", 1 or "on" are mistakes, not ``true``. The strings
    "true"/"false" are accepted because that is what ``${VAR}`` expands to."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError(f"expected true or false, not {value!r}")


# Every boolean setting: strict, so that a typo does not silently mean true.
Flag = Annotated[bool, BeforeValidator(_flag)]
# A timeout, interval or backoff: seconds, more than zero.
Seconds = Annotated[float, Field(gt=0)]
# A count of things allowed at once (concurrency, restarts, sessions): at least one.
AtLeastOne = Annotated[int, Field(ge=1)]


class Strict(BaseModel):
    # Unknown keys are errors so that a typo ("defer_loadng") is reported instead of ignored.
    model_config = ConfigDict(extra="forbid", frozen=True)


class ServiceSettings(Strict):
    listen: str
    # Prometheus metrics HTTP port (0 = pick a free one, -1 = off).
    metrics_port: int = Field(ge=-1, le=65535)
    metrics_host: str = "127.0.0.1"
    # Seconds in-flight RPCs get to finish on SIGTERM.
    shutdown_grace: float = Field(default=10.0, ge=0)


def check_result_budget(tokens: int) -> int:
    # The pool's smallest budget (toolscout_kit.shaping.MIN_BUDGET_TOKENS).
    if 0 < tokens < 100:
        raise ValueError("a result budget is 0 (no shaping) or at least 100 tokens")
    return tokens
