"""Tool results shaped to a token budget: lossless steps first, then a preview and a handle.

The one owner of what a tool result costs the model. The pool shapes every result a caller asks it
to (the orchestrator's loop, the stable surface and the gateway all do, with their budget), in
this order:

1. **Lossless.** When ``structuredContent`` and a text block that is only its serialization are
   both present, one copy is kept (:class:`StructuredCopy` says which); JSON text is made compact
   (whitespace outside strings removed, nothing else touched).
2. **Binary never inlined past the budget.** An image, audio or blob block whose base64 would take
   the result over the budget is replaced by a line naming its type and size.
3. **Preview + handle.** What still exceeds the budget becomes one text block: a header (the size,
   the handle, how to read more), then for JSON the document's shape with counts (keys, array
   lengths) and the document abbreviated to its first items; for other text its head and tail.
   The whole text (the *document*) is returned beside it for the caller to keep behind the handle;
   :mod:`toolscout_kit.result_reading` pages, greps and projects it.

Memory: a large result is never copied whole. JSON is walked in place (``raw_decode`` at offsets,
one array item at a time), token figures of long texts are estimated from windows
(:func:`~toolscout_kit.tokens.estimate_tokens`), and the document handed back is the result's own
string when it has a single text (the usual case).

Counting is the costly part for a result that fits (about 0.1 ms per kilobyte of text, in pure
Python): :func:`fits_unchanged` tells from the result's size alone that it would come back
unchanged, so that a caller that does not need its token figures before the answer can take them
after it (:func:`count_result`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any

from toolscout.client import ContentBlock, StructuredCopy

from toolscout_kit.tokens import DEFAULT_ENCODING, TokenCount, count_tokens, estimate_tokens, max_tokens

__all__ = [
    "BASE64_CHARS_PER_TOKEN",
    "MIN_BUDGET_TOKENS",
    "Shaped",
    "ShapingPolicy",
    "StructuredCopy",
    "compact_json_text",
    "count_result",
    "fits_unchanged",
    "json_sketch",
    "shape_result",
]

# Below this budget there is no room for a useful preview; callers are refused lower budgets.
MIN_BUDGET_TOKENS = 100
# Base64 is dense: o200k and cl100k both make about one token per 2-3 characters of it; 2 keeps the
# estimate on the safe side.
BASE64_CHARS_PER_TOKEN = 2.0
# Characters per token assumed when cutting a preview to size before counting it exactly; real
# text and JSON run 3.5-4.5, ids and hashes lower, so a preview is cut again when it comes out over.
_CHARS_PER_TOKEN = 3.2
# JSON larger than this is not compacted (it is far past any budget: it gets a preview anyway).
_COMPACT_MAX_CHARS = 8_000_000
# Duplicate checks parse both copies; beyond this size they are assumed different.
_DEDUPE_MAX_CHARS = 8_000_000
_BINARY_TYPES = ("image", "audio")
_WS = re.compile(r"[ \t\n\r]*")
# A JSON string literal, or a run of insignificant whitespace (group 1 keeps the string).
_STRING_OR_SPACE = re.compile(r'("(?:[^"\\]|\\.)*")|[ \t\n\r]+', re.DOTALL)
_DECODER = json.JSONDecoder()


@dataclass(frozen=True, slots=True)
class ShapingPolicy:
    """How one result is shaped: ``budget_tokens`` is the most it may cost once delivered."""

    budget_tokens: int
    preview_tokens: int = 1000
    encoding: str = DEFAULT_ENCODING
    structured_copy: StructuredCopy = StructuredCopy.TEXT
    # The tool declares an outputSchema: structuredContent stays (MCP requires it).
    keep_structured: bool = False
    # For the preview's header: how long the handle lives.
    handle_ttl_seconds: float = 900.0


@dataclass(frozen=True, slots=True)
class Shaped:
    """A shaped result. ``document`` is the whole text to keep behind the handle when the result
    was replaced by a preview (else None); token figures are in the policy's encoding."""

    content: tuple[ContentBlock, ...]
    structured_content_json: str
    tokens_returned: int
    tokens_delivered: int
    estimated: bool
    document: str | None = None
    document_is_json: bool = False


# --- lossless steps -------------------------------------------------------------------------------


def _looks_like_json(text: str) -> bool:
    head = text[:64].lstrip()
    tail = text[-64:].rstrip()
    return bool(head) and head[0] in "{[" and bool(tail) and tail[-1] in "}]"


def compact_json_text(text: str) -> str | None:
    """``text`` without whitespace outside strings, when it is JSON and that saves something;
    else None. Numbers, escapes and key order stay exactly as they were."""
    if not _looks_like_json(text) or len(text) > _COMPACT_MAX_CHARS:
        return None
    compact = _STRING_OR_SPACE.sub(r"\1", text)
    if len(compact) == len(text):
        return None
    try:
        _DECODER.decode(compact)
    except ValueError:
        return None
    return compact


def _same_json(text: str, structured_json: str) -> bool:
    if not _looks_like_json(text) or max(len(text), len(structured_json)) > _DEDUPE_MAX_CHARS:
        return False
    try:
        return bool(json.loads(text) == json.loads(structured_json))
    except ValueError:
        return False


def _dedupe(
    content: tuple[ContentBlock, ...], structured_json: str, policy: ShapingPolicy
) -> tuple[tuple[ContentBlock, ...], str]:
    if not structured_json:
        return content, structured_json
    for i, block in enumerate(content):
        if block.type == "text" and _same_json(block.text, structured_json):
            if policy.structured_copy is StructuredCopy.STRUCTURED:
                return content[:i] + content[i + 1 :], structured_json
            return content, structured_json if policy.keep_structured else ""
    return content, structured_json


# --- token figures --------------------------------------------------------------------------------


def _block_tokens(block: ContentBlock, encoding: str) -> TokenCount:
    if block.data:
        return _binary_tokens(block)
    return estimate_tokens(_block_text(block), encoding)


def _binary_tokens(block: ContentBlock) -> TokenCount:
    return TokenCount(math.ceil(4 * math.ceil(len(block.data) / 3) / BASE64_CHARS_PER_TOKEN), True)


def _block_text(block: ContentBlock) -> str:
    return block.text or (block.uri + block.name)


def _returned(counts: list[TokenCount], structured: TokenCount) -> TokenCount:
    return TokenCount(
        sum(c.tokens for c in counts) + structured.tokens,
        structured.estimated or any(c.estimated for c in counts),
    )


def count_result(content: tuple[ContentBlock, ...], structured_json: str, encoding: str) -> TokenCount:
    """The tokens of a result as returned: :func:`shape_result`'s ``tokens_returned``."""
    return _returned(
        [_block_tokens(b, encoding) for b in content], estimate_tokens(structured_json, encoding)
    )


def fits_unchanged(content: tuple[ContentBlock, ...], structured_json: str, policy: ShapingPolicy) -> bool:
    """Whether :func:`shape_result` surely hands the result back unchanged (its tokens delivered
    as returned), known without counting: a text's UTF-8 length bounds its tokens (and the
    estimate of a long one), a binary block's figure is its size. False means "not sure"."""
    if policy.structured_copy is not StructuredCopy.TEXT and (
        structured_json or any(_looks_like_json(b.text) for b in content)
    ):
        return False  # (a duplicated copy may be dropped)
    bound = max_tokens(structured_json)
    for block in content:
        bound += _binary_tokens(block).tokens if block.data else max_tokens(_block_text(block))
        if bound > policy.budget_tokens:
            return False
    return bound <= policy.budget_tokens


# --- the JSON sketch ------------------------------------------------------------------------------


@dataclass(slots=True)
class _Array:
    """An array seen by the walk: its length and its first items (sketched)."""

    count: int
    head: list[Any]


@dataclass(slots=True)
class _Object:
    """An object seen by the walk: its key count and its first keys (sketched values)."""

    count: int
    items: dict[str, Any]


@dataclass(slots=True)
class _Elided:
    """A container past the walk's depth: only its kind and size."""

    kind: str
    count: int


_MAX_DEPTH = 6
# Containers sketched in Python at most (a preview shows a few dozen); the rest are parsed in C.
_MAX_CONTAINERS = 200
_HEAD_ITEMS = 8
_MAX_KEYS = 64
_MAX_STRING = 160


def _skip_ws(s: str, i: int) -> int:
    match = _WS.match(s, i)
    return match.end() if match else i


def _leaf(value: Any) -> Any:
    if isinstance(value, str) and len(value) > _MAX_STRING:
        return value[:_MAX_STRING] + f"…(+{len(value) - _MAX_STRING} chars)"
    if isinstance(value, dict):
        return _Elided("object", len(value))
    if isinstance(value, list):
        return _Elided("array", len(value))
    return value


class _Budget:
    """Containers the walk may still sketch; past them it parses in C and keeps only a summary."""

    __slots__ = ("left",)

    def __init__(self, left: int) -> None:
        self.left = left


def _walk(s: str, i: int, depth: int, budget: _Budget) -> tuple[Any, int]:
    """The sketch of the JSON value at ``s[i]`` (no leading whitespace) and where it ends.

    Raises:
        ValueError: not JSON.
    """
    opener = s[i : i + 1]
    if opener in ("{", "[") and (depth >= _MAX_DEPTH or budget.left <= 0):
        value, end = _DECODER.raw_decode(s, i)
        return _leaf(value), end
    if opener == "{":
        budget.left -= 1
        return _walk_object(s, _skip_ws(s, i + 1), depth, budget)
    if opener == "[":
        budget.left -= 1
        return _walk_array(s, _skip_ws(s, i + 1), depth, budget)
    value, end = _DECODER.raw_decode(s, i)
    return _leaf(value), end


def _members(s: str, i: int, close: str, member: Callable[[int], int]) -> int:
    """Walks the members of an object or array from ``s[i]`` (past the opener and whitespace):
    ``member(i)`` reads one and returns where it ends; returns the index past ``close``.

    Raises:
        ValueError: a member is not followed by ``,`` or ``close``.
    """
    if s[i : i + 1] == close:
        return i + 1
    while True:
        i = _skip_ws(s, member(i))
        sep = s[i : i + 1]
        if sep == close:
            return i + 1
        if sep != ",":
            raise ValueError(f"expected ',' or '{close}'")
        i = _skip_ws(s, i + 1)


def _walk_object(s: str, i: int, depth: int, budget: _Budget) -> tuple[_Object, int]:
    obj = _Object(0, {})

    def member(i: int) -> int:
        if s[i : i + 1] != '"':
            raise ValueError("expected a key")
        key, i = scanstring(s, i + 1)
        i = _skip_ws(s, i)
        if s[i : i + 1] != ":":
            raise ValueError("expected ':'")
        i = _skip_ws(s, i + 1)
        if obj.count < _MAX_KEYS:
            obj.items[key], i = _walk(s, i, depth + 1, budget)
        else:
            _, i = _DECODER.raw_decode(s, i)
        obj.count += 1
        return i

    return obj, _members(s, i, "}", member)


def _walk_array(s: str, i: int, depth: int, budget: _Budget) -> tuple[_Array, int]:
    arr = _Array(0, [])

    def member(i: int) -> int:
        if arr.count < _HEAD_ITEMS:
            item, i = _walk(s, i, depth + 1, budget)
            arr.head.append(item)
        else:
            _, i = _DECODER.raw_decode(s, i)
        arr.count += 1
        return i

    return arr, _members(s, i, "]", member)


def json_sketch(text: str) -> Any | None:
    """A bounded sketch of the JSON document ``text`` (array lengths, key counts, first items,
    long strings cut), walked in place; None when ``text`` is not JSON."""
    if not _looks_like_json(text):
        return None
    try:
        sketch, end = _walk(text, _skip_ws(text, 0), 0, _Budget(_MAX_CONTAINERS))
    except (ValueError, IndexError, RecursionError):
        return None
    if _skip_ws(text, end) != len(text):
        return None
    return sketch


def _kind(node: Any) -> str:
    if isinstance(node, _Array):
        return f"array[{node.count}]"
    if isinstance(node, _Object):
        return f"object({node.count} keys)"
    if isinstance(node, _Elided):
        return f"{node.kind}[{node.count}]" if node.kind == "array" else f"object({node.count} keys)"
    if isinstance(node, bool) or node is None:
        return "boolean" if isinstance(node, bool) else "null"
    if isinstance(node, int | float):
        return "number"
    return "string"


def _shape_lines(node: Any, path: str, out: list[str], limit: int) -> None:
    """``path: kind`` for every container down the sketch (arrays by their first item)."""
    if len(out) >= limit:
        return
    if isinstance(node, _Object):
        keys = ", ".join(list(node.items)[:24]) + (", …" if node.count > 24 else "")
        out.append(f"{path}: object with {node.count} keys: {keys}")
        for key, child in node.items.items():
            if isinstance(child, _Array | _Object):
                name = key if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key) else json.dumps(key)
                _shape_lines(child, f"{path}.{name}", out, limit)
    elif isinstance(node, _Array):
        first = node.head[0] if node.head else None
        of = f" of {_kind(first)}" if node.head else ""
        if isinstance(first, _Object):
            of = f" of object ({', '.join(list(first.items)[:24])})"
        out.append(f"{path}: array of {node.count} items{of}")
        if isinstance(first, _Array | _Object):
            _shape_lines(first, f"{path}[0]", out, limit)


def _render(node: Any, items: int) -> Any:
    """The sketch as plain JSON values, arrays cut to ``items`` first items plus a count marker."""
    if isinstance(node, _Object):
        out = {k: _render(v, items) for k, v in node.items.items()}
        if node.count > len(node.items):
            out["…"] = f"{node.count - len(node.items)} more keys"
        return out
    if isinstance(node, _Array):
        shown = [_render(v, items) for v in node.head[:items]]
        if node.count > len(shown):
            shown.append(f"… {node.count - len(shown)} more items (of {node.count})")
        return shown
    if isinstance(node, _Elided):
        return f"…{_kind(node)}"
    return node


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# --- the preview ----------------------------------------------------------------------------------


def _header(
    what: str, handle: str, returned: TokenCount, document: str, policy: ShapingPolicy, is_json: bool
) -> str:
    about = "~" if returned.estimated else ""
    ttl = policy.handle_ttl_seconds
    lasts = f"{ttl / 60:g} minutes" if ttl >= 60 else f"{ttl:g} seconds"
    reads = (
        "read_result with offset (page from a character offset), with pattern and context_lines "
        "(grep: matching lines with their neighbours)"
        + (", or with path (a JMESPath expression, e.g. items[0] or items[?id==`3`].name)" if is_json else "")
    )
    return (
        f"[toolscout: the result of {what} is {about}{returned.tokens} tokens "
        f"({len(document)} characters), over the {policy.budget_tokens}-token result budget. "
        f"A preview follows; the whole result is kept for {lasts} as handle {handle!r}: {reads}.]"
    )


def _text_preview(document: str, chars: int) -> str:
    """The head and tail of ``document`` within about ``chars`` characters, cut at line ends."""
    if len(document) <= chars:
        return document
    head_chars = int(chars * 0.7)
    tail_chars = max(chars - head_chars, 0)
    head = document[:head_chars]
    cut = head.rfind("\n")
    if cut > head_chars // 2:
        head = head[:cut]
    tail = document[len(document) - tail_chars :] if tail_chars else ""
    nl = tail.find("\n")
    if 0 <= nl < len(tail) // 2:
        tail = tail[nl + 1 :]
    hidden = document[len(head) : len(document) - len(tail)]
    lines = hidden.count("\n")
    gap = f"\n[… {len(hidden)} characters ({lines} lines) not shown: page or grep with read_result …]\n"
    return head + gap + tail


def _json_preview(sketch: Any, chars: int) -> str:
    lines: list[str] = []
    _shape_lines(sketch, "$", lines, limit=12)
    shape = "Shape:\n" + "\n".join(lines)
    for items in (_HEAD_ITEMS, 5, 3, 2, 1, 0):
        body = _dumps(_render(sketch, items))
        if len(shape) + len(body) + 20 <= chars or items == 0:
            break
    if len(shape) + len(body) + 20 > chars:
        body = body[: max(chars - len(shape) - 40, 0)] + "…(cut)"
    return f"{shape}\nFirst items:\n{body}"


def _preview_text(
    what: str, handle: str, document: str, sketch: Any | None, returned: TokenCount, policy: ShapingPolicy
) -> tuple[str, int]:
    """The preview block's text within the preview budget, and its exact token count."""
    limit = max(min(policy.preview_tokens, policy.budget_tokens), 1)
    header = _header(what, handle, returned, document, policy, sketch is not None)
    chars = int(limit * _CHARS_PER_TOKEN) - len(header)
    for _ in range(6):
        body = _json_preview(sketch, chars) if sketch is not None else _text_preview(document, chars)
        text = f"{header}\n{body}"
        # Byte-level BPE never makes more tokens than bytes: short previews need no counting.
        tokens = count_tokens(text, policy.encoding) if max_tokens(text) > limit else -1
        if tokens <= limit:
            return text, tokens if tokens >= 0 else count_tokens(text, policy.encoding)
        chars = int(chars * limit / tokens * 0.9) - 16
    return header, count_tokens(header, policy.encoding)


# --- shaping --------------------------------------------------------------------------------------


def _document(content: tuple[ContentBlock, ...], structured_json: str) -> str:
    texts = [b.text for b in content if b.text and not b.data]
    if not texts:
        return structured_json
    if len(texts) == 1 and not structured_json:
        return texts[0]
    return "\n\n".join([*texts, structured_json] if structured_json else texts)


def _binary_note(block: ContentBlock, tokens: int, budget: int) -> ContentBlock:
    kind = block.mime_type or block.type
    return ContentBlock(
        "text",
        text=f"[toolscout: {block.type} content ({kind}, {len(block.data)} bytes, ~{tokens} tokens as "
        f"base64) not inlined: over the {budget}-token result budget]",
        raw_json='{"type":"text"}',
    )


def shape_result(
    content: tuple[ContentBlock, ...],
    structured_json: str,
    policy: ShapingPolicy,
    *,
    handle: str,
    what: str,
) -> Shaped:
    """``content`` and ``structured_json`` shaped to ``policy``'s budget.

    ``handle`` names the document in the preview (the caller keeps ``Shaped.document`` under it when
    it is not None); ``what`` names the tool ("server/tool") in the preview's header.
    """
    enc = policy.encoding
    budget = policy.budget_tokens
    counts = {id(b): _block_tokens(b, enc) for b in content}
    structured_count = estimate_tokens(structured_json, enc)
    returned = _returned([counts[id(b)] for b in content], structured_count)
    if returned.tokens <= budget and (
        policy.structured_copy is StructuredCopy.TEXT
        or (not structured_json and not any(_looks_like_json(b.text) for b in content))
    ):
        return Shaped(content, structured_json, returned.tokens, returned.tokens, returned.estimated)
    content, structured_json = _dedupe(content, structured_json, policy)
    if not structured_json:
        structured_count = TokenCount(0)
    # Pretty-printed JSON costs 25-46 % more; compaction is skipped when the result cannot fit anyway.
    if sum(counts[id(b)].tokens for b in content) + structured_count.tokens <= 2 * budget:
        compacted = []
        for block in content:
            compact = compact_json_text(block.text) if block.type == "text" else None
            shorter = block if compact is None else replace(block, text=compact)
            if compact is not None:
                counts[id(shorter)] = estimate_tokens(compact, enc)
            compacted.append(shorter)
        content = tuple(compacted)
    kept: list[ContentBlock] = []
    used = structured_count.tokens
    for block in content:
        tokens = counts[id(block)].tokens
        if block.data and used + tokens > budget:
            note = _binary_note(block, tokens, budget)
            counts[id(note)] = _block_tokens(note, enc)
            tokens = counts[id(note)].tokens
            kept.append(note)
        else:
            kept.append(block)
        used += tokens
    content = tuple(kept)
    if used <= budget:
        return Shaped(content, structured_json, returned.tokens, used, returned.estimated)
    document = _document(content, structured_json)
    sketch = json_sketch(document)
    text, preview_tokens = _preview_text(what, handle, document, sketch, returned, policy)
    preview = ContentBlock("text", text=text, raw_json='{"type":"text"}')
    # Small non-text blocks (links, binary that fits) stay beside the preview.
    extras = [b for b in content if not b.text or b.data]
    room = budget - preview_tokens
    rest: list[ContentBlock] = []
    for block in extras:
        tokens = counts[id(block)].tokens
        if tokens <= room:
            rest.append(block)
            room -= tokens
    final = (preview, *rest)
    delivered_tokens = budget - room
    return Shaped(
        final, "", returned.tokens, delivered_tokens, returned.estimated, document, sketch is not None
    )
