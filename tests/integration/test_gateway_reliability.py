"""The gateway under an attacker's and a careless user's input (issue 30): real pool, discovery and
MCP server processes on 127.0.0.1:0, the gateway's real HTTP server in front, raw HTTP for the bytes
no SDK would send."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from tests.support.gateway import gateway_stack, post
from tests.support.mcp_servers import example_server_config
from toolscout_kit.config import ToolscoutConfig, parse_config

_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}


def _config(tmp: Path, **gateway: Any) -> ToolscoutConfig:
    return parse_config(
        {
            "servers": {
                "text": example_server_config("text"),
                "notes": example_server_config("notes", defer_loading=True),
            },
            "tool_discovery": {"enabled": True},
            "tool_sets": {"team_b": {"servers": {"notes": True}}},
            "toolscout": {"gateway": gateway},
        },
        base_dir=tmp,
    )


# --- 1. closed when the stack is closed ----------------------------------------------------------


async def test_with_the_services_token_set_and_no_gateway_tokens_the_gateway_asks_for_that_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLSCOUT_AUTH_TOKEN", "services-secret-token-01")
    async with gateway_stack(_config(tmp_path)) as gw:
        anonymous = await post(gw.url, _LIST, modern=True)
        wrong = await post(gw.url, _LIST, modern=True, headers={"authorization": "Bearer nope"})
        good = await post(
            gw.url + "/team_b",
            _LIST,
            modern=True,
            headers={"authorization": "Bearer services-secret-token-01"},
        )
    assert anonymous.status_code == 401
    assert wrong.status_code == 401
    assert good.status_code == 200, good.text
    # Lists are private to the authorization context now that tokens are on.
    assert good.json()["result"]["cacheScope"] == "private"


async def test_allow_anonymous_keeps_the_gateway_open_beside_closed_services(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLSCOUT_AUTH_TOKEN", "services-secret-token-01")
    async with gateway_stack(_config(tmp_path, allow_anonymous=True)) as gw:
        anonymous = await post(gw.url, _LIST, modern=True)
    assert anonymous.status_code == 200
    assert types.JSONRPCResponse.model_validate(anonymous.json()).result["tools"]
