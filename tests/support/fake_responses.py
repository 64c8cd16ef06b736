"""The fake provider's OpenAI Responses API answers, in the real wire format.

Output items in the order a model produces them (reasoning, message, tool search calls, function
calls); streamed as the documented server-sent events (``response.created`` ... per-item
``output_item.added`` / deltas / ``output_item.done`` ... ``response.completed``), each with its
``sequence_number``.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

from tests.support.fake_provider_rules import responses_deferred_functions

if TYPE_CHECKING:
    from tests.support.fake_provider import Reply

__all__ = ["responses_events", "responses_json", "responses_output"]


def responses_output(reply: Reply, body: dict[str, Any], ids: Iterator[int]) -> list[dict[str, Any]]:
    """The completed output items of ``reply``."""
    out: list[dict[str, Any]] = []
    if reply.reasoning:
        out.append(
            {
                "type": "reasoning",
                "id": f"rs_{next(ids)}",
                "summary": [{"type": "summary_text", "text": reply.reasoning}],
            }
        )
    if reply.text:
        out.append(
            {
                "type": "message",
                "id": f"msg_{next(ids)}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": reply.text, "annotations": [], "logprobs": []}],
            }
        )
    for s in reply.searches:
        out.append(
            {
                "type": "tool_search_call",
                "id": f"tsc_{next(ids)}",
                "call_id": s.call_id or f"call_{next(ids)}",
                "execution": "client",
                "arguments": s.arguments,
                "status": "completed",
            }
        )
    namespaces = responses_deferred_functions(body)
    for c in reply.tool_calls:
        item: dict[str, Any] = {
            "type": "function_call",
            "id": f"fc_{next(ids)}",
            "call_id": c.id or f"call_{next(ids)}",
            "name": c.name,
            "arguments": c.arguments_text(),
            "status": "completed",
        }
        if namespaces.get(c.name):
            item["namespace"] = namespaces[c.name]
        out.append(item)
    return out


def _usage(reply: Reply) -> dict[str, Any]:
    return {
        "input_tokens": reply.input_tokens,
        "input_tokens_details": {
            "cached_tokens": reply.cached_tokens,
            "cache_write_tokens": reply.cache_write_tokens,
        },
        "output_tokens": reply.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": reply.input_tokens + reply.output_tokens,
    }


def _response(
    body: dict[str, Any], rid: str, output: list[dict[str, Any]], usage: dict[str, Any] | None
) -> dict[str, Any]:
    return {
        "id": rid,
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed" if usage is not None else "in_progress",
        "model": body.get("model", ""),
        "output": output,
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "metadata": {},
        "parallel_tool_calls": True,
        "temperature": 1.0,
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "usage": usage,
    }


def responses_json(reply: Reply, body: dict[str, Any], ids: Iterator[int]) -> dict[str, Any]:
    """The non-streamed answer."""
    return _response(body, f"resp_{next(ids)}", responses_output(reply, body, ids), _usage(reply))


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _item_events(item: dict[str, Any], index: int, chunk: int) -> Iterator[dict[str, Any]]:
    """The events between an item's ``output_item.added`` and ``output_item.done``."""
    where = {"item_id": item["id"], "output_index": index}
    if item["type"] == "reasoning":
        text = item["summary"][0]["text"]
        part: dict[str, Any] = {"type": "summary_text", "text": ""}
        yield {"type": "response.reasoning_summary_part.added", **where, "summary_index": 0, "part": part}
        for piece in _pieces(text, chunk):
            yield {
                "type": "response.reasoning_summary_text.delta",
                **where,
                "summary_index": 0,
                "delta": piece,
            }
        yield {"type": "response.reasoning_summary_text.done", **where, "summary_index": 0, "text": text}
        yield {
            "type": "response.reasoning_summary_part.done",
            **where,
            "summary_index": 0,
            "part": {**part, "text": text},
        }
    elif item["type"] == "message":
        text = item["content"][0]["text"]
        text_part: dict[str, Any] = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        yield {"type": "response.content_part.added", **where, "content_index": 0, "part": text_part}
        for piece in _pieces(text, chunk):
            yield {
                "type": "response.output_text.delta",
                **where,
                "content_index": 0,
                "delta": piece,
                "logprobs": [],
            }
        yield {"type": "response.output_text.done", **where, "content_index": 0, "text": text, "logprobs": []}
        yield {
            "type": "response.content_part.done",
            **where,
            "content_index": 0,
            "part": {**text_part, "text": text},
        }
    elif item["type"] == "function_call":
        for piece in _pieces(item["arguments"], max(chunk, 8)):
            yield {"type": "response.function_call_arguments.delta", **where, "delta": piece}
        yield {
            "type": "response.function_call_arguments.done",
            **where,
            "name": item["name"],
            "arguments": item["arguments"],
        }


def _started(item: dict[str, Any]) -> dict[str, Any]:
    """An item as ``output_item.added`` shows it: in progress, nothing generated yet."""
    if item["type"] == "reasoning":
        return {**item, "summary": []}
    if item["type"] == "message":
        return {**item, "status": "in_progress", "content": []}
    if item["type"] == "function_call":
        return {**item, "status": "in_progress", "arguments": ""}
    return {**item, "status": "in_progress"}


async def responses_events(reply: Reply, body: dict[str, Any], ids: Iterator[int]) -> AsyncIterator[str]:
    """The streamed answer as server-sent events."""
    rid = f"resp_{next(ids)}"
    output = responses_output(reply, body, ids)
    seq = itertools.count()

    def sse(data: dict[str, Any]) -> str:
        return f"event: {data['type']}\ndata: {json.dumps({**data, 'sequence_number': next(seq)})}\n\n"

    yield sse({"type": "response.created", "response": _response(body, rid, [], None)})
    yield sse({"type": "response.in_progress", "response": _response(body, rid, [], None)})
    for index, item in enumerate(output):
        yield sse({"type": "response.output_item.added", "output_index": index, "item": _started(item)})
        for event in _item_events(item, index, reply.chunk_chars):
            yield sse(event)
        yield sse({"type": "response.output_item.done", "output_index": index, "item": item})
    yield sse({"type": "response.completed", "response": _response(body, rid, output, _usage(reply))})
