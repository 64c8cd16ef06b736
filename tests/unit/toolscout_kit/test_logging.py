"""Logs never carry secrets, but keep ordinary fields such as token counts."""

from __future__ import annotations

import json

import pytest

from toolscout_kit.logging import (
    bind_request_context,
    clear_request_context,
    configure_logging,
    get_logger,
    redact,
)


def test_bearer_tokens_and_api_keys_in_text_are_masked() -> None:
    text = redact("call failed: Authorization: Bearer abcdefghijklmnop and key sk-proj-abcdefghijklmnopqrstu")
    assert "abcdefghijklmnop" not in text
    assert "sk-proj-abcdefghijklmnopqrstu" not in text
    assert "[REDACTED]" in text


def test_log_lines_are_json_with_request_context_and_redacted_secret_fields(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging("INFO")
    bind_request_context(request_id="r-1", rpc="/toolscout.discovery.v1.Discovery/SearchTools")
    try:
        get_logger("test").info(
            "event", api_key="sk-abcdefghijklmnopqrst", manifest_tokens=1598, auth_token="x"
        )
    finally:
        clear_request_context()
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["request_id"] == "r-1"
    assert line["rpc"] == "/toolscout.discovery.v1.Discovery/SearchTools"
    assert line["api_key"] == "[REDACTED]"
    assert line["auth_token"] == "[REDACTED]"
    assert line["manifest_tokens"] == 1598
