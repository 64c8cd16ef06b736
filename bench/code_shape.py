"""Count the renovation's code-shape figures on product code (issue 31).

Product code: the four services, the kit, the CLI and the client library,
without tests, bench, generated protobuf modules or .proto files.

    uv run --frozen python bench/code_shape.py [--json]

Figures:
- functions (and methods) longer than 80 lines, each named;
- classes with more than 25 methods (properties and nested functions not counted);
- bare mode literals: string constants "stable", "append", "native",
  "progressive" outside docstrings (the closed sets' own enum definitions
  excepted);
- `re.` calls in toolscout_kit/status.py;
- CLI imports of service internals: anything imported from a service package
  but its `server.build_server` and the names the package itself publishes in
  its `__all__` (its documented public entry points, as tests/unit/test_layering.py
  defines them);
- pairs from the `duplicates` finder (when installed), not tagged boilerplate.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVICES = ("discovery_svc", "mcp_pool_svc", "orchestrator_svc", "mcp_gateway_svc")
PRODUCT = (*SERVICES, "toolscout_kit", "toolscout_cli", "clients/src/toolscout")
MODE_WORDS = frozenset({"stable", "append", "native", "progressive"})
FUNCTION_LIMIT = 80
METHOD_LIMIT = 25


@dataclass
class Shape:
    long_functions: list[str] = field(default_factory=list)
    big_classes: list[str] = field(default_factory=list)
    mode_literals: list[str] = field(default_factory=list)
    status_regex_calls: int = 0
    cli_service_imports: list[str] = field(default_factory=list)
    duplicate_pairs: list[str] = field(default_factory=list)


def product_files() -> list[Path]:
    files: list[Path] = []
    for top in PRODUCT:
        for path in sorted((ROOT / top).rglob("*.py")):
            if "_pb2" in path.name or "/v1/" in str(path.relative_to(ROOT)):
                continue
            files.append(path)
    return files


def _docstring_nodes(tree: ast.AST) -> set[int]:
    ids: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                ids.add(id(body[0].value))
    return ids


def _enum_definitions(tree: ast.AST) -> set[int]:
    """Constants that define an enum member (`STABLE = "stable"` in an Enum)."""
    ids: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        bases = {getattr(b, "id", getattr(b, "attr", "")) for b in node.bases}
        if not bases & {"Enum", "StrEnum", "IntEnum"}:
            continue
        for stmt in node.body:
            if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant):
                ids.add(id(stmt.value))
    return ids


def _shape_of_file(shape: Shape, path: Path) -> None:
    rel = str(path.relative_to(ROOT))
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = _docstring_nodes(tree) | _enum_definitions(tree)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > FUNCTION_LIMIT:
                shape.long_functions.append(f"{rel}:{node.lineno} {node.name} ({length} lines)")
        elif isinstance(node, ast.ClassDef):
            methods = [s for s in node.body if _is_method(s)]
            if len(methods) > METHOD_LIMIT:
                shape.big_classes.append(f"{rel}:{node.lineno} {node.name} ({len(methods)} methods)")
        elif isinstance(node, ast.Constant) and node.value in MODE_WORDS and id(node) not in skipped:
            shape.mode_literals.append(f"{rel}:{node.lineno} {node.value!r}")
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and rel.startswith("toolscout_cli/"):
            shape.cli_service_imports.extend(_service_imports(rel, node))
    if rel == "toolscout_kit/status.py":
        shape.status_regex_calls = len(re.findall(r"\bre\.\w+\(", path.read_text(encoding="utf-8")))


def _is_method(stmt: ast.stmt) -> bool:
    if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    decorators = {getattr(d, "id", getattr(d, "attr", "")) for d in stmt.decorator_list}
    return not decorators & {"property", "setter"}


def _published(package: str) -> frozenset[str]:
    """The names in a service package's ``__all__`` (read from its source, not imported)."""
    tree = ast.parse((ROOT / package / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
            return frozenset(ast.literal_eval(node.value))
    return frozenset()


def _service_imports(rel: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    names = [a.name for a in node.names]
    targets = [node.module] if isinstance(node, ast.ImportFrom) else names
    found = []
    for target in targets:
        if not target or target.split(".")[0] not in SERVICES:
            continue
        if isinstance(node, ast.ImportFrom) and names == ["build_server"]:
            continue
        if isinstance(node, ast.ImportFrom) and target in SERVICES and set(names) <= _published(target):
            continue
        found.append(f"{rel}:{node.lineno} {target} {names}")
    return found


def measure(with_duplicates: bool = True) -> Shape:
    shape = Shape()
    for path in product_files():
        _shape_of_file(shape, path)
    if with_duplicates and shutil.which("duplicates"):
        shape.duplicate_pairs = _duplicate_pairs()
    return shape


def _duplicate_pairs() -> list[str]:
    out = subprocess.run(
        ["duplicates", "--most", "200", "--seconds", "120"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    skip = ("tests/", "bench/", "protos/", "deploy/", "examples/")
    pairs = []
    for line in out.splitlines():
        match = re.match(r"\s*D\d+\s+(\S+?):\d+-\d+\s+~\s+(\S+?):\d+-\d+", line)
        if not match or "boilerplate" in line:
            continue
        left, right = match.groups()
        if any(p.startswith(skip) or "_pb2" in p for p in (left, right)):
            continue
        pairs.append(line.strip())
    return pairs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the full lists as JSON")
    parser.add_argument("--no-duplicates", action="store_true", help="skip the duplicate finder")
    args = parser.parse_args()
    shape = measure(with_duplicates=not args.no_duplicates)
    if args.json:
        print(json.dumps(asdict(shape), indent=2))
        return 0
    print(f"functions over {FUNCTION_LIMIT} lines: {len(shape.long_functions)}")
    for item in shape.long_functions:
        print(f"  {item}")
    print(f"classes over {METHOD_LIMIT} methods: {len(shape.big_classes)}")
    for item in shape.big_classes:
        print(f"  {item}")
    print(f"bare mode literals: {len(shape.mode_literals)}")
    print(f"regex calls in toolscout_kit/status.py: {shape.status_regex_calls}")
    print(f"CLI imports of service internals: {len(shape.cli_service_imports)}")
    for item in shape.cli_service_imports:
        print(f"  {item}")
    if not args.no_duplicates:
        print(f"duplicate pairs (product code, not boilerplate): {len(shape.duplicate_pairs)}")
        for item in shape.duplicate_pairs:
            print(f"  {item}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
