"""The fake provider's Anthropic Messages answers, in the real wire format (whole or streamed)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.support.fake_provider import Reply

__all__ = ["AnthropicAnswer"]


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


class AnthropicAnswer:
    """One scripted reply as content blocks: thinking, text, server searches, tool uses."""

    def __init__(self, reply: Reply, model: str, ids: Iterator[int]) -> None:
        self.reply = reply
        # ``_raw`` holds a tool input as the model produced it (possibly malformed) for streaming.
        self.blocks: list[dict[str, Any]] = []
        if reply.reasoning:
            self.blocks.append({"type": "thinking", "thinking": reply.reasoning, "signature": "sig"})
        if reply.text:
            self.blocks.append({"type": "text", "text": reply.text})
        for search in reply.server_searches:
            sid = search.id or f"srvtoolu_{next(ids)}"
            query = {"query": search.query}
            self.blocks.append(
                {
                    "type": "server_tool_use",
                    "id": sid,
                    "name": "tool_search_tool_bm25",
                    "input": query,
                    "_raw": json.dumps(query),
                }
            )
            references = [{"type": "tool_reference", "tool_name": n} for n in search.found]
            content = {"type": "tool_search_tool_search_result", "tool_references": references}
            self.blocks.append({"type": "tool_search_tool_result", "tool_use_id": sid, "content": content})
        for c in reply.tool_calls:
            raw = c.arguments_text()
            try:
                parsed = json.loads(raw)
            except json.JSONDecodeError:
                parsed = None
            cid = c.id or f"toolu_{next(ids)}"
            self.blocks.append({"type": "tool_use", "id": cid, "name": c.name, "input": parsed, "_raw": raw})
        self.usage: dict[str, Any] = {
            "input_tokens": reply.input_tokens,
            "output_tokens": reply.output_tokens,
            "cache_read_input_tokens": reply.cached_tokens,
            "cache_creation_input_tokens": reply.cache_write_tokens,
        }
        self.stop = "tool_use" if reply.tool_calls else "end_turn"
        self.message: dict[str, Any] = {
            "id": f"msg_{next(ids)}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "stop_sequence": None,
        }

    def whole(self) -> dict[str, Any]:
        clean = [{k: v for k, v in b.items() if k != "_raw"} for b in self.blocks]
        for b in clean:
            if b["type"] == "tool_use" and b["input"] is None:
                b["input"] = {}
        return {**self.message, "content": clean, "stop_reason": self.stop, "usage": self.usage}

    async def events(self) -> AsyncIterator[str]:
        def event(name: str, data: dict[str, Any]) -> str:
            return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n"

        chunk = self.reply.chunk_chars
        start = {
            **self.message,
            "content": [],
            "stop_reason": None,
            "usage": {**self.usage, "output_tokens": 1},
        }
        yield event("message_start", {"message": start})
        for index, b in enumerate(self.blocks):
            if b["type"] == "thinking":
                yield event(
                    "content_block_start",
                    {"index": index, "content_block": {"type": "thinking", "thinking": ""}},
                )
                for piece in _pieces(b["thinking"], chunk):
                    delta = {"type": "thinking_delta", "thinking": piece}
                    yield event("content_block_delta", {"index": index, "delta": delta})
                yield event(
                    "content_block_delta",
                    {"index": index, "delta": {"type": "signature_delta", "signature": "sig"}},
                )
            elif b["type"] == "text":
                yield event(
                    "content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}}
                )
                for piece in _pieces(b["text"], chunk):
                    yield event(
                        "content_block_delta",
                        {"index": index, "delta": {"type": "text_delta", "text": piece}},
                    )
            elif b["type"] == "tool_search_tool_result":
                yield event("content_block_start", {"index": index, "content_block": b})
            else:
                head = {"type": b["type"], "id": b["id"], "name": b["name"], "input": {}}
                yield event("content_block_start", {"index": index, "content_block": head})
                for piece in _pieces(b["_raw"], 8):
                    delta = {"type": "input_json_delta", "partial_json": piece}
                    yield event("content_block_delta", {"index": index, "delta": delta})
            yield event("content_block_stop", {"index": index})
        final: dict[str, Any] = {
            "delta": {"stop_reason": self.stop, "stop_sequence": None},
            "usage": {"output_tokens": self.usage["output_tokens"]},
        }
        yield event("message_delta", final)
        yield event("message_stop", {})
