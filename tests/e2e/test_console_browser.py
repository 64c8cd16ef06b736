"""The web console in a real browser (Debian's Chromium driven by Playwright) against a real
`toolscout up`: the example MCP servers as processes, the fake provider speaking OpenAI's wire
format, two gateway tokens (one for every toolset, one for `weather_only`).

The screenshots each test takes go to ``$TOOLSCOUT_CONSOLE_SCREENSHOTS`` (default: the test's
temporary folder); bench/console_pages.py makes the README's with the same page visits.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from playwright import sync_api as playwright_api
from playwright.sync_api import expect

from tests.support.browser import launch_chromium
from tests.support.cli_stack import ThreadedProvider, UpProcess, stack_config
from tests.support.fake_provider import FakeProvider, Reply, ScriptedCall
from tests.support.mcp_servers import REPO_ROOT

pytestmark = pytest.mark.e2e

sys.path.insert(0, str(REPO_ROOT / "bench"))
from console_pages import PAGES, visit_pages  # noqa: E402

ADMIN = "admin-token-for-the-console-test"
TENANT = "tenant-token-for-the-console-test"
WAIT_MS = 30_000  # every wait on the page is bounded by this
expect.set_options(timeout=WAIT_MS)


class Stack:
    def __init__(self, up: UpProcess, fake: FakeProvider, endpoints: dict[str, str]) -> None:
        self.up = up
        self.fake = fake
        self.console = endpoints["console"]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("console")
    with ThreadedProvider() as fake:
        path = stack_config(tmp / "config.json", provider_url=fake.openai_base_url)
        config = json.loads(path.read_text())
        # A server back within the blip grace leaves the catalog as it was (the page shows that at
        # its next look, within 5 s); without it, a death changes the catalog at once.
        config["toolscout"]["pool"]["blip_grace"] = 0
        config["toolscout"]["gateway"].update(
            tokens={"CONSOLE_ADMIN_TOKEN": ["*"], "CONSOLE_TENANT_TOKEN": ["weather_only"]},
            console_chat=["CONSOLE_ADMIN_TOKEN"],
        )
        path.write_text(json.dumps(config))
        env = {
            "CONSOLE_ADMIN_TOKEN": ADMIN,
            "CONSOLE_TENANT_TOKEN": TENANT,
            "TOOLSCOUT_RUNTIME_DIR": str(tmp / "runtime"),
        }
        up = UpProcess(path, env=env)
        try:
            endpoints = up.wait_ready(timeout=120)
            states = up.server_states({"notes", "weather", "time"}, timeout=120)
            assert {s["state"] for s in states.values()} == {"ready"}, states
            yield Stack(up, fake, endpoints)
        finally:
            code = up.stop()
        assert code == 0, up.stderr
        assert "Traceback" not in up.stderr


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright_api.sync_playwright() as playwright:
        chromium = launch_chromium(playwright)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    where = os.environ.get("TOOLSCOUT_CONSOLE_SCREENSHOTS")
    folder = Path(where) if where else tmp_path / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def signed_in(browser: Any, stack: Stack, token: str) -> Any:
    """A fresh browser context (its own cookies) signed in with ``token``; its page."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
    page.goto(stack.console)
    expect(page).to_have_url(re.compile(r"/console/login$"))
    page.get_by_label("Token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(re.compile(r"/console/servers$"))
    return page


def _server_pid(stack: Stack, script: str) -> int:
    for child in psutil.Process(stack.up.process.pid).children(recursive=True):
        if any(arg.endswith(script) for arg in child.cmdline()):
            return child.pid
    raise AssertionError(f"no process runs {script}")


def test_the_servers_page_shows_a_killed_server_go_down_and_come_back(
    browser: Any, stack: Stack, shots: Path
) -> None:
    page = signed_in(browser, stack, ADMIN)
    row = page.locator('tr[data-server="weather"]')
    expect(row).to_have_attribute("data-state", "ready")
    expect(page.locator("#live-state")).to_contain_text("live")
    restarts = int(row.locator("td").nth(6).inner_text())
    # Every state the weather row shows, as the live table redraws it.
    page.evaluate(
        """() => {
            window.weatherStates = [];
            const body = document.getElementById("server-rows");
            new MutationObserver(() => {
                const row = body.querySelector('tr[data-server="weather"]');
                if (row) window.weatherStates.push(row.dataset.state);
            }).observe(body, {childList: true, subtree: true});
        }"""
    )
    os.kill(_server_pid(stack, "weather.py"), signal.SIGKILL)
    page.wait_for_function("() => window.weatherStates.some(s => s !== 'ready')", timeout=WAIT_MS)
    expect(row).to_have_attribute("data-state", "ready")
    assert int(row.locator("td").nth(6).inner_text()) > restarts
    expect(row.locator("td").nth(7)).to_contain_text("every tool is annotated read-only")
    # notes writes: its calls that may write run one at a time, and the page says why.
    expect(page.locator('tr[data-server="notes"] td').nth(7)).to_contain_text("one at a time")
    page.screenshot(path=str(shots / "servers.png"), full_page=True)


def test_the_catalog_shows_every_tool_with_its_schema_and_the_manifest_against_its_budget(
    browser: Any, stack: Stack, shots: Path
) -> None:
    page = signed_in(browser, stack, ADMIN)
    page.get_by_role("link", name="Catalog").click()
    forecast = page.locator('tr[data-tool="weather__get_forecast"]')
    expect(forecast).to_contain_text("deferred")
    expect(page.locator('tr[data-tool^="notes__"]').first).to_contain_text("loaded")
    forecast.get_by_text("input schema").click()
    expect(forecast.locator("pre")).to_contain_text('"location"')
    expect(page.locator("#manifest-h")).to_be_visible()
    expect(page.locator(".manifest")).to_contain_text("weather")
    expect(page.locator("section", has=page.locator("#manifest-h"))).to_contain_text("tokens of a budget of")
    page.get_by_label("Toolset").select_option("weather_only")
    page.get_by_role("button", name="Show").click()
    expect(page.locator('tr[data-tool^="notes__"]')).to_have_count(0)
    expect(forecast).to_be_visible()
    page.screenshot(path=str(shots / "catalog.png"), full_page=True)


def test_a_search_shows_the_score_parts_the_llm_text_and_says_when_nothing_fits(
    browser: Any, stack: Stack, shots: Path
) -> None:
    page = signed_in(browser, stack, ADMIN)
    page.get_by_role("link", name="Search").click()
    page.get_by_label("Query").fill("forecast for a city")
    page.get_by_role("button", name="Search").click()
    headers = page.locator("table.ranking thead th")
    expect(headers).to_have_text(["#", "Tool", "Server", "Fused score", "BM25", "Cosine", "Description"])
    first = page.locator("table.ranking tbody tr").first
    expect(first.locator("th")).to_have_text("weather__get_forecast")
    assert re.fullmatch(r"\d+\.\d{2}", first.locator("td").nth(3).inner_text())  # its BM25 score
    expect(page.locator(".llm-text")).to_contain_text("weather__get_forecast")
    page.screenshot(path=str(shots / "search.png"), full_page=True)
    page.get_by_label("Query").fill("zzqx vlorb")
    page.get_by_role("button", name="Search").click()
    expect(page.locator(".nothing")).to_contain_text("Nothing fits")
    expect(page.locator("table.ranking")).to_have_count(0)


def test_a_chat_turn_shows_its_search_tool_call_and_tokens_in_the_side_panel_driven_by_keyboard(
    browser: Any, stack: Stack, shots: Path
) -> None:
    stack.fake.script(
        Reply.calls(
            ScriptedCall("search_tools", {"query": "weather forecast"}), reasoning="Need a forecast tool."
        ),
        Reply.calls(
            ScriptedCall("weather__get_forecast", {"location": {"city": "Berlin"}, "days": 2}),
            cached_tokens=4,
            cache_write_tokens=3,
        ),
        Reply.answer("Berlin: sunny tomorrow."),
    )
    page = signed_in(browser, stack, ADMIN)
    page.get_by_role("link", name="Chat").click()
    expect(page.get_by_label("Model")).to_have_value("fake")
    # Keyboard only, from the model picker: Tab to the toolset, Tab to the message, type, Enter.
    page.get_by_label("Model").focus()
    page.keyboard.press("Tab")
    expect(page.get_by_label("Toolset")).to_be_focused()
    page.keyboard.press("Tab")
    expect(page.get_by_label("Message")).to_be_focused()
    page.keyboard.type("Weather in Berlin tomorrow?")
    page.keyboard.press("Enter")
    turn = page.locator("#turns .turn").first
    expect(turn).to_have_class(re.compile(r"\bdone\b"))
    expect(page.locator("#messages li.assistant").last).to_have_text("Berlin: sunny tomorrow.")
    search = turn.locator("details.call.search")
    expect(search.locator("summary")).to_contain_text("search_tools")
    expect(search.locator(".arguments")).to_contain_text('"weather forecast"')
    expect(search.locator(".result")).to_contain_text("weather__get_forecast")
    call = turn.locator('details.call[data-name="weather__get_forecast"]')
    expect(call.locator(".arguments")).to_contain_text('"Berlin"')
    expect(call.locator(".result")).to_contain_text("Berlin forecast")
    expect(turn.locator(".reasoning")).to_contain_text("Need a forecast tool.")
    usage = turn.locator(".usage")
    expect(usage).to_contain_text("input 30")
    expect(usage).to_contain_text("cache reads 4")
    expect(usage).to_contain_text("cache writes 3")
    expect(usage).to_contain_text("tool definitions sent")
    # The focus is back in the message box for the next turn.
    expect(page.get_by_label("Message")).to_be_focused()
    page.screenshot(path=str(shots / "chat.png"), full_page=True)
    page.get_by_role("link", name="Tokens").click()
    expect(page.locator("#saved-chats")).not_to_have_text("0")
    expect(page.locator("#tokens-openai")).to_be_visible()
    page.screenshot(path=str(shots / "tokens.png"), full_page=True)


def test_a_tenant_token_sees_only_its_toolsets_and_may_not_chat(browser: Any, stack: Stack) -> None:
    page = signed_in(browser, stack, TENANT)
    expect(page.locator("#server-rows tr")).to_have_count(1)
    expect(page.locator('tr[data-server="weather"]')).to_be_visible()
    expect(page.get_by_role("link", name="Chat")).to_have_count(0)
    page.get_by_role("link", name="Catalog").click()
    expect(page.get_by_label("Toolset").locator("option")).to_have_text(["weather_only"])
    expect(page.locator('tr[data-tool^="notes__"]')).to_have_count(0)
    expect(page.locator('tr[data-tool^="time__"]')).to_have_count(0)
    for path in ("/catalog?toolset=", "/search?q=note&toolset=", "/tokens?toolset="):
        page.goto(stack.console + path)
        expect(page.locator(".problem")).to_contain_text("No such toolset here.")
    # A tool's schema is given for the toolset's own tools only.
    schema = stack.console + "/catalog/schema?toolset=weather_only&tool="
    assert page.request.get(schema + "weather__get_forecast").status == 200
    assert page.request.get(schema + "notes__add_note").status == 404
    assert page.request.get(stack.console + "/catalog/schema?toolset=&tool=notes__add_note").status == 404
    page.goto(stack.console + "/search?q=note&server=notes&toolset=weather_only")
    expect(page.locator(".problem")).to_contain_text("No such server here.")
    assert page.goto(stack.console + "/chat") is not None
    expect(page.locator(".problem")).to_contain_text("not allowed")
    reply = page.request.post(
        stack.console + "/chat/send",
        data=json.dumps({"message": "hi", "model": "fake", "toolset": "weather_only"}),
        headers={
            "content-type": "application/json",
            "x-csrf-token": page.locator('meta[name="csrf-token"]').get_attribute("content") or "",
        },
    )
    assert reply.status == 403


def test_forms_without_the_session_csrf_token_or_from_another_origin_are_refused(
    browser: Any, stack: Stack
) -> None:
    page = signed_in(browser, stack, ADMIN)
    csrf = page.locator('meta[name="csrf-token"]').get_attribute("content") or ""
    body = json.dumps({"message": "hi", "model": "fake", "toolset": ""})
    no_token = page.request.post(
        stack.console + "/chat/send", data=body, headers={"content-type": "application/json"}
    )
    assert no_token.status == 403
    elsewhere = page.request.post(
        stack.console + "/chat/send",
        data=body,
        headers={"content-type": "application/json", "x-csrf-token": csrf, "origin": "http://evil.example"},
    )
    assert elsewhere.status == 403
    anonymous = browser.new_context()
    try:
        assert anonymous.request.get(stack.console + "/servers", max_redirects=0).status == 303
        assert anonymous.request.get(stack.console + "/servers/events").status == 401
    finally:
        anonymous.close()


def test_every_page_is_screenshotted_by_the_bench_visit_and_every_control_is_labelled(
    browser: Any, stack: Stack, shots: Path
) -> None:
    page = signed_in(browser, stack, ADMIN)
    painted = visit_pages(page, stack.console, shots)
    assert set(painted) == {name for name, _ in PAGES}
    assert all((shots / f"{name}.png").stat().st_size > 0 for name, _ in PAGES)
    for _, path in PAGES:
        page.goto(stack.console + path)
        unlabelled = page.evaluate(
            """() => [...document.querySelectorAll('input:not([type=hidden]), select, textarea, button')]
                .filter(c => !(c.labels && c.labels.length) && !c.getAttribute('aria-label') && !c.textContent.trim())
                .map(c => c.outerHTML)"""
        )
        assert unlabelled == [], path
