"""Static properties of deploy/ that need no kustomize, container engine or cluster.

The rendered overlays are validated against the Kubernetes schemas in
tests/e2e/test_deploy_render.py; here the base manifests, the Dockerfile, the config, the
dashboard and the rules are read as files and checked against each other and the services.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry

from deploy import check
from discovery_svc.metrics import DiscoveryMetrics
from mcp_gateway_svc.metrics import GatewayMetrics
from mcp_pool_svc.metrics import PoolMetrics
from orchestrator_svc.metrics import OrchestratorMetrics
from toolscout_kit.config import ToolscoutConfig, parse_config
from toolscout_kit.metrics import GrpcServerMetrics
from toolscout_kit.tracing import Tracing, exemplar, resolve_tracing

DEPLOY = check.DEPLOY_DIR
REPO = check.REPO_ROOT
SERVICES = {
    # component: (module, gRPC service name, config section)
    "pool": ("mcp_pool_svc", "toolscout.mcp_pool.v1.McpPool", "pool"),
    "discovery": ("discovery_svc", "toolscout.discovery.v1.Discovery", "discovery"),
    "orchestrator": ("orchestrator_svc", "toolscout.orchestrator.v1.Orchestrator", "orchestrator"),
}
# Every service's workload: the gRPC ones above and the MCP gateway (HTTP).
MODULES = {**{c: m for c, (m, _, _) in SERVICES.items()}, "gateway": "mcp_gateway_svc"}
POD_ENV = {"POD_NAMESPACE": "toolscout-test"}


def _base_documents() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((DEPLOY / "base" / "kustomization.yaml").read_text(encoding="utf-8"))
    docs: list[dict[str, Any]] = []
    for resource in kustomization["resources"]:
        text = (DEPLOY / "base" / resource).read_text(encoding="utf-8")
        docs.extend(d for d in yaml.safe_load_all(text) if d)
    return docs


DOCS = _base_documents()


def _of_kind(kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in DOCS if d["kind"] == kind}


def _workloads() -> dict[str, dict[str, Any]]:
    """Deployments and StatefulSets (the pool) by name: everything that runs pods."""
    return {**_of_kind("Deployment"), **_of_kind("StatefulSet")}


def _service_deployment(component: str) -> dict[str, Any]:
    return _workloads()[f"toolscout-{component}"]


def _container(deployment: dict[str, Any]) -> dict[str, Any]:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1, "one container per pod: the probes and ports below assume it"
    return dict(containers[0])


def _config() -> ToolscoutConfig:
    raw = yaml.safe_load((DEPLOY / "base" / "toolscout.yaml").read_text(encoding="utf-8"))
    return parse_config(raw, source="deploy/base/toolscout.yaml", base_dir=REPO, env=POD_ENV)


# --- Dockerfile ------------------------------------------------------------------------------


def _dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs with comments dropped and continuation lines joined."""
    logical: list[str] = []
    pending = ""
    for line in (DEPLOY / "Dockerfile").read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        logical.append(pending + stripped)
        pending = ""
    assert not pending, "the Dockerfile ends inside a continuation line"
    out = []
    for entry in logical:
        keyword, _, rest = entry.partition(" ")
        out.append((keyword.upper(), rest.strip()))
    return out


def _stages() -> list[list[tuple[str, str]]]:
    stages: list[list[tuple[str, str]]] = []
    for keyword, rest in _dockerfile_instructions():
        if keyword == "FROM":
            stages.append([])
        if stages:
            stages[-1].append((keyword, rest))
    return stages


def test_dockerfile_is_multi_stage_on_a_pinned_base() -> None:
    instructions = _dockerfile_instructions()
    args = dict(rest.split("=", 1) for keyword, rest in instructions if keyword == "ARG" and "=" in rest)
    froms = [rest for keyword, rest in instructions if keyword == "FROM"]
    assert len(froms) >= 2
    for line in froms:
        image = line.split()[0]
        image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], image)
        name, _, tag = image.partition(":")
        assert name == "python"
        # A patch-level tag (3.11.N) or a digest; never a floating "3.11-slim" or "latest".
        assert re.match(r"3\.11\.\d+-slim", tag) or "@sha256:" in image, image
    assert [line.split()[-1] for line in froms] == ["build", "runtime"]


def test_dockerfile_installs_exactly_the_lock_without_dev_dependencies() -> None:
    runs = [rest for keyword, rest in _stages()[0] if keyword == "RUN"]
    syncs = [r for r in runs if "uv sync" in r]
    assert syncs
    for sync in syncs:
        assert "--frozen" in sync
        assert "--no-dev" in sync
    assert any(re.search(r"uv==\$\{UV_VERSION\}|uv==\d", r) for r in runs), "uv itself is pinned"


def test_dockerfile_runtime_runs_as_the_numeric_user_the_manifests_expect() -> None:
    runtime = _stages()[-1]
    users = [rest for keyword, rest in runtime if keyword == "USER"]
    assert users, "the runtime stage sets USER"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit()
    assert int(uid) != 0
    for deployment in _workloads().values():
        pod = deployment["spec"]["template"]["spec"]["securityContext"]
        assert (pod["runAsUser"], pod["runAsGroup"]) == (int(uid), int(gid))
    cmd = [rest for keyword, rest in runtime if keyword == "CMD"][-1]
    assert isinstance(json.loads(cmd), list), "CMD in exec form (signals reach python, not a shell)"


def test_dockerfile_ships_every_module_and_script_the_manifests_run() -> None:
    runtime_copies = [rest for keyword, rest in _stages()[-1] if keyword == "COPY"]
    build_copies = [rest for keyword, rest in _stages()[0] if keyword == "COPY"]
    copied_sources = {shlex.split(c)[-2].rstrip("/") for c in build_copies}
    image_paths = {shlex.split(c)[-1] for c in runtime_copies}
    config = _config()
    for deployment in _workloads().values():
        container = _container(deployment)
        argv = [*container["command"], *container.get("args", [])]
        assert argv[0] == "python"
        if argv[1] == "-m":
            assert argv[2] in copied_sources, f"{argv[2]} is not copied into the build stage"
            assert (REPO / argv[2] / "__main__.py").is_file()
        for arg in argv[1:]:
            if arg.startswith("/app/") and not arg.startswith("/app/.venv"):
                assert any(arg.startswith(p) for p in image_paths), f"{arg} is not in the image"
                assert (REPO / arg.removeprefix("/app/")).is_file(), f"{arg}: no such file in the repository"
    for name, server in config.servers.items():
        for arg in getattr(server, "args", []):
            if arg.startswith("/app/"):
                assert any(arg.startswith(p) for p in image_paths), (
                    f"servers.{name}: {arg} is not in the image"
                )
                assert (REPO / arg.removeprefix("/app/")).is_file()


def test_dockerignore_keeps_what_the_dockerfile_copies() -> None:
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text(encoding="utf-8").splitlines()
    kept = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    for stage in _stages():
        for keyword, rest in stage:
            if keyword == "COPY" and "--from=" not in rest:
                for source in shlex.split(rest)[:-1]:
                    path = source.rstrip("/")
                    assert any(path == k or path.startswith(f"{k}/") for k in kept), (
                        f"{source} is copied but excluded from the build context"
                    )


# --- Deployments -----------------------------------------------------------------------------


@pytest.mark.parametrize("deployment", sorted(_workloads()))
def test_every_pod_runs_hardened(deployment: str) -> None:
    spec = _workloads()[deployment]["spec"]["template"]["spec"]
    assert spec["automountServiceAccountToken"] is False
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    container = _container(_workloads()[deployment])
    sc = container["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc.get("privileged", False) is False
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]], "a writable /tmp on a read-only root"
    for kind in ("requests", "limits"):
        assert set(container["resources"][kind]) == {"cpu", "memory"}


@pytest.mark.parametrize("component", sorted(SERVICES))
def test_grpc_probes_check_the_service_health_name_on_its_listen_port(component: str) -> None:
    _, service_name, section = SERVICES[component]
    settings = getattr(_config().toolscout, section)
    host, _, port = settings.listen.rpartition(":")
    assert host == "0.0.0.0", "listen on every interface inside the pod"
    container = _container(_service_deployment(component))
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["grpc"] == int(port)
    assert ports["metrics"] == settings.metrics_port
    assert settings.metrics_host == "0.0.0.0"
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        grpc_probe = container[probe]["grpc"]
        assert grpc_probe["port"] == int(port)
    # Readiness and startup follow the service's own status (NOT_SERVING on shutdown);
    # liveness only asks whether the server answers at all.
    assert container["startupProbe"]["grpc"]["service"] == service_name
    assert container["readinessProbe"]["grpc"]["service"] == service_name
    assert container["livenessProbe"]["grpc"]["service"] == ""


def test_the_gateway_probes_its_http_health_on_its_listen_port() -> None:
    settings = _config().toolscout.gateway
    host, _, port = settings.listen.rpartition(":")
    assert host == "0.0.0.0"
    container = _container(_service_deployment("gateway"))
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["http"] == int(port)
    assert ports["metrics"] == settings.metrics_port
    assert settings.metrics_host == "0.0.0.0"
    # Readiness: discovery has answered (and the replica is not stopping); liveness: it answers.
    assert container["startupProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}


@pytest.mark.parametrize("component", sorted(MODULES))
def test_termination_grace_outlasts_pre_stop_and_shutdown_grace(component: str) -> None:
    deployment = _service_deployment(component)
    settings = getattr(_config().toolscout, component)
    container = _container(deployment)
    pre_stop = container["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep"
    grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace > float(pre_stop[1]) + settings.shutdown_grace


@pytest.mark.parametrize("component", sorted(MODULES))
def test_deployments_start_their_module_with_the_mounted_config(component: str) -> None:
    module = MODULES[component]
    container = _container(_service_deployment(component))
    assert container["command"] == ["python", "-m", module]
    config_path = container["args"][container["args"].index("--config") + 1]
    env = {e["name"]: e for e in container["env"]}
    assert env["TOOLSCOUT_CONFIG"]["value"] == config_path
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in _service_deployment(component)["spec"]["template"]["spec"]["volumes"]}
    mount_dir = str(Path(config_path).parent)
    assert volumes[mounts[mount_dir]]["configMap"]["name"] == "toolscout-config"
    annotations = _service_deployment(component)["spec"]["template"]["metadata"]["annotations"]
    metrics_port = {p["name"]: p["containerPort"] for p in container["ports"]}["metrics"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == str(metrics_port)


def test_provider_keys_and_auth_token_come_from_optional_secret_references() -> None:
    assert not _of_kind("Secret"), "no Secret is committed; users create it"
    key_refs: dict[str, set[str]] = {}
    for name, deployment in _workloads().items():
        for env in _container(deployment).get("env", []):
            if "value" in env:
                assert not re.search(r"sk-|api[_-]?key", str(env["value"]), re.IGNORECASE)
            ref = env.get("valueFrom", {}).get("secretKeyRef")
            if ref:
                assert ref["optional"] is True
                key_refs.setdefault(env["name"], set()).add(name)
    assert key_refs["OPENAI_API_KEY"] == {"toolscout-orchestrator"}
    assert key_refs["ANTHROPIC_API_KEY"] == {"toolscout-orchestrator"}
    services = {f"toolscout-{c}" for c in MODULES}
    assert key_refs[_config().toolscout.security.auth_token_env] == services


# --- Services, targets, scaling ---------------------------------------------------------------


def test_service_targets_are_headless_services_resolved_by_dns() -> None:
    services = _of_kind("Service")
    settings = _config().toolscout
    targets = {
        ("discovery", "pool"): settings.discovery.pool_target,
        ("orchestrator", "pool"): settings.orchestrator.pool_target,
        ("orchestrator", "discovery"): settings.orchestrator.discovery_target,
        ("gateway", "pool"): settings.gateway.pool_target,
        ("gateway", "discovery"): settings.gateway.discovery_target,
    }
    for (_, callee), target in targets.items():
        match = re.fullmatch(r"dns:///([a-z0-9-]+)\.toolscout-test\.svc\.cluster\.local:(\d+)", target)
        assert match, f"{target}: dns:///<service>.<namespace>.svc.cluster.local:<port>"
        service = services[match.group(1)]
        assert match.group(1) == f"toolscout-{callee}"
        assert service["spec"]["clusterIP"] == "None", "headless, so DNS lists every pod"
        assert int(match.group(2)) in {p["port"] for p in service["spec"]["ports"]}


def test_every_service_selects_exactly_one_deployment_by_its_name_label() -> None:
    deployments = _workloads()
    for service in _of_kind("Service").values():
        selector = service["spec"]["selector"]
        matching = [
            d
            for d in deployments.values()
            if all(d["spec"]["template"]["metadata"]["labels"].get(k) == v for k, v in selector.items())
        ]
        assert [d["metadata"]["name"] for d in matching] == [selector["app.kubernetes.io/name"]]
        container_ports = {p["name"] for p in _container(matching[0])["ports"]}
        for port in service["spec"]["ports"]:
            assert port["targetPort"] in container_ports


def test_only_the_stateless_services_autoscale_and_every_deployment_has_a_pdb() -> None:
    hpas = _of_kind("HorizontalPodAutoscaler")
    assert {h["spec"]["scaleTargetRef"]["name"] for h in hpas.values()} == {
        "toolscout-discovery",
        "toolscout-orchestrator",
        "toolscout-gateway",
    }
    deployments = _workloads()
    for hpa in hpas.values():
        # The HPA owns the count; a replicas field would reset it on every apply.
        assert "replicas" not in deployments[hpa["spec"]["scaleTargetRef"]["name"]]["spec"]
    pdbs = _of_kind("PodDisruptionBudget")
    for component in MODULES:
        name = f"toolscout-{component}"
        assert pdbs[name]["spec"]["selector"] == _service_deployment(component)["spec"]["selector"]


def test_the_config_map_config_loads_and_keeps_stateful_servers_out_of_the_pool_pod() -> None:
    config = _config()
    assert config.tool_discovery.enabled
    assert any(s.defer_loading for s in config.servers.values()), "the demo defers something"
    remote = {name: s for name, s in config.servers.items() if hasattr(s, "url")}
    assert "notes" in remote, "the stateful example server runs as its own deployment"
    assert remote["notes"].url.startswith("http://toolscout-mcp-notes.toolscout-test.svc.cluster.local:")
    notes = _of_kind("Deployment")["toolscout-mcp-notes"]
    assert notes["spec"]["replicas"] == 1
    assert notes["spec"]["strategy"]["type"] == "Recreate"


def test_the_base_sends_no_traces_until_an_overlay_names_a_collector() -> None:
    kustomization = yaml.safe_load((DEPLOY / "base" / "kustomization.yaml").read_text(encoding="utf-8"))
    (tracing,) = [g for g in kustomization["configMapGenerator"] if g["name"] == "toolscout-tracing"]
    assert tracing["literals"] == ["OTEL_EXPORTER_OTLP_ENDPOINT="]
    env = dict(item.split("=", 1) for item in tracing["literals"])
    assert resolve_tracing(_config().toolscout.tracing, env).exporter == "none"
    for component in MODULES:
        container = _container(_service_deployment(component))
        assert container["envFrom"] == [{"configMapRef": {"name": "toolscout-tracing"}}]


def test_the_pool_is_a_statefulset_whose_pods_are_the_shards_of_the_config() -> None:
    pool = _of_kind("StatefulSet")["toolscout-pool"]
    assert "toolscout-pool" not in _of_kind("Deployment")
    spec = pool["spec"]
    assert spec["podManagementPolicy"] == "Parallel"
    service = _of_kind("Service")[spec["serviceName"]]
    assert service["spec"]["clusterIP"] == "None", "headless: one DNS name per pod"
    shards = _config().toolscout.pool.shards
    assert shards.statefulset == pool["metadata"]["name"]
    grpc_port = {p["name"]: p["port"] for p in service["spec"]["ports"]}["grpc"]
    assert shards.address_pattern == (
        f"dns:///{pool['metadata']['name']}-{{ordinal}}.{spec['serviceName']}.toolscout-test.svc.cluster.local:{grpc_port}"
    )
    env = {e["name"]: e for e in _container(pool)["env"]}
    assert env["TOOLSCOUT_POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert _of_kind("PodDisruptionBudget")["toolscout-pool"]["spec"]["maxUnavailable"] == 1


@pytest.mark.parametrize("component", sorted(MODULES))
def test_every_service_reads_the_shard_count_from_the_unhashed_config_map(
    component: str, tmp_path: Path
) -> None:
    workload = _service_deployment(component)
    container = _container(workload)
    count_file = {e["name"]: e.get("value") for e in container["env"]}["TOOLSCOUT_SHARD_COUNT_FILE"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in workload["spec"]["template"]["spec"]["volumes"]}
    assert volumes[mounts[str(Path(count_file).parent)]]["configMap"]["name"] == "toolscout-pool-shards"
    kustomization = yaml.safe_load((DEPLOY / "base" / "kustomization.yaml").read_text(encoding="utf-8"))
    generated = {g["name"]: g for g in kustomization["configMapGenerator"]}
    assert generated["toolscout-pool-shards"]["options"]["disableNameSuffixHash"] is True
    assert generated["toolscout-pool-shards"]["literals"] == [f"{Path(count_file).name}=1"]
    # The config takes the count from that file.
    (tmp_path / "count").write_text("3")
    raw = yaml.safe_load((DEPLOY / "base" / "toolscout.yaml").read_text(encoding="utf-8"))
    env = {**POD_ENV, "TOOLSCOUT_SHARD_COUNT_FILE": str(tmp_path / "count")}
    assert parse_config(raw, base_dir=REPO, env=env).toolscout.pool.shards.count == 3


# --- NetworkPolicies ---------------------------------------------------------------------------

PODS = {
    "gateway": "toolscout-gateway",
    "orchestrator": "toolscout-orchestrator",
    "discovery": "toolscout-discovery",
    "pool": "toolscout-pool",
    "notes": "toolscout-mcp-notes",
}


def _pod_labels(name: str) -> dict[str, str]:
    return dict(_workloads()[name]["spec"]["template"]["metadata"]["labels"])


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def _policies_for(labels: dict[str, str], policy_type: str) -> Iterator[dict[str, Any]]:
    for policy in _of_kind("NetworkPolicy").values():
        spec = policy["spec"]
        if policy_type in spec["policyTypes"] and _selects(spec["podSelector"], labels):
            yield spec


def _peer_allows(peers: list[dict[str, Any]] | None, labels: dict[str, str]) -> bool:
    if peers is None:
        return True
    return any("podSelector" in p and _selects(p["podSelector"], labels) for p in peers)


def _allowed(src: str, dst: str) -> bool:
    """Whether both the source's egress and the destination's ingress admit src → dst (same namespace)."""
    src_labels, dst_labels = _pod_labels(PODS[src]), _pod_labels(PODS[dst])
    egress = any(
        _peer_allows(rule.get("to"), dst_labels)
        for spec in _policies_for(src_labels, "Egress")
        for rule in spec.get("egress", [])
        if any("podSelector" in p for p in rule.get("to", [{"podSelector": {}}]))
    )
    ingress = any(
        _peer_allows(rule.get("from"), src_labels)
        or any(p == {"namespaceSelector": {}} for p in rule["from"])
        for spec in _policies_for(dst_labels, "Ingress")
        for rule in spec.get("ingress", [])
    )
    return egress and ingress


def test_network_policies_allow_exactly_the_calls_of_the_architecture() -> None:
    expected = {
        ("orchestrator", "discovery"),
        ("orchestrator", "pool"),
        ("gateway", "discovery"),
        ("gateway", "pool"),
        ("discovery", "pool"),
        ("pool", "notes"),
    }
    actual = {(src, dst) for src in PODS for dst in PODS if src != dst and _allowed(src, dst)}
    assert actual == expected
    # CIDR rules (hosted LLM APIs and MCP servers) open HTTPS only, never a port of ours.
    for policy in _of_kind("NetworkPolicy").values():
        for rule in policy["spec"].get("egress", []):
            if any("ipBlock" in peer for peer in rule["to"]):
                assert rule["ports"] == [{"port": 443, "protocol": "TCP"}]


def test_gateway_replicas_may_reach_each_other_to_forward_a_session() -> None:
    labels = _pod_labels(PODS["gateway"])
    egress = [
        rule
        for spec in _policies_for(labels, "Egress")
        for rule in spec.get("egress", [])
        if _peer_allows(rule.get("to"), labels)
    ]
    assert [r["ports"] for r in egress] == [[{"port": 50054, "protocol": "TCP"}]]
    peers = _of_kind("Service")["toolscout-gateway-peers"]
    assert peers["spec"]["clusterIP"] == "None"
    assert peers["spec"]["publishNotReadyAddresses"] is True
    assert _config().toolscout.gateway.peers == [
        "toolscout-gateway-peers.toolscout-test.svc.cluster.local:50054"
    ]


def test_every_pod_is_under_the_default_deny_and_may_resolve_dns() -> None:
    policies = _of_kind("NetworkPolicy")
    deny = policies["toolscout-default-deny"]["spec"]
    assert deny["policyTypes"] == ["Ingress", "Egress"]
    assert "ingress" not in deny
    assert "egress" not in deny
    for name in PODS.values():
        labels = _pod_labels(name)
        assert _selects(deny["podSelector"], labels), f"{name} escapes the default deny"
        assert _selects(policies["toolscout-allow-dns"]["spec"]["podSelector"], labels)


# --- rules and dashboard -----------------------------------------------------------------------


def _exported_metric_names() -> set[str]:
    """Metric names the kit's and the services' metrics register (counters get _total); the old
    names served for a release after a rename do not count."""
    registry = CollectorRegistry()
    for metrics in (GrpcServerMetrics, PoolMetrics, DiscoveryMetrics, OrchestratorMetrics, GatewayMetrics):
        metrics(registry)
    names: set[str] = set()
    for family in registry.collect():
        if family.documentation.startswith("Deprecated: renamed to"):
            continue
        if family.type == "counter":
            names.add(f"{family.name}_total")
        elif family.type == "histogram":
            names.update({f"{family.name}_bucket", f"{family.name}_count", f"{family.name}_sum"})
        else:
            names.add(family.name)
    return names


_METRIC = re.compile(r"\b((?:grpc_server|toolscout)_[a-z_]+)\b")


def _dashboard_expressions() -> list[tuple[str, str]]:
    dashboard = json.loads((DEPLOY / "grafana" / "toolscout.json").read_text(encoding="utf-8"))
    return [(p["title"], t["expr"]) for p in dashboard["panels"] for t in p.get("targets", [])]


def _rule_expressions() -> list[tuple[str, str]]:
    rules = yaml.safe_load(check.RULES_FILE.read_text(encoding="utf-8"))
    return [(r.get("record") or r["alert"], r["expr"]) for g in rules["groups"] for r in g["rules"]]


def test_dashboard_and_rules_only_use_metrics_the_services_export() -> None:
    exported = _exported_metric_names()
    recorded = {
        r["record"]
        for g in yaml.safe_load(check.RULES_FILE.read_text())["groups"]
        for r in g["rules"]
        if "record" in r
    }
    for where, expr in [*_dashboard_expressions(), *_rule_expressions()]:
        for name in _METRIC.findall(re.sub(r"[a-z_]+:[a-z0-9_:]+", "", expr)):
            assert name in exported, f"{where}: {name} is not exported by any service"
        for name in re.findall(r"\b[a-z_]+:[a-z0-9_:]+\b", expr):
            assert name in recorded, f"{where}: {name} is not a recording rule"


def test_dashboard_covers_savings_search_tools_servers_llm_and_grpc() -> None:
    dashboard = json.loads((DEPLOY / "grafana" / "toolscout.json").read_text(encoding="utf-8"))
    rows = [p["title"] for p in dashboard["panels"] if p["type"] == "row"]
    assert rows == ["Token savings", "Search", "Tool calls", "MCP servers", "LLM", "gRPC", "MCP gateway"]
    exprs = " ".join(e for _, e in _dashboard_expressions())
    for needle in (
        "toolscout_orchestrator_tokens_saved_total",
        "toolscout_orchestrator_definition_tokens_sent_total",
        "histogram_quantile(0.5, sum by (mode, le) (rate(toolscout_discovery_search_duration_seconds_bucket",
        "histogram_quantile(0.99, sum by (mode, le) (rate(toolscout_discovery_search_duration_seconds_bucket",
        "toolscout_discovery_searches_total",
        'toolscout_pool_tool_calls_total{server=~"$server",outcome!="ok"}',
        "toolscout_pool_server_up",
        "toolscout_pool_server_restarts_total",
        "toolscout_orchestrator_llm_tokens_total",
        "toolscout_orchestrator_llm_call_duration_seconds_bucket",
        'grpc_server_handled_total{grpc_code!="OK"}',
        "toolscout_gateway_requests_total",
        "mode:toolscout_gateway_errors:ratio_rate5m",
        "toolscout_gateway_search_duration_seconds_bucket",
        "toolscout_gateway_tool_calls_total",
        "toolscout_gateway_open_sessions",
    ):
        assert needle in exprs
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}


def test_prometheus_rule_component_embeds_the_rules_file_unchanged() -> None:
    committed = yaml.safe_load(
        (DEPLOY / "components" / "prometheus-operator" / "prometheusrule.yaml").read_text(encoding="utf-8")
    )
    assert committed == check.prometheus_rule_document(), "run deploy/check.sh --sync-rules"


def test_every_alert_has_a_severity_summary_and_runbook() -> None:
    rules = yaml.safe_load(check.RULES_FILE.read_text(encoding="utf-8"))
    alerts = [r for g in rules["groups"] for r in g["rules"] if "alert" in r]
    assert {a["alert"] for a in alerts} >= {
        "ToolscoutGrpcErrorRateHigh",
        "ToolscoutMcpServerDown",
        "ToolscoutMcpServerCrashLooping",
        "ToolscoutSearchLatencyHigh",
        "ToolscoutLlmErrorRateHigh",
        "ToolscoutTokenSavingsDropping",
        "ToolscoutGatewayErrorRateHigh",
    }
    for alert in alerts:
        assert alert["labels"]["severity"] in {"critical", "warning", "info"}
        assert alert["annotations"]["summary"]
        assert alert["annotations"]["runbook"] == "deploy/README.md#alerts"
    tested = yaml.safe_load(check.RULES_TEST_FILE.read_text(encoding="utf-8"))
    covered = {
        t["alertname"] for case in tested["tests"] for t in case.get("alert_rule_test", []) if t["exp_alerts"]
    }
    assert covered == {a["alert"] for a in alerts}, "every alert has a promtool test where it fires"


def test_dashboard_panels_fit_the_grid_without_overlapping() -> None:
    dashboard = json.loads((DEPLOY / "grafana" / "toolscout.json").read_text(encoding="utf-8"))
    taken: set[tuple[int, int]] = set()
    for panel in dashboard["panels"]:
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= 24, panel["title"]
        cells = {
            (x, y) for x in range(pos["x"], pos["x"] + pos["w"]) for y in range(pos["y"], pos["y"] + pos["h"])
        }
        assert not cells & taken, f"{panel['title']} overlaps another panel"
        taken |= cells


def test_latency_panels_show_exemplars_that_link_to_the_trace_they_name() -> None:
    dashboard = json.loads((DEPLOY / "grafana" / "toolscout.json").read_text(encoding="utf-8"))
    latency = [
        t
        for p in dashboard["panels"]
        for t in p.get("targets", [])
        if "_seconds_bucket" in t["expr"] and "histogram_quantile" in t["expr"]
    ]
    assert len(latency) >= 8
    assert all(t.get("exemplar") is True for t in latency)
    sources = yaml.safe_load((DEPLOY / "grafana" / "datasources.yaml").read_text(encoding="utf-8"))
    by_uid = {d["uid"]: d for d in sources["datasources"]}
    (link,) = by_uid["prometheus"]["jsonData"]["exemplarTraceIdDestinations"]
    assert by_uid[link["datasourceUid"]]["type"] == "tempo"
    # The label the services put on their exemplars.
    with Tracing("toolscout-test", TracerProvider()).span("request"):
        assert link["name"] in (exemplar() or {})
    assert {v["name"] for v in dashboard["templating"]["list"] if v["type"] == "datasource"} == {
        "datasource",
        "tracing",
    }
