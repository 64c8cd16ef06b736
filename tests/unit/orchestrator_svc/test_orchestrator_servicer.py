"""The gRPC adapter: configuration as ListToolsets reports it."""

from __future__ import annotations


def test_toolset_servers_are_listed_with_their_mode() -> None:
    from orchestrator_svc.servicer import _toolset_server
    from toolscout_kit.config import ExcludeSpec

    assert (_toolset_server("a", True).mode, list(_toolset_server("a", True).tools)) == ("all", [])
    assert (_toolset_server("a", False).mode, list(_toolset_server("a", False).tools)) == ("include", [])
    assert list(_toolset_server("a", ["x"]).tools) == ["x"]
    excluded = _toolset_server("a", ExcludeSpec(exclude=["y"]))
    assert (excluded.mode, list(excluded.tools)) == ("exclude", ["y"])
