"""The rendered manifests are runnable, and the dashboard and alerts work on what they produce.

The dev overlay is rendered with kustomize; every Deployment's container (command, args, env,
ConfigMap, Secret references, probes) is started as a local process on loopback by
``deploy.localrun.LocalStack`` (its docstring says how ports and paths are translated). Then:

* each probe answers: gRPC health SERVING for the probe's own service name, TCP for the remote
  MCP server; the metrics port named by ``prometheus.io/port`` serves Prometheus text;
* with the auth Secret present, RPCs need the bearer token while probes (which cannot send one) do not;
* a search and tool calls flow through discovery and the pool (stdio servers in the pool pod and
  the stateful ``notes`` server as its own deployment), and chats flow through all three with the
  real OpenAI SDK talking to a local fake provider: search → call a discovered tool → answer, a
  deferred-tool rejection, and a provider error;
* the pool restarts a crashed stdio server;
* a real Prometheus (Debian package) scrapes the stack and evaluates the rules: every PromQL
  expression of the dashboard (variables substituted) and of the recording rules returns data,
  and every alert evaluates without error;
* an MCP client (the ``mcp`` SDK) searches and calls a tool through the gateway's Service;
* on SIGTERM every service exits 0 within its terminationGracePeriodSeconds.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import psutil  # type: ignore[import-untyped]  # no types-psutil in the dev group
import pytest
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc
from toolscout.discovery.v1 import discovery_pb2, discovery_pb2_grpc
from toolscout.mcp_pool.v1 import mcp_pool_pb2, mcp_pool_pb2_grpc
from toolscout.orchestrator.v1 import orchestrator_pb2, orchestrator_pb2_grpc

from deploy import check
from deploy.localrun import LocalContainer, LocalStack, free_port
from tests.support.fake_provider import FakeProvider, Reply, ScriptedCall
from tests.support.otlp_receiver import OtlpReceiver, Span

# Generous: the first test to need Prometheus may apt-get install it.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

TOKEN = "e2e-token-not-a-secret"
AUTH = (("authorization", f"Bearer {TOKEN}"),)
MODEL = "gpt-4.1-mini"
# Toolsets of deploy/base/toolscout.yaml: weather (deferred) and notes; notes and text (deferred).
PLANNING = "planning"
WRITING = "writing"
SERVING = health_pb2.HealthCheckResponse.SERVING
# Bounds for waiting on processes that have no event to wait on (HTTP readiness, scrapes).
STARTUP_BOUND = 90.0
POLL = 0.2


# --- the fake provider, on its own event loop -------------------------------------------------


class _ProviderThread:
    """FakeProvider (asyncio + uvicorn) run in a thread so the tests can stay synchronous."""

    def __init__(self) -> None:
        self.fake: FakeProvider | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._started = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with FakeProvider() as fake:
            self.fake = fake
            self._started.set()
            await self._stop.wait()

    def __enter__(self) -> FakeProvider:
        self._thread.start()
        assert self._started.wait(30), "fake provider did not start"
        assert self.fake is not None
        return self.fake

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None
        assert self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)


# --- the stack --------------------------------------------------------------------------------


@dataclass
class Stack:
    local: LocalStack
    provider: FakeProvider
    collector: OtlpReceiver
    channels: dict[str, grpc.Channel] = field(default_factory=dict)

    def channel(self, component: str) -> grpc.Channel:
        if component not in self.channels:
            port = self.local.container(component).probes["readinessProbe"]["grpc"]["port"]
            self.channels[component] = grpc.insecure_channel(f"127.0.0.1:{port}")
        return self.channels[component]

    def pool(self) -> mcp_pool_pb2_grpc.McpPoolStub:
        return mcp_pool_pb2_grpc.McpPoolStub(self.channel("pool"))

    def discovery(self) -> discovery_pb2_grpc.DiscoveryStub:
        return discovery_pb2_grpc.DiscoveryStub(self.channel("discovery"))

    def orchestrator(self) -> orchestrator_pb2_grpc.OrchestratorStub:
        return orchestrator_pb2_grpc.OrchestratorStub(self.channel("orchestrator"))


def _logs(stack: LocalStack) -> str:
    return "\n".join(
        f"--- {c.deployment} (exit {c.process and c.process.poll()})\n{c.log_text()[-3000:]}"
        for c in stack.containers
    )


def _wait_serving(port: int, service: str, within: float) -> None:
    """Waits on the health Watch stream (event-driven) until ``service`` is SERVING."""
    # Reconnect quickly while the server is still starting (the default backoff grows to minutes).
    options = [("grpc.initial_reconnect_backoff_ms", 100), ("grpc.max_reconnect_backoff_ms", 500)]
    with grpc.insecure_channel(f"127.0.0.1:{port}", options=options) as channel:
        grpc.channel_ready_future(channel).result(timeout=within)
        stream = health_pb2_grpc.HealthStub(channel).Watch(
            health_pb2.HealthCheckRequest(service=service), timeout=within
        )
        for update in stream:
            if update.status == SERVING:
                stream.cancel()
                return
    raise AssertionError(f"{service!r} on {port} never became SERVING")


def _probe_budget(container: LocalContainer, kind: str) -> float:
    probe = container.probes[kind]
    return float(probe.get("periodSeconds", 10) * probe.get("failureThreshold", 3))


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    docs = check.load_documents(check.render("dev"))
    with _ProviderThread() as provider, OtlpReceiver() as collector:
        # What the user's overlay or Secret would add: the provider endpoint, a provider key and the
        # shared bearer token (the real Secrets are never committed); and the collector, in the one
        # value of the tracing ConfigMap (here a real OTLP receiver on loopback).
        for doc in docs:
            if doc["kind"] == "Deployment" and doc["metadata"]["name"] == "toolscout-orchestrator":
                env = doc["spec"]["template"]["spec"]["containers"][0]["env"]
                env.append({"name": "OPENAI_BASE_URL", "value": provider.openai_base_url})
            if doc["kind"] == "ConfigMap" and doc["metadata"]["name"].startswith("toolscout-tracing-"):
                doc["data"]["OTEL_EXPORTER_OTLP_ENDPOINT"] = collector.grpc_endpoint
        secrets = {
            "toolscout-provider-keys": {"OPENAI_API_KEY": "sk-e2e-fake"},
            "toolscout-auth": {"token": TOKEN},
        }
        local = LocalStack(docs, tmp_path_factory.mktemp("pods"), secrets=secrets)
        local.start()
        try:
            for container in local.containers:
                probe = container.probes.get("startupProbe") or container.probes["readinessProbe"]
                if "grpc" in probe:
                    try:
                        _wait_serving(
                            probe["grpc"]["port"],
                            probe["grpc"]["service"],
                            _probe_budget(container, "startupProbe"),
                        )
                    except (grpc.RpcError, grpc.FutureTimeoutError) as err:
                        raise AssertionError(
                            f"{container.deployment} did not start: {err}\n{_logs(local)}"
                        ) from err
            for container in local.containers:
                probe = container.probes.get("startupProbe") or {}
                if "httpGet" in probe:
                    budget = _probe_budget(container, "startupProbe")
                    path, port = probe["httpGet"]["path"], probe["httpGet"]["port"]
                    _wait_until(
                        functools.partial(_http_ok, port, path), budget, f"{container.deployment} {path}"
                    )
            result = Stack(local, provider, collector)
            yield result
            for channel in result.channels.values():
                channel.close()
        finally:
            local.stop()


def _http_ok(port: int, path: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def _tcp_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except OSError:
        return False


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        assert response.status == 200
        return str(response.read().decode())


# --- probes, metrics, auth ----------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["startupProbe", "readinessProbe", "livenessProbe"])
def test_every_probe_of_every_container_passes(stack: Stack, kind: str) -> None:
    checked = 0
    for container in stack.local.containers:
        probe = container.probes.get(kind)
        if probe is None:
            continue
        if "grpc" in probe:
            with grpc.insecure_channel(f"127.0.0.1:{probe['grpc']['port']}") as channel:
                reply = health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(service=probe["grpc"]["service"]),
                    timeout=probe.get("timeoutSeconds", 1) + 1,
                )
            assert reply.status == SERVING, container.deployment
        elif "httpGet" in probe:
            assert _http_ok(probe["httpGet"]["port"], probe["httpGet"]["path"]), container.deployment
        else:
            assert _tcp_open(probe["tcpSocket"]["port"]), container.deployment
        checked += 1
    assert checked >= 4


def test_the_annotated_metrics_port_of_each_service_serves_prometheus_text(stack: Stack) -> None:
    gateway = stack.local.container("gateway")
    assert "toolscout_gateway_open_sessions" in _scrape(gateway.metrics_port or 0)
    for component in ("pool", "discovery", "orchestrator"):
        container = stack.local.container(component)
        assert container.metrics_port is not None
        text = _scrape(container.metrics_port)
        assert (
            "# TYPE grpc_server_handled_total counter" in text or "# TYPE grpc_server_handled counter" in text
        )
    assert "toolscout_pool_server_up" in _scrape(stack.local.container("pool").metrics_port or 0)


def test_rpcs_need_the_secret_token_while_probes_do_not(stack: Stack) -> None:
    with pytest.raises(grpc.RpcError) as err:
        stack.pool().ListServers(mcp_pool_pb2.ListServersRequest(), timeout=5)
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    reply = stack.pool().ListServers(mcp_pool_pb2.ListServersRequest(), timeout=5, metadata=AUTH)
    assert reply.servers


# --- traffic ----------------------------------------------------------------------------------


@dataclass
class Traffic:
    servers: dict[str, mcp_pool_pb2.ServerStatus]
    tools: dict[tuple[str, str], str]
    search: discovery_pb2.SearchToolsResponse
    weather: mcp_pool_pb2.CallToolResponse
    note: mcp_pool_pb2.CallToolResponse
    tool_error: mcp_pool_pb2.CallToolResponse
    not_found: grpc.StatusCode
    discovery_chat: orchestrator_pb2.ChatResponse
    rejection_chat: orchestrator_pb2.ChatResponse
    provider_error: grpc.StatusCode
    restarted: mcp_pool_pb2.ServerStatus
    # Through the MCP gateway: the tool names listed, a search's text and a call's text.
    mcp: tuple[list[str], str, str]


def _servers(stack: Stack) -> dict[str, mcp_pool_pb2.ServerStatus]:
    reply = stack.pool().ListServers(mcp_pool_pb2.ListServersRequest(), timeout=10, metadata=AUTH)
    return {s.name: s for s in reply.servers}


def _crash_and_wait_for_restart(stack: Stack, server: str) -> mcp_pool_pb2.ServerStatus:
    """Kills the stdio server process inside the pool "pod"; waits on its health name's Watch."""
    status = _servers(stack)[server]
    pool_process = stack.local.container("pool").process
    assert pool_process is not None
    children = [
        p
        for p in psutil.Process(pool_process.pid).children(recursive=True)
        if f"{server}.py" in " ".join(p.cmdline())
    ]
    assert len(children) == 1, [p.cmdline() for p in children]
    port = stack.local.container("pool").probes["readinessProbe"]["grpc"]["port"]
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stream = health_pb2_grpc.HealthStub(channel).Watch(
            health_pb2.HealthCheckRequest(service=status.health_service), timeout=60
        )
        seen = [next(stream).status]
        assert seen == [SERVING]
        children[0].kill()
        for update in stream:
            seen.append(update.status)
            if update.status == SERVING:
                stream.cancel()
                break
    assert seen[0] == SERVING
    assert seen[-1] == SERVING
    assert health_pb2.HealthCheckResponse.NOT_SERVING in seen
    return _servers(stack)[server]


@pytest.fixture(scope="module")
def traffic(stack: Stack) -> Traffic:
    try:
        return _send_traffic(stack)
    except grpc.RpcError as err:
        raise AssertionError(f"{err}\n{_logs(stack.local)}") from err


def _send_traffic(stack: Stack) -> Traffic:
    pool, discovery, orchestrator = stack.pool(), stack.discovery(), stack.orchestrator()
    servers = _servers(stack)
    catalog = pool.ListTools(mcp_pool_pb2.ListToolsRequest(), timeout=10, metadata=AUTH)
    tools = {(t.server, t.name): t.llm_name for t in catalog.tools}

    search = discovery.SearchTools(
        discovery_pb2.SearchToolsRequest(toolset=PLANNING, query="weather forecast for a city"),
        timeout=10,
        metadata=AUTH,
    )
    weather = pool.CallTool(
        mcp_pool_pb2.CallToolRequest(
            server="weather",
            tool="get_current_weather",
            arguments_json=json.dumps({"location": {"city": "Berlin"}}),
        ),
        timeout=30,
        metadata=AUTH,
    )
    note = pool.CallTool(
        mcp_pool_pb2.CallToolRequest(
            server="notes", tool="add_note", arguments_json='{"title": "manifests", "body": "they run"}'
        ),
        timeout=30,
        metadata=AUTH,
    )
    tool_error = pool.CallTool(
        mcp_pool_pb2.CallToolRequest(server="notes", tool="complete_task", arguments_json='{"task_id": 999}'),
        timeout=30,
        metadata=AUTH,
    )
    with pytest.raises(grpc.RpcError) as missing:
        pool.CallTool(
            mcp_pool_pb2.CallToolRequest(server="weather", tool="no_such_tool"), timeout=10, metadata=AUTH
        )

    forecast = tools[("weather", "get_forecast")]
    reverse = tools[("text", "reverse")]
    stack.provider.script(
        Reply.calls(ScriptedCall("search_tools", {"query": "weather forecast"})),
        Reply.calls(ScriptedCall(forecast, {"location": {"city": "Berlin"}, "days": 2})),
        Reply.answer("Mild, then rain."),
    )
    discovery_chat = orchestrator.Chat(
        orchestrator_pb2.ChatRequest(
            model=MODEL,
            # Every tool (18 of 22 deferred): with the small "planning" toolset the search_tools
            # definition and manifest cost more than the two deferred tools would.
            toolset="",
            messages=[orchestrator_pb2.Message(role="user", content="Weather in Berlin this week?")],
        ),
        timeout=60,
        metadata=AUTH,
    )
    # A deferred tool called before any search: rejected with the "search first" error.
    stack.provider.script(
        Reply.calls(ScriptedCall(reverse, {"text": "abc"})),
        Reply.answer("I need to search first."),
    )
    rejection_chat = orchestrator.Chat(
        orchestrator_pb2.ChatRequest(
            model=MODEL,
            toolset=WRITING,
            messages=[orchestrator_pb2.Message(role="user", content="Reverse abc.")],
        ),
        timeout=60,
        metadata=AUTH,
    )
    stack.provider.script(Reply.error(400, "unsupported parameter"))
    with pytest.raises(grpc.RpcError) as provider_error:
        orchestrator.Chat(
            orchestrator_pb2.ChatRequest(
                model=MODEL, toolset=WRITING, messages=[orchestrator_pb2.Message(role="user", content="Hi")]
            ),
            timeout=60,
            metadata=AUTH,
        )
    restarted = _crash_and_wait_for_restart(stack, "weather")
    mcp = _mcp_traffic(stack)
    return Traffic(
        servers=servers,
        tools=tools,
        search=search,
        weather=weather,
        note=note,
        tool_error=tool_error,
        not_found=missing.value.code(),
        discovery_chat=discovery_chat,
        rejection_chat=rejection_chat,
        provider_error=provider_error.value.code(),
        restarted=restarted,
        mcp=mcp,
    )


def _mcp_traffic(stack: Stack) -> tuple[list[str], str, str]:
    """An MCP host on the gateway's Service: list, search, call; and one refused browser origin."""
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    port = stack.local.service_ports[("toolscout-gateway", 50054)]
    url = f"http://127.0.0.1:{port}/mcp"

    async def host() -> tuple[list[str], str, str]:
        # The gateway asks for the services' token (no gateway.tokens in the base config).
        with anyio.fail_after(60):
            async with (
                httpx2.AsyncClient(headers=dict(AUTH), timeout=30) as http,
                Client(streamable_http_client(url, http_client=http)) as client,
            ):
                names = [t.name for t in (await client.list_tools()).tools]
                found = await client.call_tool("search_tools", {"query": "weather forecast for a city"})
                called = await client.call_tool(
                    "call_tool",
                    {"name": "weather__get_forecast", "arguments": {"location": {"city": "Berlin"}}},
                )
        return names, found.content[0].text, called.content[0].text  # type: ignore[union-attr]

    listed = anyio.run(host)
    refused = urllib.request.Request(url, data=b"{}", headers={"Origin": "https://elsewhere.example"})
    with pytest.raises(urllib.error.HTTPError) as forbidden:
        urllib.request.urlopen(refused, timeout=10)  # noqa: S310 - a local URL
    forbidden.value.close()
    assert forbidden.value.code == 403
    return listed


def test_the_pool_serves_stdio_servers_in_its_pod_and_the_remote_notes_deployment(traffic: Traffic) -> None:
    ready = mcp_pool_pb2.SERVER_STATE_READY
    assert {name: s.state for name, s in traffic.servers.items()} == {
        "weather": ready,
        "text": ready,
        "media": ready,
        "notes": ready,
    }
    assert traffic.servers["notes"].transport == "streamable-http"
    assert traffic.servers["weather"].transport == "stdio"


def test_search_and_calls_flow_through_discovery_and_the_pool(traffic: Traffic) -> None:
    assert traffic.search.matches
    assert traffic.search.matches[0].tool.server == "weather"
    assert not traffic.weather.is_error
    assert "Berlin" in traffic.weather.structured_content_json or any(
        "Berlin" in block.text for block in traffic.weather.content
    )
    assert not traffic.note.is_error
    assert traffic.note.server == "notes"
    assert traffic.tool_error.is_error
    assert traffic.not_found == grpc.StatusCode.NOT_FOUND


def test_a_chat_searches_loads_and_calls_a_deferred_tool_through_the_three_services(traffic: Traffic) -> None:
    chat = traffic.discovery_chat
    assert chat.stop_reason == orchestrator_pb2.STOP_REASON_COMPLETED
    forecast = traffic.tools[("weather", "get_forecast")]
    assert forecast in chat.loaded_tools
    results = [m for m in chat.messages if m.role == "tool" and m.name == forecast]
    assert len(results) == 1
    assert not results[0].is_error
    assert "Berlin" in results[0].content
    assert chat.messages[-1].content == "Mild, then rain."
    assert chat.stats.discovery.search_calls == 1
    assert chat.stats.discovery.tokens_saved > 0


def test_a_deferred_tool_called_before_search_is_rejected(traffic: Traffic) -> None:
    chat = traffic.rejection_chat
    assert chat.stats.discovery.deferred_call_rejections == 1
    rejected = [m for m in chat.messages if m.role == "tool"]
    assert len(rejected) == 1
    assert rejected[0].is_error


def test_a_provider_error_fails_the_chat_with_a_status_code(traffic: Traffic) -> None:
    assert traffic.provider_error not in (grpc.StatusCode.OK, grpc.StatusCode.UNKNOWN)


def test_an_mcp_host_searches_and_calls_through_the_gateway_service(traffic: Traffic) -> None:
    names, found, called = traffic.mcp
    assert names[-3:] == ["search_tools", "call_tool", "read_result"]
    assert "weather__get_forecast" in found
    assert called.startswith("Berlin forecast")


def test_the_pool_restarts_a_crashed_stdio_server(traffic: Traffic) -> None:
    assert traffic.restarted.state == mcp_pool_pb2.SERVER_STATE_READY
    assert traffic.restarted.restarts >= 1


def test_every_service_sends_its_traces_to_the_collector_the_config_map_names(
    stack: Stack, traffic: Traffic
) -> None:
    def chat_traced(spans: list[Span]) -> bool:
        chats = {
            s.trace_id
            for s in spans
            if s.name == "chat" and s.attributes.get("toolscout.chat.iterations") == 2
        }
        return any(
            {"toolscout-orchestrator", "toolscout-discovery", "toolscout-pool"}
            <= {s.service for s in spans if s.trace_id == trace}
            for trace in chats
        ) and any(s.service == "toolscout-gateway" for s in spans)

    spans = stack.collector.wait_for(chat_traced, 60)
    services = {s.service for s in spans}
    assert services == {
        "toolscout-orchestrator",
        "toolscout-discovery",
        "toolscout-pool",
        "toolscout-gateway",
    }


# --- Prometheus -------------------------------------------------------------------------------


@dataclass
class Prometheus:
    url: str
    process: subprocess.Popen[bytes]

    def get(self, path: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}{path}?{query}", timeout=10) as response:  # noqa: S310
            body = json.loads(response.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        try:
            data = self.get("/api/v1/query", query=expr)
        except urllib.error.HTTPError as err:
            raise AssertionError(f"{expr}: {err.read().decode()}") from err
        result: list[dict[str, Any]] = data["result"]
        return result


def _wait_until(predicate: Any, within: float, what: str) -> None:
    """Polls ``predicate`` (Prometheus offers no event for "scraped" or "evaluated"), bounded."""
    deadline = time.monotonic() + within
    stop = threading.Event()
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}")
        stop.wait(POLL)


@pytest.fixture(scope="module")
def prometheus(
    stack: Stack, traffic: Traffic, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Prometheus]:
    check.ensure_promtool(install=True)
    folder = tmp_path_factory.mktemp("prometheus")
    # The rules as committed, except that every group is evaluated each second (not every 30 s),
    # so the test need not wait for the first evaluation.
    rules = yaml.safe_load(check.RULES_FILE.read_text(encoding="utf-8"))
    for group in rules["groups"]:
        group["interval"] = "1s"
    (folder / "rules.yml").write_text(yaml.safe_dump(rules), encoding="utf-8")
    # The scrape targets are what Kubernetes service discovery would find from the pod annotations.
    targets = [
        {
            "targets": [f"127.0.0.1:{c.metrics_port}"],
            "labels": {"component": c.component, "namespace": "toolscout-dev", "pod": f"{c.deployment}-0"},
        }
        for c in stack.local.containers
        if c.metrics_port is not None
    ]
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "900ms"},
        "rule_files": [str(folder / "rules.yml")],
        "scrape_configs": [{"job_name": "toolscout", "static_configs": targets}],
    }
    (folder / "prometheus.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    port = free_port()
    log = (folder / "prometheus.log").open("wb")
    process = subprocess.Popen(
        [
            "prometheus",
            f"--config.file={folder / 'prometheus.yml'}",
            f"--storage.tsdb.path={folder / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--storage.tsdb.retention.time=1h",
            "--log.level=warn",
            # Exemplars (trace ids on the latency histograms), as the dashboard's panels show them.
            "--enable-feature=exemplar-storage",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    prom = Prometheus(f"http://127.0.0.1:{port}", process)

    def ready() -> bool:
        assert process.poll() is None, (folder / "prometheus.log").read_text()
        try:
            with urllib.request.urlopen(f"{prom.url}/-/ready", timeout=2) as response:  # noqa: S310
                return bool(response.status == 200)
        except OSError:
            return False

    try:
        _wait_until(ready, 60, "Prometheus to be ready")

        # Rates need two samples in their window; five successful scrapes of every target (all after
        # the traffic: Prometheus started after it) leave margin.
        def scraped() -> bool:
            counts = prom.query("count_over_time(up[1m]) >= 5 and up == 1")
            return len(counts) == len(targets)

        _wait_until(scraped, 60, "five scrapes of every service")
        yield prom
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def _dashboard_expressions() -> list[tuple[str, str]]:
    dashboard = json.loads((check.DEPLOY_DIR / "grafana" / "toolscout.json").read_text(encoding="utf-8"))
    out = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            out.append((f"{panel['title']} [{target['refId']}]", target["expr"]))
    for variable in dashboard["templating"]["list"]:
        match = re.fullmatch(r"label_values\((\w+), (\w+)\)", variable.get("definition", ""))
        if variable["type"] == "query":
            assert match, variable
            out.append((f"variable {variable['name']}", f"group by ({match.group(2)}) ({match.group(1)})"))
    return out


def _substitute(expr: str) -> str:
    """Grafana's variables as a user with "All" selected gets them; 15 s covers several 1 s scrapes."""
    replacements = {
        "$__rate_interval": "15s",
        "$__range": "5m",
        "$model": ".*",
        "$toolset": ".*",
        "$server": ".*",
    }
    for name, value in replacements.items():
        expr = expr.replace(name, value)
    assert "$" not in expr, expr
    return expr


def test_every_dashboard_expression_returns_data(prometheus: Prometheus) -> None:
    empty = []
    expressions = _dashboard_expressions()
    for title, expr in expressions:
        if not prometheus.query(_substitute(expr)):
            empty.append(f"{title}: {expr}")
    assert not empty, "no data for:\n" + "\n".join(empty)
    assert len(expressions) > 30


def test_every_recording_rule_returns_data_and_every_alert_evaluates(prometheus: Prometheus) -> None:
    rules = yaml.safe_load(check.RULES_FILE.read_text(encoding="utf-8"))
    names = [r.get("record") or r["alert"] for g in rules["groups"] for r in g["rules"]]

    def all_evaluated() -> bool:
        loaded = prometheus.get("/api/v1/rules")["groups"]
        evaluated = {
            r["name"]: r for g in loaded for r in g["rules"] if not r["lastEvaluation"].startswith("0001-")
        }
        return set(names) <= set(evaluated) and all(
            prometheus.query(r["record"]) for g in rules["groups"] for r in g["rules"] if "record" in r
        )

    _wait_until(all_evaluated, 30, "every rule to be evaluated with data")
    problems = []
    for group in prometheus.get("/api/v1/rules")["groups"]:
        for rule in group["rules"]:
            if rule["health"] != "ok" or rule.get("lastError"):
                problems.append(f"{rule['name']}: {rule['health']} {rule.get('lastError')}")
    assert not problems
    for group in rules["groups"]:
        for rule in group["rules"]:
            if "record" in rule:
                assert prometheus.query(rule["expr"]), rule["record"]
            else:
                prometheus.query(rule["expr"])  # raises on a parse or evaluation error


def test_services_exit_cleanly_within_their_grace_period_on_sigterm(
    stack: Stack, prometheus: Prometheus
) -> None:
    for channel in stack.channels.values():
        channel.close()
    stack.channels.clear()
    codes = stack.local.stop()
    # The example notes server (the MCP SDK's own HTTP runner) simply dies on SIGTERM; it saves
    # on every change, so there is nothing to drain. The three toolscout services must drain.
    assert {name: code for name, code in codes.items() if name != "toolscout-mcp-notes"} == {
        "toolscout-pool": 0,
        "toolscout-discovery": 0,
        "toolscout-orchestrator": 0,
        "toolscout-gateway": 0,
    }, _logs(stack.local)


def test_latency_exemplars_in_prometheus_name_traces_the_collector_received(
    prometheus: Prometheus, stack: Stack
) -> None:
    series = "toolscout_pool_tool_call_duration_seconds_bucket"

    def exemplars() -> list[dict[str, Any]]:
        data: list[dict[str, Any]] = prometheus.get(
            "/api/v1/query_exemplars", query=series, start=str(time.time() - 3600), end=str(time.time())
        )
        return [e for group in data for e in group["exemplars"]]

    _wait_until(lambda: bool(exemplars()), 30, "exemplars of the tool call latency")
    trace_ids = {e["labels"]["trace_id"] for e in exemplars()}
    received = {s.trace_id for s in stack.collector.spans if s.name == "call_tool"}
    assert trace_ids
    assert trace_ids <= received
