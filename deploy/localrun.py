"""Run rendered Deployments and StatefulSets as local processes on loopback, to prove the manifests run.

No container engine or cluster is available in CI, so tests/e2e/test_deploy_manifests.py takes
what a kubelet would get — each container's ``command``, ``args``, ``env`` (ConfigMap and Secret
references, downward API), ``workingDir``, volume mounts and probes — and starts it here. The
translation from pod to process is mechanical and kept small so that it cannot hide a broken
manifest:

* **Image paths.** The image holds the venv at ``/app/.venv`` and copies of the repository's
  ``examples/`` and ``deploy/serve_mcp_http.py`` under ``/app`` (deploy/Dockerfile), so
  ``/app/.venv`` maps to this venv and any other ``/app/...`` path to the repository root. The
  image's ``ENV`` lines (read from the Dockerfile's runtime stage) are applied first.
* **Volumes.** Each ConfigMap volume becomes a temporary folder holding the ConfigMap's files;
  each emptyDir a temporary folder. A path under a mount path is rewritten to that folder.
* **Ports.** Every containerPort gets a free loopback port (container ports are unique across the
  rendered Deployments, which is checked). ``0.0.0.0:<containerPort>`` becomes
  ``127.0.0.1:<local>``, a ``<service>.<namespace>.svc.cluster.local:<servicePort>`` address
  becomes ``127.0.0.1:<local port behind that Service>`` (scheme such as ``dns:///`` kept), so does
  a StatefulSet pod's own name ``<statefulset>-<K>.<service>.<namespace>.svc.cluster.local:<port>``,
  and a shard ``address_pattern`` (``{ordinal}`` for K) becomes the list of the pods run here, an
  integer ``metrics_port`` in a config file and an env value equal to one of the container's
  ports are mapped the same way, and ``0.0.0.0`` alone becomes ``127.0.0.1``. Probes and the
  ``prometheus.io/port`` annotation are mapped too.
* **StatefulSets** run one pod here, ``<name>-0`` (more replicas are refused: their pods would need
  ports of their own).
* **Env.** ``fieldRef`` metadata.namespace / metadata.name come from the rendered object;
  ``secretKeyRef`` values come from the ``secrets`` argument (a Secret the cluster would hold) and
  are skipped when absent and ``optional``; ``configMapKeyRef`` and ``envFrom`` ``configMapRef`` from
  the rendered ConfigMaps.

Config files are rewritten structurally (YAML or JSON by extension), never by editing the text.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import yaml

__all__ = ["LocalContainer", "LocalStack", "PlanError", "free_port"]

_DEPLOY_DIR = Path(__file__).resolve().parent
_REPO_ROOT = _DEPLOY_DIR.parent
_VENV = Path(sys.prefix)
_IMAGE_ROOT = "/app"
_IMAGE_VENV = "/app/.venv"
_SERVICE_ADDRESS = re.compile(
    r"(?P<scheme>[a-z]+:(?://)?/?)?(?P<service>[a-z0-9-]+)\.(?P<namespace>[^.:/\s]+)\.svc\.cluster\.local:(?P<port>\d+)"
)
# A StatefulSet pod by name, behind its headless Service (the ordinal may still be a pattern).
_POD_ADDRESS = re.compile(
    r"(?P<scheme>[a-z]+:(?://)?/?)?(?P<pod>[a-z0-9-]+)-(?P<ordinal>\d+|\{ordinal\})\."
    r"(?P<service>[a-z0-9-]+)\.(?P<namespace>[^.:/\s]+)\.svc\.cluster\.local:(?P<port>\d+)"
)
_WORKLOADS = ("Deployment", "StatefulSet")


class PlanError(Exception):
    """The manifests cannot be mapped onto local processes (and so would be wrong in a cluster too)."""


def free_port() -> int:
    """A currently free loopback TCP port (the kernel's choice; released before use)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class LocalContainer:
    """One Deployment's (single) container, translated to a local process."""

    deployment: str
    component: str
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    # containerPort -> local port
    ports: dict[int, int]
    # probe kind (startupProbe, ...) -> probe with local ports
    probes: dict[str, dict[str, Any]]
    metrics_port: int | None
    termination_grace: float
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    _log: IO[bytes] | None = field(default=None, repr=False)

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""


def _image_env(dockerfile: Path) -> list[tuple[str, str]]:
    """ENV of the Dockerfile's last stage as (name, value) in order; `$VAR` references expanded later."""
    text = dockerfile.read_text(encoding="utf-8").replace("\\\n", " ")
    stages = re.split(r"(?m)^FROM\s", text)
    pairs: list[tuple[str, str]] = []
    for line in stages[-1].splitlines():
        if line.startswith("ENV "):
            for item in re.findall(r"(\w+)=(\S+)", line[4:]):
                pairs.append((item[0], item[1]))
    return pairs


class LocalStack:
    """Plans and runs every Deployment of a rendered overlay as a local process."""

    def __init__(
        self,
        docs: Iterable[dict[str, Any]],
        workdir: Path,
        *,
        secrets: Mapping[str, Mapping[str, str]] | None = None,
        dockerfile: Path = _DEPLOY_DIR / "Dockerfile",
    ) -> None:
        self.docs = list(docs)
        self.workdir = workdir
        self.secrets = {k: dict(v) for k, v in (secrets or {}).items()}
        self.dockerfile = dockerfile
        self._config_maps = {
            d["metadata"]["name"]: d.get("data", {}) for d in self.docs if d["kind"] == "ConfigMap"
        }
        self._deployments = [d for d in self.docs if d["kind"] in _WORKLOADS]
        for workload in self._deployments:
            if workload["kind"] == "StatefulSet" and int(workload["spec"].get("replicas", 1)) > 1:
                raise PlanError(f"{workload['metadata']['name']}: a StatefulSet runs one pod locally")
        self.port_map = self._map_ports()
        self.service_ports = self._map_services()
        self.containers: list[LocalContainer] = [self._plan(d) for d in self._deployments]

    # --- planning ----------------------------------------------------------------------------

    def _map_ports(self) -> dict[int, int]:
        mapping: dict[int, int] = {}
        owner: dict[int, str] = {}
        for deployment in self._deployments:
            for container in deployment["spec"]["template"]["spec"]["containers"]:
                for port in container.get("ports", []):
                    number = int(port["containerPort"])
                    name = deployment["metadata"]["name"]
                    if number in owner and owner[number] != name:
                        raise PlanError(f"containerPort {number} is used by {owner[number]} and {name}")
                    owner[number] = name
                    mapping[number] = free_port()
        return mapping

    def _map_services(self) -> dict[tuple[str, int], int]:
        """(Service name, Service port) -> local port of the pod port it targets."""
        result: dict[tuple[str, int], int] = {}
        for svc in (d for d in self.docs if d["kind"] == "Service"):
            selector = svc["spec"].get("selector", {})
            targets = [
                d
                for d in self._deployments
                if all(d["spec"]["template"]["metadata"]["labels"].get(k) == v for k, v in selector.items())
            ]
            if len(targets) != 1:
                raise PlanError(f"Service {svc['metadata']['name']} selects {len(targets)} Deployments")
            container = targets[0]["spec"]["template"]["spec"]["containers"][0]
            named = {p["name"]: int(p["containerPort"]) for p in container.get("ports", [])}
            for port in svc["spec"]["ports"]:
                target = port.get("targetPort", port["port"])
                container_port = named[target] if isinstance(target, str) else int(target)
                result[(svc["metadata"]["name"], int(port["port"]))] = self.port_map[container_port]
        return result

    def _rewriter(self, mounts: Mapping[str, Path]) -> Callable[[str], str]:
        prefixes = sorted(
            [(k, str(v)) for k, v in mounts.items()]
            + [(_IMAGE_VENV, str(_VENV)), (_IMAGE_ROOT, str(_REPO_ROOT))],
            key=lambda kv: len(kv[0]),
            reverse=True,
        )

        def service(match: re.Match[str]) -> str:
            key = (match.group("service"), int(match.group("port")))
            if key not in self.service_ports:
                raise PlanError(f"{match.group(0)}: no Service {key[0]} with port {key[1]} in the manifests")
            return f"{match.group('scheme') or ''}127.0.0.1:{self.service_ports[key]}"

        def listen(match: re.Match[str]) -> str:
            port = int(match.group(1))
            if port not in self.port_map:
                raise PlanError(f"0.0.0.0:{port}: no container declares port {port}")
            return f"127.0.0.1:{self.port_map[port]}"

        def pod(match: re.Match[str]) -> str:
            if match.group("ordinal") not in ("0", "{ordinal}"):
                raise PlanError(f"{match.group(0)}: only pod 0 of a StatefulSet runs locally")
            return service(match)

        def rewrite(value: str) -> str:
            value = _POD_ADDRESS.sub(pod, value)
            value = _SERVICE_ADDRESS.sub(service, value)
            value = re.sub(r"\b0\.0\.0\.0:(\d+)\b", listen, value)
            if value == "0.0.0.0":  # noqa: S104 - the value being translated, not a bind
                return "127.0.0.1"
            for image_path, local in prefixes:
                if value == image_path or value.startswith(image_path + "/"):
                    return local + value[len(image_path) :]
            return value

        return rewrite

    def _rewrite_config(self, data: Any, rewrite: Callable[[str], str], key: str = "") -> Any:
        if isinstance(data, str):
            return rewrite(data)
        if isinstance(data, bool):
            return data
        if isinstance(data, int) and key == "metrics_port" and data > 0:
            if data not in self.port_map:
                raise PlanError(f"metrics_port {data}: no container declares that port")
            return self.port_map[data]
        if isinstance(data, dict):
            out = {
                k: self._rewrite_config(v, rewrite, str(k)) for k, v in data.items() if k != "address_pattern"
            }
            pattern = data.get("address_pattern")
            if isinstance(pattern, str) and "{ordinal}" in pattern:
                # Every shard's address, for the one pod per StatefulSet run here.
                out["addresses"] = [rewrite(pattern.replace("{ordinal}", "0"))]
            elif pattern is not None:
                out["address_pattern"] = self._rewrite_config(pattern, rewrite, "address_pattern")
            return out
        if isinstance(data, list):
            return [self._rewrite_config(v, rewrite, key) for v in data]
        return data

    def _write_config_map(self, name: str, folder: Path, rewrite: Callable[[str], str]) -> None:
        if name not in self._config_maps:
            raise PlanError(f"ConfigMap {name} is not in the manifests")
        folder.mkdir(parents=True, exist_ok=True)
        for filename, text in self._config_maps[name].items():
            if filename.endswith((".yaml", ".yml")):
                doc = self._rewrite_config(yaml.safe_load(text), rewrite)
                out = yaml.safe_dump(doc, sort_keys=False)
            elif filename.endswith(".json"):
                out = json.dumps(self._rewrite_config(json.loads(text), rewrite), indent=2)
            else:
                out = rewrite(text)
            (folder / filename).write_text(out, encoding="utf-8")

    def _volumes(self, name: str, spec: dict[str, Any], container: dict[str, Any]) -> dict[str, Path]:
        """Mount path -> local folder; ConfigMap files written (rewritten), emptyDirs created."""
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        root = self.workdir / name / "volumes"
        mounts = {m["mountPath"]: root / m["name"] for m in container.get("volumeMounts", [])}
        rewrite = self._rewriter(mounts)
        for mount in container.get("volumeMounts", []):
            volume, folder = volumes[mount["name"]], mounts[mount["mountPath"]]
            if "configMap" in volume:
                self._write_config_map(volume["configMap"]["name"], folder, rewrite)
            elif "emptyDir" in volume:
                folder.mkdir(parents=True, exist_ok=True)
            else:
                raise PlanError(f"{name}: volume {mount['name']} is neither a ConfigMap nor an emptyDir")
        return mounts

    def _env(
        self, deployment: dict[str, Any], container: dict[str, Any], rewrite: Callable[[str], str]
    ) -> dict[str, str]:
        name = deployment["metadata"]["name"]
        namespace = deployment["metadata"].get("namespace", "default")
        own_ports = {int(p["containerPort"]) for p in container.get("ports", [])}

        def literal(value: str) -> str:
            if value.isdigit() and int(value) in own_ports:
                return str(self.port_map[int(value)])
            return rewrite(value)

        env: dict[str, str] = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
        for key, value in _image_env(self.dockerfile):
            expanded = re.sub(r"\$(\w+)|\$\{(\w+)\}", lambda m: env.get(m.group(1) or m.group(2), ""), value)
            env[key] = ":".join(rewrite(part) for part in expanded.split(":"))
        # A StatefulSet's pods are <name>-<ordinal>; a Deployment's get a random suffix.
        pod_name = f"{name}-0" if deployment["kind"] == "StatefulSet" else f"{name}-local-0"
        fields = {"metadata.namespace": namespace, "metadata.name": pod_name}
        # envFrom first: an `env` entry of the same name wins, as in a pod.
        env.update({k: literal(v) for k, v in self._env_from(name, container).items()})
        for item in container.get("env", []):
            source = item.get("valueFrom", {})
            if "value" in item:
                env[item["name"]] = literal(str(item["value"]))
            elif "fieldRef" in source:
                env[item["name"]] = fields[source["fieldRef"]["fieldPath"]]
            elif "secretKeyRef" in source:
                ref = source["secretKeyRef"]
                secret_value = self.secrets.get(ref["name"], {}).get(ref["key"])
                if secret_value is not None:
                    env[item["name"]] = secret_value
                elif not ref.get("optional", False):
                    raise PlanError(f"{name}: env {item['name']} needs Secret {ref['name']}/{ref['key']}")
            elif "configMapKeyRef" in source:
                ref = source["configMapKeyRef"]
                env[item["name"]] = literal(self._config_maps[ref["name"]][ref["key"]])
            else:
                raise PlanError(f"{name}: unsupported env source {sorted(source)}")
        return env

    def _env_from(self, name: str, container: dict[str, Any]) -> dict[str, str]:
        """The variables a container's ``envFrom`` ConfigMaps give it (prefixed as asked)."""
        env: dict[str, str] = {}
        for source in container.get("envFrom", []):
            ref = source.get("configMapRef")
            if ref is None:
                raise PlanError(f"{name}: unsupported envFrom source {sorted(source)}")
            data = self._config_maps.get(ref["name"])
            if data is None:
                if ref.get("optional", False):
                    continue
                raise PlanError(f"{name}: envFrom needs ConfigMap {ref['name']}")
            env.update({source.get("prefix", "") + key: str(value) for key, value in data.items()})
        return env

    def _local_port(self, name: str, container: dict[str, Any], port: int | str, what: str) -> int:
        named = {p["name"]: int(p["containerPort"]) for p in container.get("ports", [])}
        number = named.get(port, -1) if isinstance(port, str) else int(port)
        if number not in named.values():
            raise PlanError(f"{name}: {what} port {port} is not a port of the container")
        return self.port_map[number]

    def _plan(self, deployment: dict[str, Any]) -> LocalContainer:
        name = deployment["metadata"]["name"]
        pod = deployment["spec"]["template"]
        spec = pod["spec"]
        if len(spec["containers"]) != 1:
            raise PlanError(f"{name}: expected one container, found {len(spec['containers'])}")
        container = spec["containers"][0]
        rewrite = self._rewriter(self._volumes(name, spec, container))
        env = self._env(deployment, container, rewrite)

        argv = [rewrite(a) for a in [*container.get("command", []), *container.get("args", [])]]
        if not argv:
            raise PlanError(f"{name}: no command: the image's CMD is not used by these manifests")
        executable = shutil.which(argv[0], path=env["PATH"])
        if executable is None:
            raise PlanError(f"{name}: {argv[0]} is not on the image PATH ({env['PATH']})")
        argv[0] = executable

        probes: dict[str, dict[str, Any]] = {}
        for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
            if kind in container:
                probe = json.loads(json.dumps(container[kind]))
                for action in ("grpc", "tcpSocket", "httpGet"):
                    if action in probe:
                        probe[action]["port"] = self._local_port(name, container, probe[action]["port"], kind)
                probes[kind] = probe
        metrics = pod["metadata"].get("annotations", {}).get("prometheus.io/port")
        return LocalContainer(
            deployment=name,
            component=pod["metadata"]["labels"].get("app.kubernetes.io/component", name),
            argv=argv,
            env=env,
            cwd=Path(rewrite(container.get("workingDir", str(_REPO_ROOT)))),
            ports={
                int(p["containerPort"]): self.port_map[int(p["containerPort"])] for p in container["ports"]
            },
            probes=probes,
            metrics_port=None
            if metrics is None
            else self._local_port(name, container, int(metrics), "metrics"),
            termination_grace=float(spec.get("terminationGracePeriodSeconds", 30)),
            log_path=self.workdir / name / "container.log",
        )

    # --- running -----------------------------------------------------------------------------

    def start(self) -> None:
        """Starts every container at once, as a kubelet would (no ordering between Deployments)."""
        for c in self.containers:
            c.log_path.parent.mkdir(parents=True, exist_ok=True)
            c._log = c.log_path.open("wb")
            c.process = subprocess.Popen(
                c.argv,
                env=c.env,
                cwd=c.cwd,
                stdin=subprocess.DEVNULL,
                stdout=c._log,
                stderr=subprocess.STDOUT,
                # Own process group: stop() can reach stdio MCP servers the pool started.
                start_new_session=True,
            )

    def container(self, component: str) -> LocalContainer:
        for c in self.containers:
            if c.component == component:
                return c
        raise KeyError(component)

    def stop(self) -> dict[str, int | None]:
        """SIGTERM each process (as the kubelet does), wait its grace period, then kill what is left.

        Returns each deployment's exit code (None when it had to be killed).
        """
        codes: dict[str, int | None] = {}
        for c in self.containers:
            if c.process is not None and c.process.poll() is None:
                c.process.send_signal(signal.SIGTERM)
        for c in self.containers:
            if c.process is None:
                continue
            try:
                codes[c.deployment] = c.process.wait(timeout=c.termination_grace)
            except subprocess.TimeoutExpired:
                codes[c.deployment] = None
            # Whatever is left in the group (a stuck child) goes the way the kubelet's SIGKILL would.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(c.process.pid, signal.SIGKILL)
            c.process.wait(timeout=10)
            if c._log is not None:
                c._log.close()
        return codes

    def __enter__(self) -> LocalStack:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> int:
    """Print the local plan of an overlay (for debugging the translation)."""
    from deploy import check  # noqa: PLC0415 - optional CLI only

    overlay = sys.argv[1] if len(sys.argv) > 1 else "dev"
    with tempfile.TemporaryDirectory() as tmp:
        stack = LocalStack(check.load_documents(check.render(overlay)), Path(tmp))
        for c in stack.containers:
            sys.stdout.write(f"{c.deployment}: {' '.join(c.argv)}\n  ports {c.ports} probes {c.probes}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
