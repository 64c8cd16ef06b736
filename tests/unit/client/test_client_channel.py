"""The channel's service config and options (no socket: channels connect lazily)."""

from __future__ import annotations

import json

import grpc
import grpc.aio
import pytest
from toolscout.client import create_channel, default_channel_options, service_config
from toolscout.client.channel import RETRIED_METHODS, SERVICE_NAMES


def test_service_config_retries_only_unavailable_and_only_methods_without_side_effects() -> None:
    config = service_config()
    default, retried = config["methodConfig"]
    assert default["name"] == [{"service": s} for s in SERVICE_NAMES]
    assert "retryPolicy" not in default
    assert set(SERVICE_NAMES) == {
        "toolscout.mcp_pool.v1.McpPool",
        "toolscout.discovery.v1.Discovery",
        "toolscout.orchestrator.v1.Orchestrator",
    }
    names = {(n["service"].rsplit(".", 1)[-1], n["method"]) for n in retried["name"]}
    assert ("McpPool", "ListTools") in names
    assert ("Discovery", "SearchTools") in names
    assert ("Health", "Check") in names
    policy = retried["retryPolicy"]
    assert policy["retryableStatusCodes"] == ["UNAVAILABLE"]
    assert policy["maxAttempts"] == 5
    assert policy["initialBackoff"].endswith("s")
    assert policy["maxBackoff"].endswith("s")
    assert policy["backoffMultiplier"] > 1


@pytest.mark.parametrize(
    ("service", "method"),
    [("McpPool", "CallTool"), ("Orchestrator", "Chat"), ("Orchestrator", "StreamChat")],
)
def test_calls_with_side_effects_have_no_retry_policy(service: str, method: str) -> None:
    full = next(s for s in SERVICE_NAMES if s.endswith(f".{service}"))
    assert method not in RETRIED_METHODS[full]
    for entry in service_config()["methodConfig"]:
        if "retryPolicy" in entry:
            assert {"service": full, "method": method} not in entry["name"]
            assert {"service": full} not in entry["name"]


def test_service_config_balances_round_robin_and_checks_health() -> None:
    config = service_config()
    assert config["loadBalancingConfig"] == [{"round_robin": {}}]
    assert config["healthCheckConfig"] == {"serviceName": ""}


def test_one_attempt_means_no_retry_policy_and_out_of_range_attempts_are_rejected() -> None:
    assert all("retryPolicy" not in m for m in service_config(max_attempts=1)["methodConfig"])
    for bad in (0, 6):
        with pytest.raises(ValueError, match="max_attempts"):
            service_config(max_attempts=bad)


def test_default_options_carry_the_service_config_keepalive_and_retries() -> None:
    options = dict(default_channel_options())
    assert json.loads(options["grpc.service_config"]) == service_config()
    assert options["grpc.enable_retries"] == 1
    assert options["grpc.keepalive_time_ms"] > 0
    assert options["grpc.keepalive_timeout_ms"] > 0


async def test_create_channel_gives_an_aio_channel_by_default_and_a_sync_one_on_request() -> None:
    channel = create_channel("127.0.0.1:1")
    assert isinstance(channel, grpc.aio.Channel)
    await channel.close()
    sync_channel = create_channel("127.0.0.1:1", aio=False, token="t")
    assert not isinstance(sync_channel, grpc.aio.Channel)
    sync_channel.close()


def test_create_channel_rejects_an_empty_target() -> None:
    with pytest.raises(ValueError, match="target"):
        create_channel("")
