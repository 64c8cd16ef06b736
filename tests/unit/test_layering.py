"""The layering the design promises, checked on the source: only servers and servicers speak gRPC.

Domain modules are plain Python; services reach each other through the client library
(``toolscout.client``), never through hand-built stubs. Every process starts its event loop through
the kit (:func:`toolscout_kit.event_loop.run`).
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVICE_PACKAGES = ("mcp_pool_svc", "discovery_svc", "orchestrator_svc", "mcp_gateway_svc", "toolscout_cli")
GRPC_ALLOWED = {"server.py", "servicer.py"}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _speaks_grpc(name: str) -> bool:
    return (
        name == "grpc"
        or name.startswith("grpc.")
        or name.rsplit(".", maxsplit=1)[-1].endswith(("_pb2", "_pb2_grpc"))
    )


@pytest.mark.parametrize("package", SERVICE_PACKAGES)
def test_only_servers_and_servicers_import_grpc_or_generated_code(package: str) -> None:
    offenders = sorted(
        f"{path.relative_to(ROOT)}: {name}"
        for path in (ROOT / package).rglob("*.py")
        if path.name not in GRPC_ALLOWED
        for name in _imports(path)
        if _speaks_grpc(name)
    )
    assert offenders == []


def test_services_never_import_each_other() -> None:
    services = {"mcp_pool_svc", "discovery_svc", "orchestrator_svc", "mcp_gateway_svc"}
    offenders = sorted(
        f"{path.relative_to(ROOT)}: {name}"
        for package in services
        for path in (ROOT / package).rglob("*.py")
        for name in _imports(path)
        if name.split(".")[0] in services - {package}
    )
    assert offenders == []


def test_the_gateway_reaches_discovery_and_the_pool_only_through_the_client_library() -> None:
    # The MCP front door is a translator: MCP in, client-library calls out. It never builds stubs,
    # never imports another service, and speaks no gRPC itself.
    offenders = sorted(
        f"{path.relative_to(ROOT)}: {name}"
        for path in (ROOT / "mcp_gateway_svc").rglob("*.py")
        for name in _imports(path)
        if _speaks_grpc(name) or name.split(".")[0] in {"mcp_pool_svc", "discovery_svc", "orchestrator_svc"}
    )
    assert offenders == []
    uses = {name for path in (ROOT / "mcp_gateway_svc").rglob("*.py") for name in _imports(path)}
    assert "toolscout.client" in uses


def _public_entry_point(name: str) -> bool:
    """Whether ``name`` (an imported module or ``module.name``) is a service's public surface: its
    package, a name in the package's ``__all__``, or its ``server.build_server``."""
    package, *rest = name.split(".")
    if not rest:
        return True
    if rest in (["server"], ["server", "build_server"]):
        return True
    return len(rest) == 1 and rest[0] in getattr(importlib.import_module(package), "__all__", ())


@pytest.mark.parametrize("module", sorted(p.name for p in (ROOT / "toolscout_cli").glob("*.py")))
def test_the_cli_reaches_services_through_their_public_entry_points_only(module: str) -> None:
    # ``toolscout up`` / ``serve`` start services through their build_server (on the kit's service
    # host); ``connect``, ``up``'s preflight and walkthrough may use what a service package publishes
    # in its ``__all__``. Anything else the CLI needs from a service belongs in the kit or the
    # client library.
    services = {"mcp_pool_svc", "discovery_svc", "orchestrator_svc", "mcp_gateway_svc"}
    offenders = sorted(
        f"{path.relative_to(ROOT)}: {name}"
        for path in [ROOT / "toolscout_cli" / module]
        for name in _imports(path)
        if name.split(".")[0] in services and not _public_entry_point(name)
    )
    assert offenders == []


# Calls that start an event loop of their own: only toolscout_kit/event_loop.py makes them.
_LOOP_STARTS = {
    ("asyncio", "run"),
    ("asyncio", "Runner"),
    ("asyncio", "new_event_loop"),
    ("uvloop", "run"),
    ("uvloop", "install"),
}


def test_every_loop_of_a_toolscout_process_is_started_by_the_kit() -> None:
    """``asyncio.run`` or a loop made by hand anywhere else would run on asyncio's loop unnoticed."""
    found = sorted(
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for package in ("toolscout_kit", *SERVICE_PACKAGES)
        for path in (ROOT / package).rglob("*.py")
        if path != ROOT / "toolscout_kit" / "event_loop.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and (node.func.value.id, node.func.attr) in _LOOP_STARTS
    )
    assert found == []
