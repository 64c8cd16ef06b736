"""The bench scripts as modules, for the tests of their own logic."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from tests.support.mcp_servers import REPO_ROOT

__all__ = ["BENCH", "load_bench_script"]

BENCH = REPO_ROOT / "bench"


def load_bench_script(name: str) -> ModuleType:
    """``bench/<name>.py`` as the module ``name``. bench/ holds scripts, not a package: the file is
    loaded with bench/ on ``sys.path`` (the scripts import their neighbours) and registered in
    ``sys.modules`` (dataclasses look their module up there); loaded once."""
    loaded = sys.modules.get(name)
    if loaded is not None and getattr(loaded, "__file__", None) == str(BENCH / f"{name}.py"):
        return loaded
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
