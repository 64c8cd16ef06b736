"""Logs never carry secrets, but keep ordinary fields such as token counts."""

from __future__ import annotations

import contextvars
import json
import subprocess
import sys

import pytest

from toolscout_kit.logging import (
    begin_request,
    bind_request_context,
    clear_request_context,
    configure_logging,
    current_request,
    end_request,
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


def test_a_request_bound_without_an_id_gets_one_per_request_on_its_first_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging("INFO")
    ids = []
    for _ in range(2):
        token = begin_request("", "/toolscout.mcp_pool.v1.McpPool/CallTool")
        try:
            get_logger("test").info("first")
            get_logger("test").info("second", request_id_count=1)
        finally:
            end_request(token)
        lines = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()[-2:]]
        assert lines[0]["request_id"] == lines[1]["request_id"] != ""
        assert lines[0]["rpc"] == "/toolscout.mcp_pool.v1.McpPool/CallTool"
        ids.append(lines[0]["request_id"])
    assert ids[0] != ids[1]
    token = begin_request("from-the-caller", "/x.Y/Z")
    try:
        get_logger("test").info("given")
    finally:
        end_request(token)
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["request_id"] == "from-the-caller"
    get_logger("test").info("outside")
    assert "request_id" not in json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_a_request_context_bound_inside_an_rpc_wins_over_the_rpcs(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("INFO")
    token = begin_request("the-stream", "/toolscout.mcp_pool.v1.McpPool/CallToolStream")
    try:
        bind_request_context(request_id="one-call", rpc="/toolscout.mcp_pool.v1.McpPool/CallTool")
        get_logger("test").info("bound")
    finally:
        clear_request_context()
        end_request(token)
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (line["request_id"], line["rpc"]) == ("one-call", "/toolscout.mcp_pool.v1.McpPool/CallTool")


def test_a_line_below_the_configured_level_is_dropped_and_one_at_it_is_written(
    capsys: pytest.CaptureFixture[str],
) -> None:
    try:
        configure_logging("INFO")
        get_logger("test").debug("dropped")
        get_logger("test").info("kept", n=1)
        configure_logging("DEBUG")
        get_logger("test").debug("now kept")
    finally:
        configure_logging("INFO")
    events = [json.loads(line)["event"] for line in capsys.readouterr().out.strip().splitlines()]
    assert events[-2:] == ["kept", "now kept"]
    assert "dropped" not in events


def test_a_request_ended_in_another_context_than_it_began_is_unbound_there_without_an_error() -> None:
    """gRPC may close a stream's generator (its interceptors' end) in another context than the one
    that began it, e.g. when shutdown cuts the stream: that must not raise."""
    token = contextvars.copy_context().run(begin_request, "r-1", "/svc/Method")
    other = contextvars.copy_context()
    other.run(end_request, token)  # a token of another context: no ValueError
    assert other.run(current_request) is None


_LIBRARY_LINES = """
import logging
from toolscout_kit.logging import configure_logging
configure_logging("INFO")
try:
    raise RuntimeError("read failed at ipv4:127.0.0.1:5000\\nwith Bearer abcdefghijklmnopqrstuvwxyz0123")
except RuntimeError:
    logging.getLogger("mcp.client.streamable_http").exception("Error parsing SSE message")
logging.getLogger("uvicorn.error").error("Cancel %s running task(s)", 2)
logging.getLogger("httpx").info("below the libraries' level")
"""


def test_a_librarys_lines_are_one_line_each_naming_an_exception_without_its_traceback() -> None:
    # A process of its own: logging is configured once per process (pytest's own handlers sit on
    # the root logger here).
    done = subprocess.run(
        [sys.executable, "-c", _LIBRARY_LINES], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stderr.splitlines() == [
        "mcp.client.streamable_http: Error parsing SSE message (RuntimeError: read failed at with Bearer "
        "[REDACTED])",
        "uvicorn.error: Cancel 2 running task(s)",
    ]
