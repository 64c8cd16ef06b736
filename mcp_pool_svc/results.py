"""Tool results as the pool returns them: every content block kept, with a size cap.

MCP content blocks become the shared :class:`~toolscout.client.ContentBlock` (text, decoded bytes,
MIME type, URI, name, and the rest of the block as JSON), results the shared
:class:`~toolscout.client.CallToolResult`. A result larger than the cap is rejected or truncated
with a visible marker, never cut silently.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import replace
from typing import Any, Literal

from mcp_types import TextContent
from toolscout.client import ContentBlock

from mcp_pool_svc.errors import ResultTooLargeError

__all__ = ["apply_size_cap", "content_from_mcp", "error_result_content", "payload_size"]

TRUNCATION_MARKER = "[toolscout: result truncated: {total} bytes exceed the {cap}-byte limit{extra}]"
# Room kept for the marker itself when truncating.
_MARKER_RESERVE = 256


def payload_size(block: ContentBlock) -> int:
    """The payload bytes of a block (what the cap counts)."""
    return len(block.text.encode()) + len(block.data)


def _b64(value: str) -> bytes:
    try:
        return base64.b64decode(value, validate=False)
    except (binascii.Error, ValueError):
        return value.encode()


def _raw(block: dict[str, Any]) -> str:
    return json.dumps(block, ensure_ascii=False, separators=(",", ":"))


def content_from_mcp(block: Any) -> ContentBlock:
    """A :class:`ContentBlock` from any MCP content block model."""
    if type(block) is TextContent and block.annotations is None and block.meta is None:
        # The common block, without its dump: what _from_dump gives it (a test holds them equal).
        return ContentBlock("text", text=block.text, raw_json=_PLAIN_TEXT)
    return _from_dump(block)


_PLAIN_TEXT = _raw({"type": "text"})


def _from_dump(block: Any) -> ContentBlock:
    raw: dict[str, Any] = block.model_dump(by_alias=True, mode="json", exclude_none=True)
    kind = str(raw.get("type", ""))
    if kind == "text":
        text = str(raw.pop("text", ""))
        return ContentBlock("text", text=text, raw_json=_raw(raw))
    if kind in ("image", "audio"):
        data = _b64(str(raw.pop("data", "")))
        return ContentBlock(kind, data=data, mime_type=str(raw.get("mimeType", "")), raw_json=_raw(raw))
    if kind == "resource_link":
        return ContentBlock(
            kind,
            uri=str(raw.get("uri", "")),
            name=str(raw.get("name", "")),
            mime_type=str(raw.get("mimeType", "")),
            raw_json=_raw(raw),
        )
    if kind == "resource":
        resource = dict(raw.get("resource") or {})
        text = str(resource.pop("text", "")) if "text" in resource else ""
        data = _b64(str(resource.pop("blob", ""))) if "blob" in resource else b""
        raw["resource"] = resource
        return ContentBlock(
            "resource",
            text=text,
            data=data,
            uri=str(resource.get("uri", "")),
            mime_type=str(resource.get("mimeType", "")),
            raw_json=_raw(raw),
        )
    # A block type from a newer protocol revision: pass it through whole.
    return ContentBlock(kind or "unknown", raw_json=_raw(raw))


def error_result_content(message: str) -> tuple[ContentBlock, ...]:
    return (ContentBlock("text", text=message, raw_json='{"type":"text"}'),)


def _cut_text(text: str, max_bytes: int) -> str:
    return text.encode()[: max(max_bytes, 0)].decode(errors="ignore")


def apply_size_cap(
    content: tuple[ContentBlock, ...],
    structured_json: str,
    *,
    max_bytes: int,
    mode: Literal["truncate", "reject"],
    what: str,
) -> tuple[tuple[ContentBlock, ...], str, bool]:
    """Returns ``(content, structured_json, truncated)`` within ``max_bytes``.

    Raises:
        ResultTooLargeError: the result is too large and ``mode`` is ``"reject"``.
    """
    total = sum(payload_size(item) for item in content) + len(structured_json.encode())
    if total <= max_bytes:
        return content, structured_json, False
    if mode == "reject":
        raise ResultTooLargeError(
            f"the result of {what} is {total} bytes, more than the {max_bytes}-byte limit (max_result_bytes)"
        )
    budget = max(max_bytes - _MARKER_RESERVE, 0)
    kept: list[ContentBlock] = []
    used = 0
    for item in content:
        if used + payload_size(item) <= budget:
            kept.append(item)
            used += payload_size(item)
            continue
        if item.text and not item.data:
            kept.append(replace(item, text=_cut_text(item.text, budget - used)))
        break
    omitted = len(content) - len(kept)
    structured = structured_json if used + len(structured_json.encode()) <= budget else ""
    extras = []
    if omitted:
        extras.append(f"; {omitted} content block(s) omitted")
    if structured_json and not structured:
        extras.append("; structured content omitted")
    marker = TRUNCATION_MARKER.format(total=total, cap=max_bytes, extra="".join(extras))
    if kept and kept[-1].type == "text":
        kept[-1] = replace(kept[-1], text=f"{kept[-1].text}\n{marker}")
    else:
        kept.extend(error_result_content(marker))
    return tuple(kept), structured, True
