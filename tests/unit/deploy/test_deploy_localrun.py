"""deploy.localrun's pod → process translation, on the base manifests (no kustomize, no processes)."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from deploy import check
from deploy.localrun import LocalStack, PlanError
from toolscout_kit.config import load_config

NAMESPACE = "toolscout-test"


def _docs() -> list[dict[str, Any]]:
    """The base as kustomize would render it, minus the name hash: documents plus the ConfigMap."""
    base = check.DEPLOY_DIR / "base"
    kustomization = yaml.safe_load((base / "kustomization.yaml").read_text(encoding="utf-8"))
    docs: list[dict[str, Any]] = []
    for resource in kustomization["resources"]:
        docs.extend(d for d in yaml.safe_load_all((base / resource).read_text(encoding="utf-8")) if d)
    docs.append(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "toolscout-config"},
            "data": {"toolscout.yaml": (base / "toolscout.yaml").read_text(encoding="utf-8")},
        }
    )
    for generated in kustomization["configMapGenerator"]:
        if "literals" in generated:
            data = dict(literal.split("=", 1) for literal in generated["literals"])
            docs.append(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": generated["name"]},
                    "data": data,
                }
            )
    for doc in docs:
        doc["metadata"]["namespace"] = NAMESPACE
    return docs


def test_the_mounted_config_is_rewritten_to_loopback_ports_and_repository_paths(tmp_path: Path) -> None:
    stack = LocalStack(_docs(), tmp_path)
    pool = stack.container("pool")
    config_path = Path(pool.argv[pool.argv.index("--config") + 1])
    assert config_path.is_relative_to(tmp_path)
    assert pool.env["TOOLSCOUT_CONFIG"] == str(config_path)
    assert pool.env["POD_NAMESPACE"] == NAMESPACE

    config = load_config(config_path)
    ports = stack.port_map
    assert config.toolscout.pool.listen == f"127.0.0.1:{ports[50051]}"
    assert config.toolscout.pool.metrics_port == ports[9101]
    assert config.toolscout.pool.metrics_host == "127.0.0.1"
    # The scheme stays, so the same dns resolver and round_robin path runs as in the cluster.
    assert config.toolscout.discovery.pool_target == f"dns:///127.0.0.1:{ports[50051]}"
    assert config.toolscout.orchestrator.discovery_target == f"dns:///127.0.0.1:{ports[50052]}"
    notes = config.servers["notes"]
    assert getattr(notes, "url", None) == f"http://127.0.0.1:{ports[8000]}/mcp"
    # The StatefulSet's one pod here is shard 0 of the count in the shards ConfigMap.
    assert pool.env["TOOLSCOUT_POD_NAME"] == "toolscout-pool-0"
    assert Path(pool.env["TOOLSCOUT_SHARD_COUNT_FILE"]).read_text() == "1"
    weather_script = Path(getattr(config.servers["weather"], "args", [""])[0])
    assert weather_script == check.REPO_ROOT / "examples" / "servers" / "weather.py"


def test_argv_env_probes_and_metrics_follow_the_port_map(tmp_path: Path) -> None:
    stack = LocalStack(_docs(), tmp_path)
    discovery = stack.container("discovery")
    assert Path(discovery.argv[0]).parent == Path(sys.executable).parent
    assert discovery.argv[1:3] == ["-m", "discovery_svc"]
    assert discovery.cwd == check.REPO_ROOT
    assert discovery.probes["readinessProbe"]["grpc"] == {
        "port": stack.port_map[50052],
        "service": "toolscout.discovery.v1.Discovery",
    }
    assert discovery.metrics_port == stack.port_map[9102]
    assert discovery.env["HOME"].startswith(str(tmp_path))
    assert discovery.env["PATH"].split(":")[0] == str(Path(sys.prefix) / "bin")

    notes = stack.container("mcp-server")
    assert notes.env["HOST"] == "127.0.0.1"
    assert notes.env["PORT"] == str(stack.port_map[8000])
    assert notes.probes["readinessProbe"]["tcpSocket"]["port"] == stack.port_map[8000]
    assert notes.env["NOTES_FILE"].startswith(str(tmp_path))


def test_secrets_fill_references_and_absent_optional_keys_are_left_out(tmp_path: Path) -> None:
    without = LocalStack(_docs(), tmp_path / "a").container("orchestrator")
    assert "OPENAI_API_KEY" not in without.env
    assert "TOOLSCOUT_AUTH_TOKEN" not in without.env
    secrets = {"toolscout-provider-keys": {"OPENAI_API_KEY": "sk-x"}, "toolscout-auth": {"token": "t"}}
    with_keys = LocalStack(_docs(), tmp_path / "b", secrets=secrets).container("orchestrator")
    assert with_keys.env["OPENAI_API_KEY"] == "sk-x"
    assert with_keys.env["TOOLSCOUT_AUTH_TOKEN"] == "t"
    assert "ANTHROPIC_API_KEY" not in with_keys.env


def _deployment(docs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(
        d for d in docs if d["kind"] in ("Deployment", "StatefulSet") and d["metadata"]["name"] == name
    )


def test_a_required_secret_that_is_missing_cannot_be_planned(tmp_path: Path) -> None:
    docs = _docs()
    env = _deployment(docs, "toolscout-orchestrator")["spec"]["template"]["spec"]["containers"][0]["env"]
    next(e for e in env if e["name"] == "OPENAI_API_KEY")["valueFrom"]["secretKeyRef"]["optional"] = False
    with pytest.raises(PlanError, match="needs Secret toolscout-provider-keys/OPENAI_API_KEY"):
        LocalStack(docs, tmp_path)


def test_an_address_of_a_service_that_does_not_exist_cannot_be_planned(tmp_path: Path) -> None:
    docs = _docs()
    config_map = next(d for d in docs if d["kind"] == "ConfigMap")
    config_map["data"]["toolscout.yaml"] = config_map["data"]["toolscout.yaml"].replace(
        "dns:///toolscout-pool.", "dns:///toolscout-mcp-pool.", 1
    )
    with pytest.raises(PlanError, match="no Service toolscout-mcp-pool"):
        LocalStack(docs, tmp_path)


def test_a_probe_on_a_port_the_container_does_not_declare_cannot_be_planned(tmp_path: Path) -> None:
    docs = _docs()
    container = _deployment(docs, "toolscout-pool")["spec"]["template"]["spec"]["containers"][0]
    container["readinessProbe"]["grpc"]["port"] = 50052
    with pytest.raises(PlanError, match="readinessProbe port 50052"):
        LocalStack(docs, tmp_path)


def test_two_deployments_claiming_one_container_port_cannot_be_planned(tmp_path: Path) -> None:
    docs = _docs()
    clone = copy.deepcopy(_deployment(docs, "toolscout-pool"))
    clone["metadata"]["name"] = "toolscout-pool-copy"
    docs.append(clone)
    with pytest.raises(PlanError, match="containerPort 50051 is used by"):
        LocalStack(docs, tmp_path)


def test_a_statefulset_of_several_shards_cannot_be_planned(tmp_path: Path) -> None:
    docs = _docs()
    _deployment(docs, "toolscout-pool")["spec"]["replicas"] = 3
    with pytest.raises(PlanError, match="runs one pod locally"):
        LocalStack(docs, tmp_path)


def test_the_shard_address_pattern_becomes_the_address_of_the_pod_run_here(tmp_path: Path) -> None:
    stack = LocalStack(_docs(), tmp_path)
    discovery = stack.container("discovery")
    config = load_config(discovery.argv[discovery.argv.index("--config") + 1])
    assert config.toolscout.pool.shards.addresses == [f"dns:///127.0.0.1:{stack.port_map[50051]}"]
    assert config.toolscout.pool.shards.count == 1
