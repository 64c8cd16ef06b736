"""Measurements of recorded LLM requests for ``deferral_bench.py``: what the model sees, prefix
stability, ``tools`` identity and cache-weighted input cost under each provider's caching rules.

Every function takes request *bodies* as the provider received them (the fake provider records
them), so the same code measures mimicked conversations now and real ``ChatLoop`` runs later.

Prompt order. A provider builds its prompt as tools, then system/instructions, then messages;
an HTTP body lists JSON keys in whatever order the SDK wrote them. Prefix figures therefore use
the body *re-serialised in prompt order* (compact JSON per element; ``cache_control`` markers
dropped, since they are not prompt content and move every call).

What the model sees (tokens, cache). Anthropic: deferred tools are not in the prompt; a
``tool_reference`` expands to the tool's definition where it appears ("Deferred tools are not
included in the system-prompt prefix ... the definition is appended inline as a tool_reference
block in the conversation history", platform.claude.com/docs/en/agents-and-tools/tool-use/
tool-use-with-prompt-caching). OpenAI Responses: a namespace shows only its name and description
until a search loads its functions, which are "injected at the end of the context window"
(developers.openai.com/api/docs/guides/tools-tool-search). Tokens are counted with o200k_base
for every provider (Anthropic's tokenizer differs by a few percent; ratios are what matter).
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "ANTHROPIC_LOOKBACK_BLOCKS",
    "ANTHROPIC_MIN_CACHEABLE",
    "LOCAL_BLOCK_TOKENS",
    "OPENAI_CACHE_STEP",
    "OPENAI_MIN_CACHEABLE",
    "PRICING",
    "CallCost",
    "PricingRule",
    "Segment",
    "anthropic_cache_costs",
    "local_prefill",
    "openai_cache_costs",
    "prefix_stability",
    "previous_kept",
    "prompt_order_text",
    "tools_identical",
    "visible_segments",
]

Api = Literal["messages", "chat_completions", "responses"]
Encode = Callable[[str], list[int]]

# Anthropic prompt caching (platform.claude.com/docs/en/build-with-claude/prompt-caching): a
# prefix is cached only up to an explicit cache_control breakpoint and only when it reaches the
# model's minimum cacheable length (1,024 tokens for Sonnet-class models; 4,096 for Opus 4.5/4.6
# and Haiku 4.5; 512 for the 5-series Opus/Fable/Mythos); a breakpoint also hits an entry written
# at any of the ~20 content-block boundaries before it. Writes bill 1.25x, reads 0.1x.
ANTHROPIC_MIN_CACHEABLE = 1024
ANTHROPIC_LOOKBACK_BLOCKS = 20
# OpenAI prompt caching (developers.openai.com/api/docs/guides/prompt-caching): automatic for
# prompts of 1,024 tokens or more, hits "in increments of 128 tokens" on the longest prefix seen
# recently (routing by prompt_cache_key). What a cacheable prompt does not read from the cache is
# written to it: billed at the input price before the GPT-5.6 family, at 1.25x since (reported
# as ``cache_write_tokens``). Reads are billed at 0.1x here for comparability; OpenAI's discount is
# model-dependent (50-90 %).
OPENAI_MIN_CACHEABLE = 1024
OPENAI_CACHE_STEP = 128
# Local servers with prefix caching (vLLM automatic prefix caching: KV blocks of 16 tokens, kept
# until evicted; llama.cpp's server reuses the common prefix of a slot's previous prompt with
# ``cache_prompt``): what is past the longest cached prefix is prefilled again.
LOCAL_BLOCK_TOKENS = 16


@dataclass(frozen=True)
class PricingRule:
    """How a provider bills the input of a call, in multiples of its uncached input price."""

    key: str
    label: str
    read: float
    write: float
    source: str


# The rules the benchmark prices calls with (bench/README.md states them with their sources).
PRICING: dict[str, PricingRule] = {
    r.key: r
    for r in (
        PricingRule(
            "anthropic",
            "Anthropic",
            0.10,
            1.25,
            "platform.claude.com/docs/en/build-with-claude/prompt-caching (pricing: 5-minute cache "
            "writes 1.25x base input, cache hits 0.1x)",
        ),
        PricingRule(
            "openai",
            "OpenAI before GPT-5.6",
            0.10,
            1.00,
            "developers.openai.com/api/docs/guides/prompt-caching (no write premium; cached input "
            "at the model's discount, 0.1x for the GPT-5 family)",
        ),
        PricingRule(
            "openai_5_6",
            "OpenAI GPT-5.6 and later",
            0.10,
            1.25,
            "developers.openai.com/api/docs/pricing (GPT-5.6 family: cache writes 1.25x input, "
            "reported as usage.prompt_tokens_details.cache_write_tokens)",
        ),
    )
}


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=False)


def _strip(value: Any) -> Any:
    """``value`` without cache_control markers (they are not prompt content)."""
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


# --- prompt order ----------------------------------------------------------------------------


def _system_text(body: dict[str, Any], api: Api) -> str:
    if api == "responses":
        return str(body.get("instructions") or "")
    system = body.get("system")
    if isinstance(system, list):
        return "".join(b.get("text", "") for b in system)
    return str(system or "")


def prompt_order_text(body: dict[str, Any], api: Api) -> str:
    """The whole request (deferred definitions included) in prompt order: tools, system, history."""
    parts = [_json(_strip(t)) for t in body.get("tools") or []]
    parts.append(_system_text(body, api))
    history = body.get("input") if api == "responses" else body.get("messages")
    if isinstance(history, list):
        parts += [_json(_strip(m)) for m in history]
    return "\n".join(parts)


def prefix_stability(bodies: Sequence[dict[str, Any]], api: Api) -> list[float | None]:
    """Per request: the share of its prompt-order bytes equal to a prefix of the previous
    request's (None for the first request)."""
    texts = [prompt_order_text(b, api).encode() for b in bodies]
    out: list[float | None] = [None]
    for prev, cur in itertools.pairwise(texts):
        out.append(round(_common_prefix(prev, cur) / len(cur), 4) if cur else None)
    return out


def previous_kept(bodies: Sequence[dict[str, Any]], api: Api) -> list[float | None]:
    """Per request: the share of the previous request's prompt-order bytes that this one starts
    with (None for the first). 1.0 means the request only appended to the previous one, so every
    prefix cache entry of it still hits; :func:`prefix_stability` also counts what was appended
    (new search results, tool output) against a request."""
    texts = [prompt_order_text(b, api).encode() for b in bodies]
    out: list[float | None] = [None]
    for prev, cur in itertools.pairwise(texts):
        out.append(round(_common_prefix(prev, cur) / len(prev), 4) if prev else None)
    return out


def _common_prefix(a: Sequence[Any], b: Sequence[Any]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def tools_identical(bodies: Sequence[dict[str, Any]]) -> bool:
    """Whether ``tools`` was byte-identical (as received, breakpoints included) on every request."""
    return len({_json(b.get("tools") or []) for b in bodies}) <= 1


# --- what the model sees ---------------------------------------------------------------------


@dataclass
class Segment:
    """One content block of the prompt as the model sees it."""

    text: str
    breakpoint: bool = False
    tokens: list[int] = field(default_factory=list)


def _anthropic_segments(body: dict[str, Any]) -> list[Segment]:
    declared = {t.get("name"): t for t in body.get("tools") or []}

    def definition(name: str) -> Segment:
        tool = {k: v for k, v in (declared.get(name) or {"name": name}).items() if k != "defer_loading"}
        return Segment(_json(_strip(tool)))

    out = [
        Segment(_json(_strip(t)), "cache_control" in t)
        for t in body.get("tools") or []
        if not t.get("defer_loading")
    ]
    system = body.get("system")
    if system:
        marked = isinstance(system, list) and any("cache_control" in b for b in system)
        out.append(Segment(_system_text(body, "messages"), marked))
    for m in body.get("messages") or []:
        content = m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}]
        for block in content:
            refs: list[str] = []
            if block.get("type") == "tool_result" and isinstance(block.get("content"), list):
                refs = [c["tool_name"] for c in block["content"] if c.get("type") == "tool_reference"]
                shown = {
                    **block,
                    "content": [c for c in block["content"] if c.get("type") != "tool_reference"],
                }
            elif block.get("type") == "tool_search_tool_result":
                refs = [r["tool_name"] for r in (block.get("content") or {}).get("tool_references") or []]
                shown = block
            else:
                shown = block
            segs = [Segment(_json(_strip(shown))), *(definition(n) for n in refs)]
            segs[-1].breakpoint = "cache_control" in block
            out += segs
    return out


def _responses_segments(body: dict[str, Any]) -> list[Segment]:
    out: list[Segment] = []
    for t in body.get("tools") or []:
        if t.get("type") == "namespace":
            out.append(Segment(_json({"namespace": t["name"], "description": t.get("description", "")})))
        else:
            out.append(Segment(_json(t)))
    if body.get("instructions"):
        out.append(Segment(str(body["instructions"])))
    for item in body.get("input") or []:
        if item.get("type") == "tool_search_output":
            out.append(Segment(_json({"type": "tool_search_output", "call_id": item.get("call_id")})))
            for space in item.get("tools") or []:
                functions = space.get("tools") if space.get("type") == "namespace" else [space]
                out += [
                    Segment(_json({k: v for k, v in f.items() if k != "defer_loading"}))
                    for f in functions or []
                ]
        else:
            out.append(Segment(_json(item)))
    return out


def _chat_segments(body: dict[str, Any]) -> list[Segment]:
    return [Segment(_json(t)) for t in body.get("tools") or []] + [
        Segment(_json(m)) for m in body.get("messages") or []
    ]


def visible_segments(body: dict[str, Any], api: Api, encode: Encode) -> list[Segment]:
    """The prompt the model sees, block by block, with token ids and Anthropic breakpoints."""
    if api == "messages":
        segments = _anthropic_segments(body)
    elif api == "responses":
        segments = _responses_segments(body)
    else:
        segments = _chat_segments(body)
    for s in segments:
        s.tokens = encode(s.text)
    return segments


# --- cache-weighted cost ---------------------------------------------------------------------


@dataclass(frozen=True)
class CallCost:
    tokens: int
    cache_read: int
    cache_write: int

    @property
    def full_price(self) -> int:
        return self.tokens - self.cache_read - self.cache_write

    def weighted(self, rule: PricingRule) -> float:
        """Input cost in full-price tokens under ``rule``: uncached x1 + reads and writes at its rates."""
        return self.full_price + rule.read * self.cache_read + rule.write * self.cache_write


def anthropic_cache_costs(
    calls: Sequence[list[Segment]],
    *,
    min_tokens: int = ANTHROPIC_MIN_CACHEABLE,
    lookback: int = ANTHROPIC_LOOKBACK_BLOCKS,
) -> list[CallCost]:
    """Anthropic's explicit caching over one conversation: each breakpoint reads the longest
    cached prefix ending at it or at one of the ``lookback`` block boundaries before it, and
    writes the prefix up to it when that reaches ``min_tokens``."""
    cache: set[str] = set()
    out: list[CallCost] = []
    for segments in calls:
        # Prefix hash and token count at each block boundary (index i = after segment i).
        hashes: list[str] = []
        totals: list[int] = []
        digest = hashlib.sha256()
        running = 0
        for s in segments:
            digest.update(s.text.encode())
            digest.update(b"\x00")
            hashes.append(digest.copy().hexdigest())
            running += len(s.tokens)
            totals.append(running)
        breakpoints = [i for i, s in enumerate(segments) if s.breakpoint]
        read_end = -1
        for b in breakpoints:
            for i in range(b, max(-1, b - lookback - 1), -1):
                if hashes[i] in cache:
                    read_end = max(read_end, i)
                    break
        read = totals[read_end] if read_end >= 0 else 0
        writable = [b for b in breakpoints if totals[b] >= min_tokens]
        for b in writable:
            cache.add(hashes[b])
        write_end = max((b for b in writable if b > read_end), default=-1)
        written = totals[write_end] - read if write_end >= 0 else 0
        out.append(CallCost(running, read, written))
    return out


def openai_cache_costs(
    calls: Sequence[list[Segment]], *, min_tokens: int = OPENAI_MIN_CACHEABLE, step: int = OPENAI_CACHE_STEP
) -> list[CallCost]:
    """OpenAI's automatic caching over one conversation: the longest token prefix shared with an
    earlier request, rounded down to ``step`` tokens, once it reaches ``min_tokens``; the rest of a
    cacheable prompt (``min_tokens`` or more) is written to the cache."""
    seen: list[list[int]] = []
    out: list[CallCost] = []
    for segments in calls:
        tokens = [t for s in segments for t in s.tokens]
        shared = max((_common_prefix(prev, tokens) for prev in seen), default=0)
        cached = shared // step * step if shared >= min_tokens else 0
        written = len(tokens) - cached if len(tokens) >= min_tokens else 0
        out.append(CallCost(len(tokens), cached, written))
        seen.append(tokens)
    return out


def local_prefill(calls: Sequence[list[Segment]], *, block: int = LOCAL_BLOCK_TOKENS) -> list[int]:
    """Per call, the prompt tokens a local server with prefix caching prefills (computes): all
    but the longest prefix shared with an earlier request, rounded down to whole ``block``s."""
    seen: list[list[int]] = []
    out: list[int] = []
    for segments in calls:
        tokens = [t for s in segments for t in s.tokens]
        shared = max((_common_prefix(prev, tokens) for prev in seen), default=0)
        out.append(len(tokens) - shared // block * block)
        seen.append(tokens)
    return out
