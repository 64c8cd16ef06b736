"""The web console's pages in a real browser: a screenshot of each, and its first paint.

    uv run --frozen python bench/console_pages.py [--catalog livemcpbench|examples] [--runs 5]
        [--search hybrid|bm25] [--screenshots DIR]

Starts ``toolscout up`` (a subprocess, free ports) and drives Debian's Chromium through Playwright
(tests/support/browser.py). With ``--catalog livemcpbench`` (the default) the pool connects to the
527 real tools of ``../shared/data/livemcpbench.tools.jsonl``, served by their 70 servers as MCP
servers over streamable HTTP in a helper process (bench/mcp_fleet.py's server, one per
livemcpbench server), every server deferred; with ``examples`` it is the example config's
servers. Search is hybrid by default (the bundled local embedder of the ``embeddings`` extra,
waited for until the catalog is embedded), so the search page shows cosine similarities. The chat page runs one scripted turn against the fake OpenAI provider first
(search_tools, a tool call, an answer), so its side panel is filled.

First paint is the browser's own ``first-contentful-paint`` entry of each page load (navigation
start to the first text or image painted: the gateway rendering the page included), ``--runs``
loads per page after one warm-up; printed and saved to bench/results/console.json.

The README's screenshots: ``uv run --frozen python bench/console_pages.py --catalog examples
--screenshots bench/results/console`` (tests/e2e/test_console_browser.py takes the same page visits).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

__all__ = ["PAGES", "first_paint_ms", "visit_pages"]

# (name, path under /console) of every page, in the navigation's order.
PAGES = (
    ("servers", "/servers"),
    ("catalog", "/catalog"),
    ("search", "/search?q=forecast+for+a+city"),
    ("chat", "/chat"),
    ("tokens", "/tokens"),
)
DATA = Path(os.environ.get("TOOLSCOUT_BENCH_DATA", ROOT.parent / "shared" / "data"))
RESULTS = ROOT / "bench" / "results" / "console.json"


def first_paint_ms(page: Any) -> float:
    """The last navigation's first-contentful-paint, in milliseconds from its start."""
    value = page.evaluate(
        """() => new Promise((resolve) => {
            const found = () => performance.getEntriesByName("first-contentful-paint")[0];
            if (found()) return resolve(found().startTime);
            new PerformanceObserver((list, observer) => {
                const entry = list.getEntriesByName("first-contentful-paint")[0];
                if (entry) { observer.disconnect(); resolve(entry.startTime); }
            }).observe({type: "paint", buffered: true});
        })"""
    )
    return float(value)


def response_ms(page: Any) -> float:
    """The last navigation's time to the first byte of its answer (the gateway's part), in ms."""
    return float(page.evaluate("() => performance.getEntriesByType('navigation')[0].responseStart"))


def visit_pages(
    page: Any, console_url: str, screenshots: Path | None = None, responses: dict[str, float] | None = None
) -> dict[str, float]:
    """Loads every page once; its first paint (ms) by name, and a full-page PNG ``<name>.png`` in
    ``screenshots``; ``responses`` gets each page's time to its first byte."""
    painted: dict[str, float] = {}
    for name, path in PAGES:
        page.goto(console_url + path, wait_until="load")
        painted[name] = first_paint_ms(page)
        if responses is not None:
            responses[name] = response_ms(page)
        if screenshots is not None:
            page.screenshot(path=str(screenshots / f"{name}.png"), full_page=True)
    return painted


# --- the stack -----------------------------------------------------------------------------------


def _livemcp_servers() -> dict[str, list[dict[str, Any]]]:
    by_server: dict[str, list[dict[str, Any]]] = defaultdict(list)
    with (DATA / "livemcpbench.tools.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            by_server[str(row["server"])].append(row)
    return dict(by_server)


def serve_livemcp(port_file: Path) -> None:
    """The livemcpbench servers as MCP servers over streamable HTTP at ``/<index>/mcp``; writes the
    port to ``port_file`` once listening, then serves until killed."""
    import socket

    import anyio
    import mcp_types as types
    import uvicorn
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings

    sys.path.insert(0, str(ROOT / "bench"))
    from mcp_fleet import FleetApp, _tool_name, build_server

    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    managers: dict[str, StreamableHTTPSessionManager] = {}
    for index, (name, rows) in enumerate(sorted(_livemcp_servers().items())):
        tools: dict[str, types.Tool] = {}
        for row in rows:
            schema = row.get("input_schema")
            if not isinstance(schema, dict) or schema.get("type") != "object":
                schema = {"type": "object", "properties": {}}
            tool = types.Tool(
                name=_tool_name(str(row["name"])),
                description=str(row.get("description") or ""),
                input_schema=schema,
            )
            tools.setdefault(tool.name, tool)
        managers[f"/{index}/mcp"] = StreamableHTTPSessionManager(
            app=build_server(name, list(tools.values()), 300_000),
            security_settings=security,
            session_idle_timeout=None,
        )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(512)
    port_file.write_text(str(sock.getsockname()[1]))

    async def main() -> None:
        async with anyio.create_task_group() as group:
            for manager in managers.values():
                await group.start(_run_manager, manager)
            server = uvicorn.Server(uvicorn.Config(FleetApp(managers), log_level="warning", lifespan="off"))
            await server.serve(sockets=[sock])
            group.cancel_scope.cancel()

    anyio.run(main)


async def _run_manager(manager: Any, *, task_status: Any) -> None:
    async with manager.run():
        task_status.started()
        await asyncio.Event().wait()


def _config_name(name: str, index: int) -> str:
    """A config server name (no spaces, at most 64 characters) for a livemcpbench server name."""
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-")[:56]
    return f"{slug or 'server'}-{index}"


def _livemcp_config(path: Path, base_url: str, provider_url: str) -> Path:
    from tests.support.cli_stack import stack_config

    stack_config(path, provider_url=provider_url)
    config = json.loads(path.read_text())
    config["servers"] = {
        _config_name(name, index): {
            "url": f"{base_url}/{index}/mcp",
            "transport": "streamable-http",
            "defer_loading": True,
        }
        for index, name in enumerate(sorted(_livemcp_servers()))
    }
    config["tool_sets"] = {}
    config["tool_discovery"] = {"enabled": True, "defer_all": True}
    path.write_text(json.dumps(config))
    return path


def _examples_config(path: Path, provider_url: str) -> Path:
    from tests.support.cli_stack import stack_config
    from tests.support.mcp_servers import example_server_config

    return stack_config(
        path,
        provider_url=provider_url,
        extra_servers={
            "text": example_server_config("text"),
            "media": example_server_config("media", defer_loading=True),
        },
        extra_tool_sets={
            "planning": {"description": "weather and time", "servers": {"weather": True, "time": True}}
        },
    )


def _chat_once(page: Any, console_url: str, fake: Any) -> None:
    from tests.support.fake_provider import Reply, ScriptedCall

    fake.script(
        Reply.calls(
            ScriptedCall("search_tools", {"query": "weather forecast"}), reasoning="I need a forecast tool."
        ),
        Reply.calls(
            ScriptedCall("weather__get_forecast", {"location": {"city": "Berlin"}, "days": 2}),
            cached_tokens=850,
            cache_write_tokens=120,
        ),
        Reply.answer("Tomorrow in Berlin: mild and sunny, see the forecast on the right."),
    )
    page.goto(console_url + "/chat")
    page.get_by_label("Message").fill("What's the weather in Berlin tomorrow?")
    page.get_by_role("button", name="Send").click()
    page.locator("#turns .turn.done").first.wait_for(timeout=60_000)


def _with_search(config: Path, mode: str) -> None:
    """``toolscout.search.mode`` set, and discovery's metrics served (its mode gauge is waited on)."""
    data = json.loads(config.read_text())
    data["toolscout"].setdefault("search", {})["mode"] = mode
    data["toolscout"]["discovery"]["metrics_port"] = 0
    config.write_text(json.dumps(data))


def _open_a_schema(page: Any) -> None:
    """Opens the first tool's input schema (fetched when opened), when a server's section is open."""
    row = page.locator("details.server[open] tr[data-tool]").first
    if row.count():
        row.get_by_text("input schema").click()
        row.locator("pre", has_not_text="loading…").wait_for()


def run(args: argparse.Namespace) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    from tests.support.browser import launch_chromium
    from tests.support.cli_stack import ThreadedProvider, UpProcess, wait_for_search_mode

    results: dict[str, Any] = {"catalog": args.catalog, "search": args.search, "runs": args.runs}
    with tempfile.TemporaryDirectory() as tmp, ThreadedProvider() as fake:
        fleet = None
        if args.catalog == "livemcpbench":
            port_file = Path(tmp) / "port"
            fleet = subprocess.Popen([sys.executable, __file__, "serve-livemcp", str(port_file)], cwd=ROOT)
            deadline = time.monotonic() + 120
            while not port_file.exists() or not port_file.read_text():
                if fleet.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("the livemcpbench servers did not start")
                time.sleep(0.1)
            base = f"http://127.0.0.1:{port_file.read_text()}"
            config = _livemcp_config(Path(tmp) / "config.json", base, fake.openai_base_url)
        else:
            config = _examples_config(Path(tmp) / "config.json", fake.openai_base_url)
        _with_search(config, args.search)
        up = UpProcess(config, env={"TOOLSCOUT_RUNTIME_DIR": tmp})
        try:
            ready = up.next_event("ready", timeout=300)
            console = ready["endpoints"]["console"]
            names = set(json.loads(config.read_text())["servers"])
            up.server_states(names, timeout=300)
            wait_for_search_mode(ready["metrics"]["discovery"], args.search, timeout=600)
            with sync_playwright() as playwright:
                browser = launch_chromium(playwright)
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                page.set_default_timeout(60_000)
                _chat_once(page, console, fake)  # the tokens page then counts a chat
                if args.screenshots:
                    args.screenshots.mkdir(parents=True, exist_ok=True)
                    for name, path in PAGES:
                        if name != "chat":
                            page.goto(console + path, wait_until="load")
                            if name == "catalog":
                                _open_a_schema(page)
                            page.screenshot(path=str(args.screenshots / f"{name}.png"), full_page=True)
                    _chat_once(page, console, fake)  # the side panel lives in the page
                    page.screenshot(path=str(args.screenshots / "chat.png"), full_page=True)
                visit_pages(page, console)  # warm-up
                samples: dict[str, list[float]] = defaultdict(list)
                first_byte: dict[str, list[float]] = defaultdict(list)
                for _ in range(args.runs):
                    responses: dict[str, float] = {}
                    for name, ms in visit_pages(page, console, responses=responses).items():
                        samples[name].append(ms)
                        first_byte[name].append(responses[name])
                results["tools"] = (
                    page.locator("tr[data-tool]").count() if page.goto(console + "/catalog") else 0
                )
                browser.close()
        finally:
            up.stop()
            if fleet is not None:
                fleet.kill()
                fleet.wait(10)
    results["first_paint_ms"] = {
        name: {
            "median": round(statistics.median(v), 1),
            "max": round(max(v), 1),
            "runs": v,
            "first_byte_median": round(statistics.median(first_byte[name]), 1),
        }
        for name, v in samples.items()
    }
    results["load_average"] = os.getloadavg()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--catalog", choices=("livemcpbench", "examples"), default="livemcpbench")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--search", choices=("bm25", "hybrid"), default="hybrid", help="toolscout.search.mode"
    )
    parser.add_argument("--screenshots", type=Path, help="save a PNG of each page here")
    if len(sys.argv) == 3 and sys.argv[1] == "serve-livemcp":
        serve_livemcp(Path(sys.argv[2]))
        return
    args = parser.parse_args()
    results = run(args)
    for name, figures in results["first_paint_ms"].items():
        print(
            f"{name:<8} first paint median {figures['median']:7.1f} ms   max {figures['max']:7.1f} ms"
            f"   (first byte median {figures['first_byte_median']:7.1f} ms)"
        )
    print(f"load average {results['load_average']}")
    if args.catalog == "livemcpbench":
        RESULTS.write_text(json.dumps(results, indent=2) + "\n")
        print(f"saved {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
