"""Requests from the clients' keyword arguments, and the deprecated ``toolset_json`` keyword.

The async and the sync clients build their requests here, so both accept the same arguments.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from toolscout.client.types import (
    PlanFields,
    PlanRequest,
    SearchFields,
    SearchRequest,
    ToolsetLike,
    ToolsetRef,
)

__all__ = ["plan_request", "search_request", "toolset_ref"]

_DEPRECATED = "toolset_json"


def toolset_ref(toolset: ToolsetLike, deprecated: Mapping[str, Any], *, stacklevel: int = 4) -> ToolsetRef:
    """``toolset`` as a ref, with the deprecated keyword from ``deprecated`` (a warning).

    Raises:
        ValueError: an inline toolset given twice (as ``toolset`` and as the deprecated keyword).
    """
    legacy = deprecated.get(_DEPRECATED)
    if legacy is None:
        return ToolsetRef.of(toolset)
    warnings.warn(
        f"{_DEPRECATED} is deprecated and will be removed in the next release: pass the inline "
        "toolset as toolset= (a mapping, or ToolsetRef.inline(text))",
        DeprecationWarning,
        stacklevel=stacklevel,
    )
    named = (
        toolset
        if isinstance(toolset, ToolsetRef)
        else ToolsetRef.of(toolset)
        if isinstance(toolset, str)
        else None
    )
    if named is None or named.is_inline:
        raise ValueError(f"give an inline toolset once: in `toolset` or as `{_DEPRECATED}`")
    # As before the deprecation: the text goes as it is, and with a name too discovery refuses the pair.
    return ToolsetRef(name=named.name, filter_json=str(legacy))


def plan_request(toolset: ToolsetLike, fields: PlanFields) -> PlanRequest:
    values: dict[str, Any] = dict(fields)
    ref = toolset_ref(toolset, {_DEPRECATED: values.pop(_DEPRECATED, None)}, stacklevel=4)
    return PlanRequest(toolset=ref, **values)


def search_request(query: str, fields: SearchFields) -> SearchRequest:
    values: dict[str, Any] = dict(fields)
    ref = toolset_ref(values.pop("toolset", ""), {_DEPRECATED: values.pop(_DEPRECATED, None)}, stacklevel=4)
    return SearchRequest(query=query, toolset=ref, **values)
