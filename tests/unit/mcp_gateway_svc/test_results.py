"""Kept results for MCP hosts: the URIs the gateway serves, and each host's budget."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from mcp_gateway_svc.results import handle_of_uri, result_link
from toolscout_kit.config import GatewaySettings


def test_a_result_link_names_a_uri_the_gateway_reads_back() -> None:
    link = result_link("r1-AbC_d", "logs/tail")
    assert str(link.uri) == "toolscout://results/r1-AbC_d"
    assert handle_of_uri(str(link.uri)) == ("r1-AbC_d", 0)
    assert handle_of_uri("toolscout://results/r1-AbC_d?offset=4000") == ("r1-AbC_d", 4000)


@pytest.mark.parametrize(
    "uri",
    [
        "file:///etc/passwd",
        "toolscout://results/",
        "toolscout://results/a/b",
        "toolscout://results/r0-x?offset=-5",
        "toolscout://other/r0-x",
    ],
)
def test_any_other_uri_is_not_a_kept_result(uri: str) -> None:
    assert handle_of_uri(uri) is None


def test_a_host_gets_the_budget_of_the_first_glob_matching_its_name() -> None:
    settings = GatewaySettings(result_budgets={"claude-code*": 25_000, "cursor": 0})
    assert settings.result_budget_for("claude-code") == 25_000
    assert settings.result_budget_for("cursor") == 0
    assert settings.result_budget_for("unknown-host") == settings.result_budget == 20_000


@pytest.mark.parametrize("budgets", [{"result_budget": 50}, {"result_budgets": {"x": 99}}])
def test_a_budget_below_the_pools_minimum_is_refused(budgets: dict[str, object]) -> None:
    with pytest.raises(ValidationError, match="at least 100 tokens"):
        GatewaySettings.model_validate(budgets)
