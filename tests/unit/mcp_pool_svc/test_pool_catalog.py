from __future__ import annotations

import asyncio

import mcp_types

from mcp_pool_svc.catalog import Catalog, ListedTool, listed_tool_from_mcp


def _tools(*names: str) -> list[ListedTool]:
    return [ListedTool(name=n, description=f"does {n}") for n in names]


def test_the_version_changes_with_the_contents_and_only_then() -> None:
    catalog = Catalog()
    empty = catalog.version
    assert catalog.set_tools("a", _tools("x", "y"))
    v1 = catalog.version
    assert v1 != empty
    assert not catalog.set_tools("a", _tools("y", "x"))
    assert catalog.version == v1
    assert catalog.set_tools("a", [ListedTool(name="x", description="changed"), *_tools("y")])
    assert catalog.version != v1


def test_tools_are_sorted_by_server_then_name_with_llm_names() -> None:
    catalog = Catalog()
    catalog.set_tools("zeta", _tools("b", "a"))
    catalog.set_tools("alpha", _tools("c"))
    snap = catalog.snapshot()
    assert [(t.server, t.name) for t in snap.tools] == [("alpha", "c"), ("zeta", "a"), ("zeta", "b")]
    assert catalog.resolve("zeta__a") is snap.tools[1]


def test_unavailable_tools_are_hidden_by_default_and_then_dropped() -> None:
    catalog = Catalog()
    catalog.set_tools("a", _tools("x"))
    catalog.set_tools("b", _tools("y"))
    assert catalog.set_available("a", False)
    assert [t.name for t in catalog.snapshot(include_unavailable=False).tools] == ["y"]
    assert [(t.name, t.available) for t in catalog.snapshot().tools] == [("x", False), ("y", True)]
    assert catalog.drop("a")
    assert [t.name for t in catalog.snapshot().tools] == ["y"]
    assert not catalog.has_listing("a")


def test_tool_definitions_keep_defs_additional_properties_and_missing_descriptions() -> None:
    schema = {
        "type": "object",
        "properties": {"loc": {"$ref": "#/$defs/Loc"}},
        "$defs": {"Loc": {"type": "object", "properties": {"city": {"type": "string"}}}},
        "additionalProperties": False,
    }
    tool = mcp_types.Tool(
        name="t", input_schema=schema, annotations=mcp_types.ToolAnnotations(read_only_hint=True)
    )
    d = listed_tool_from_mcp(tool)
    assert d.description == ""
    assert '"$defs":{"Loc"' in d.input_schema_json
    assert '"additionalProperties":false' in d.input_schema_json
    assert d.annotations_json == '{"readOnlyHint":true}'


async def test_watchers_get_the_snapshot_then_each_change_with_the_changed_servers() -> None:
    catalog = Catalog()
    catalog.set_tools("a", _tools("x"))
    updates = catalog.watch()
    first = await asyncio.wait_for(anext(updates), 5)
    assert first.changed_servers == ()
    assert [t.name for t in first.tools] == ["x"]
    catalog.set_tools("b", _tools("y"))
    catalog.set_available("a", False)
    second = await asyncio.wait_for(anext(updates), 5)
    assert second.changed_servers == ("a", "b")
    assert second.catalog_version == catalog.version
    await updates.aclose()


async def test_a_watcher_that_knows_the_version_skips_the_first_snapshot() -> None:
    catalog = Catalog()
    catalog.set_tools("a", _tools("x"))
    updates = catalog.watch(catalog.version)
    pending = asyncio.ensure_future(anext(updates))
    await asyncio.sleep(0)
    assert not pending.done()
    catalog.set_tools("a", _tools("x", "z"))
    update = await asyncio.wait_for(pending, 5)
    assert update.changed_servers == ("a",)
    await updates.aclose()


def test_a_server_added_with_a_clashing_bare_name_renames_both_and_a_call_still_resolves_by_lookup() -> None:
    catalog = Catalog(namespaced=lambda server: False)
    catalog.set_tools("a", _tools("echo", "only_a"))
    assert catalog.resolve("echo") is not None
    assert catalog.resolve("echo").server == "a"  # type: ignore[union-attr]
    catalog.set_tools("b", _tools("echo"))
    assert catalog.resolve("echo") is None
    assert catalog.resolve("a__echo").server == "a"  # type: ignore[union-attr]
    assert catalog.resolve("b__echo").server == "b"  # type: ignore[union-attr]
    assert catalog.resolve("only_a").server == "a"  # type: ignore[union-attr]
    catalog.drop("b")
    assert catalog.resolve("echo").server == "a"  # type: ignore[union-attr]


def test_tools_listed_to_one_user_are_named_as_the_catalog_names_them() -> None:
    catalog = Catalog(namespaced=lambda server: server != "plain")
    catalog.set_tools("notes", _tools("shared"))
    catalog.set_tools("plain", _tools("taken"))
    catalog.set_tools("other", _tools("x"))
    # A tool the catalog holds keeps its name; another gets the name its pair would get.
    named = catalog.named("notes", _tools("shared", "mine", "mine"))
    assert [(t.name, t.llm_name) for t in named] == [("mine", "notes__mine"), ("shared", "notes__shared")]
    # Not namespaced: the bare name, unless another tool (or discovery's own) has it.
    plain = catalog.named("plain", _tools("taken", "free", "search_tools"))
    assert {t.name: t.llm_name for t in plain} == {
        "free": "free",
        "search_tools": "plain__search_tools",
        "taken": "taken",
    }
    assert all(t.available and t.server == "plain" for t in plain)
