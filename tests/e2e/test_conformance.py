"""The official MCP conformance suite through the gateway (tests/support/conformance.py).

The suite (0.1.16 at revision 2025-11-25, 0.2.0-alpha.12 at 2026-07-28) runs once per module
against the reference server directly, then through a real ``toolscout up`` fronting it as its only
server (``namespace_tools: false``) in ``all`` and ``meta`` mode. Of the scenarios passing directly,
each one that does not pass through the gateway (or passes hollowly, with a tool result unlike the
server's) must be listed below with its reason, and each one listed must still fail: a regression
and an unnoticed fix both fail the test, so the list is always the truth (issue 29 tracks it).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.conformance import MODES, SUITE_VERSIONS, ConformanceRun, conformance_run

pytestmark = pytest.mark.e2e

_COMMON_LOST: dict[str, str] = {}
_LOST_2025: dict[str, str] = {**_COMMON_LOST}

# (revision, mode) -> scenario passing directly that does not pass through the gateway -> why.
EXPECTED_LOST: dict[tuple[str, str], dict[str, str]] = {
    ("2025-11-25", "all"): _LOST_2025,
    # Meta mode lists search_tools and call_tool, yet calls a tool by its own name too.
    ("2025-11-25", "meta"): _LOST_2025,
    ("2026-07-28", "all"): _COMMON_LOST,
    ("2026-07-28", "meta"): _COMMON_LOST,
}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> ConformanceRun:
    return conformance_run(Path(tmp_path_factory.mktemp("conformance")))


@pytest.mark.timeout(400)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("revision", list(SUITE_VERSIONS))
def test_no_scenario_passing_directly_fails_through_the_gateway_beyond_the_listed_ones(
    run: ConformanceRun, revision: str, mode: str
) -> None:
    expected = EXPECTED_LOST[(revision, mode)]
    lost = run.lost(revision, mode)
    regressed = sorted(lost - set(expected))
    fixed = sorted(set(expected) - lost)
    verdicts = {s: run.verdict(revision, mode, s) for s in regressed}
    assert not regressed, f"pass directly, not through the gateway ({mode}, {revision}): {verdicts}"
    assert not fixed, f"listed as failing but pass now ({mode}, {revision}): take them off the list: {fixed}"


def test_the_reference_server_passes_what_its_revision_lets_it(run: ConformanceRun) -> None:
    # The yardstick itself: every 2025-11-25 scenario; at 2026-07-28 its tool results lack
    # `resultType`, which the suite counts against the tool-call scenarios.
    assert run.passes_directly("2025-11-25") == set(run.direct["2025-11-25"])
    assert len(run.direct["2025-11-25"]) == 30
    failing = set(run.direct["2026-07-28"]) - run.passes_directly("2026-07-28")
    assert failing == {s for s in run.direct["2026-07-28"] if s.startswith("tools-call-")}


@pytest.mark.parametrize("mode", MODES)
def test_results_that_lack_result_type_are_passed_on_and_pass_through_the_gateway(
    run: ConformanceRun, mode: str
) -> None:
    # Directly these fail at 2026-07-28 only for the missing `resultType`; the pool reads them
    # leniently, so through the gateway (which answers with a complete result) they pass.
    lenient = {
        "tools-call-audio",
        "tools-call-embedded-resource",
        "tools-call-error",
        "tools-call-image",
        "tools-call-mixed-content",
        "tools-call-simple-text",
    }
    assert {s: run.verdict("2026-07-28", mode, s) for s in lenient} == dict.fromkeys(lenient, "pass")
    # Said once for the server, however many such results passed.
    assert run.gateway_output.count("mcp_server_result_incomplete") == 1


def test_the_whole_run_through_the_gateway_logs_no_traceback(run: ConformanceRun) -> None:
    # The libraries' own lines too (the MCP SDK's client logged one when a session it had closed
    # still got an event): one line each, an exception named after the message.
    at = run.gateway_output.find("Traceback")
    assert at < 0, run.gateway_output[max(at - 500, 0) : at + 2000]
