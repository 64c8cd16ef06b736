"""Both overlays render with a current kustomize (``kubectl kustomize``, v5) and pass
``kubernetes-validate --strict``; the
prometheus-operator component's kinds parse and their rules pass promtool; the rules' unit tests pass.
"""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from deploy import check
from toolscout_kit.config import parse_config
from toolscout_kit.tracing import resolve_tracing

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[dict[str, Any]]]:
    return {overlay: check.load_documents(check.render(overlay)) for overlay in check.OVERLAYS}


@pytest.fixture(scope="module")
def promtool() -> None:
    check.ensure_promtool(install=True)


def _by_kind(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def test_the_overlays_are_rendered_by_kustomize_5_or_later() -> None:
    kubectl, verb = check.kustomize_command()
    shown = subprocess.run(
        [kubectl, "version", "--client"], capture_output=True, text=True, timeout=60, check=True
    )
    major = int(shown.stdout.split("Kustomize Version: v", 1)[1].split(".", 1)[0])
    assert (verb, major >= 5) == ("kustomize", True), shown.stdout


@pytest.mark.parametrize("overlay", check.OVERLAYS)
def test_overlay_renders_and_passes_strict_schema_validation(
    rendered: dict[str, list[dict[str, Any]]], overlay: str
) -> None:
    docs = rendered[overlay]
    assert not [d for d in docs if d["kind"] in check.OPERATOR_KINDS]
    check.kubernetes_validate(docs, overlay)


def test_strict_validation_rejects_an_unknown_field(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = copy.deepcopy(rendered["dev"])
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    with pytest.raises(check.CheckError, match="readinesProbe"):
        check.kubernetes_validate(docs, "dev-typo")


@pytest.mark.parametrize(("overlay", "namespace"), [("dev", "toolscout-dev"), ("prod", "toolscout")])
def test_every_object_lands_in_the_overlay_namespace(
    rendered: dict[str, list[dict[str, Any]]], overlay: str, namespace: str
) -> None:
    for doc in rendered[overlay]:
        if doc["kind"] == "Namespace":
            assert doc["metadata"]["name"] == namespace
            assert doc["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
        else:
            assert doc["metadata"]["namespace"] == namespace, doc["metadata"]["name"]


@pytest.mark.parametrize("overlay", check.OVERLAYS)
def test_deployments_mount_the_generated_config_map_by_its_hashed_name(
    rendered: dict[str, list[dict[str, Any]]], overlay: str
) -> None:
    config_maps = _by_kind(rendered[overlay], "ConfigMap")
    # The shard count has no hash suffix: editing it reshards the running pool without a rollout.
    (name,) = [
        n for n in config_maps if n != "toolscout-pool-shards" and not n.startswith("toolscout-tracing-")
    ]
    assert name.startswith("toolscout-config-"), "hash suffix: a config change rolls the pods"
    workloads = [
        *_by_kind(rendered[overlay], "Deployment").values(),
        *_by_kind(rendered[overlay], "StatefulSet").values(),
    ]
    for deployment in workloads:
        volumes = deployment["spec"]["template"]["spec"]["volumes"]
        refs = [v["configMap"]["name"] for v in volumes if "configMap" in v]
        assert refs in ([name, "toolscout-pool-shards"], []), deployment["metadata"]["name"]


@pytest.mark.parametrize("overlay", check.OVERLAYS)
def test_every_service_sends_traces_where_the_one_tracing_config_map_value_says(
    rendered: dict[str, list[dict[str, Any]]], overlay: str
) -> None:
    config_maps = _by_kind(rendered[overlay], "ConfigMap")
    (name,) = [n for n in config_maps if n.startswith("toolscout-tracing-")]  # hashed: a change rolls pods
    data = config_maps[name]["data"]
    assert list(data) == ["OTEL_EXPORTER_OTLP_ENDPOINT"]
    endpoint = data["OTEL_EXPORTER_OTLP_ENDPOINT"]
    assert endpoint.startswith("http://")
    assert endpoint.endswith(":4317")
    (config_name,) = [n for n in config_maps if n.startswith("toolscout-config-")]
    document = yaml.safe_load(config_maps[config_name]["data"]["toolscout.yaml"])
    config = parse_config(document, env={"POD_NAMESPACE": "ns"})
    services = {
        **_by_kind(rendered[overlay], "Deployment"),
        **_by_kind(rendered[overlay], "StatefulSet"),
    }
    for component in ("pool", "discovery", "orchestrator", "gateway"):
        container = services[f"toolscout-{component}"]["spec"]["template"]["spec"]["containers"][0]
        assert container["envFrom"] == [{"configMapRef": {"name": name}}]
        plan = resolve_tracing(config.toolscout.tracing, data)
        assert (plan.exporter, plan.endpoint, plan.protocol) == ("otlp", endpoint, "grpc")
    # Egress to the collector's OTLP ports is allowed.
    policy = _by_kind(rendered[overlay], "NetworkPolicy")["toolscout-allow-otlp"]
    assert [p["port"] for p in policy["spec"]["egress"][0]["ports"]] == [4317, 4318]


def test_dev_runs_one_replica_with_debug_logs_and_small_requests(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    deployments = {**_by_kind(rendered["dev"], "Deployment"), **_by_kind(rendered["dev"], "StatefulSet")}
    assert deployments["toolscout-pool"]["spec"]["replicas"] == 1
    assert _by_kind(rendered["dev"], "ConfigMap")["toolscout-pool-shards"]["data"] == {"count": "1"}
    for component in ("pool", "discovery", "orchestrator"):
        deployment = deployments[f"toolscout-{component}"]
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["TOOLSCOUT_LOG_LEVEL"] == "DEBUG"
        assert container["image"] == "toolscout/toolscout:dev"
        memory = "320Mi" if component == "pool" else "128Mi"
        assert container["resources"]["requests"] == {"cpu": "50m", "memory": memory}
    for hpa in _by_kind(rendered["dev"], "HorizontalPodAutoscaler").values():
        assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 2)


def test_prod_pins_the_image_digest_runs_three_shards_and_keeps_the_stateless_services_available(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    deployments = {**_by_kind(rendered["prod"], "Deployment"), **_by_kind(rendered["prod"], "StatefulSet")}
    assert deployments["toolscout-pool"]["spec"]["replicas"] == 3
    assert _by_kind(rendered["prod"], "ConfigMap")["toolscout-pool-shards"]["data"] == {"count": "3"}
    for component in ("pool", "discovery", "orchestrator"):
        deployment = deployments[f"toolscout-{component}"]
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        assert "@sha256:" in container["image"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["TOOLSCOUT_LOG_LEVEL"] == "INFO"
    pdbs = _by_kind(rendered["prod"], "PodDisruptionBudget")
    for name, pdb in pdbs.items():
        # Every shard is needed: drains take the pool's pods one at a time.
        budget = {"maxUnavailable": 1} if name == "toolscout-pool" else {"minAvailable": 1}
        assert pdb["spec"] == {**budget, "selector": pdb["spec"]["selector"]}
    for hpa in _by_kind(rendered["prod"], "HorizontalPodAutoscaler").values():
        assert hpa["spec"]["minReplicas"] == 2
        assert hpa["spec"]["maxReplicas"] >= 10


def test_operator_component_kinds_parse_and_their_rules_pass_promtool(promtool: None) -> None:
    docs = check.load_documents(check.render("prod", components=[check.OPERATOR_COMPONENT]))
    kinds = {d["kind"] for d in docs if d["kind"] in check.OPERATOR_KINDS}
    assert kinds == {"ServiceMonitor", "PrometheusRule"}
    check.kubernetes_validate([d for d in docs if d["kind"] not in check.OPERATOR_KINDS], "prod+operator")
    check.check_operator_documents(docs, "prod+operator")

    broken = copy.deepcopy(docs)
    rule = next(d for d in broken if d["kind"] == "PrometheusRule")
    rule["spec"]["groups"][0]["rules"][0]["expr"] = "sum by (grpc_service (rate(x[5m]))"
    with pytest.raises(check.CheckError, match="groups differ"):
        check.check_operator_documents(broken, "prod+operator-broken")

    unmatched = copy.deepcopy(docs)
    monitor = next(d for d in unmatched if d["kind"] == "ServiceMonitor")
    monitor["spec"]["endpoints"][0]["port"] = "http-metrics"
    with pytest.raises(check.CheckError, match="no port named 'http-metrics'"):
        check.check_operator_documents(unmatched, "prod+operator-unmatched")


def test_the_per_user_tokens_component_shares_one_token_file_between_gateway_and_pool_shards() -> None:
    docs = check.load_documents(check.render("prod", components=[check.PER_USER_TOKENS_COMPONENT]))
    check.kubernetes_validate(docs, "prod+per-user-tokens")
    [claim] = [d for d in docs if d["kind"] == "PersistentVolumeClaim"]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert claim["metadata"]["namespace"] == "toolscout"
    mounted = {}
    for kind, name in (("Deployment", "toolscout-gateway"), ("StatefulSet", "toolscout-pool")):
        pod = _by_kind(docs, kind)[name]["spec"]["template"]["spec"]
        [volume] = [v for v in pod["volumes"] if "persistentVolumeClaim" in v]
        assert volume["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
        container = pod["containers"][0]
        [mount] = [m for m in container["volumeMounts"] if m["name"] == volume["name"]]
        env = {e["name"]: e for e in container["env"]}
        token_file = env["TOOLSCOUT_TOKEN_FILE"]["value"]
        assert token_file.startswith(mount["mountPath"] + "/")
        key = env["TOOLSCOUT_TOKEN_KEY"]["valueFrom"]["secretKeyRef"]
        # The retired key of a rotation comes from the same Secret, when it has one.
        previous = env["TOOLSCOUT_TOKEN_KEY_PREVIOUS"]["valueFrom"]["secretKeyRef"]
        assert (previous["name"], previous["optional"]) == (key["name"], True)
        mounted[name] = (token_file, key, previous)
    # Every gateway replica and pool shard: the same file, encrypted with the same key.
    assert mounted["toolscout-gateway"] == mounted["toolscout-pool"]
    # Only the gateway and the pool hold tokens.
    for name, deployment in _by_kind(docs, "Deployment").items():
        if name != "toolscout-gateway":
            assert "TOOLSCOUT_TOKEN_KEY" not in str(deployment)


def test_rules_pass_promtool_check_and_their_unit_tests(promtool: None, tmp_path: Path) -> None:
    assert "SUCCESS" in check.promtool_check_rules()
    assert "SUCCESS" in check.promtool_test_rules()
    broken = tmp_path / "broken.rules.yml"
    broken.write_text(
        check.RULES_FILE.read_text(encoding="utf-8").replace(
            "rate(grpc_server_handled_total[5m])", "rate(", 1
        ),
        encoding="utf-8",
    )
    with pytest.raises(check.CheckError, match="promtool check rules"):
        check.promtool_check_rules(broken)
