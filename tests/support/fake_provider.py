"""A local LLM provider speaking the OpenAI Chat Completions, OpenAI Responses and Anthropic
Messages wire formats.

The real ``openai`` and ``anthropic`` SDKs talk to it through ``base_url`` (OpenAI: ``<url>/v1``,
Anthropic: ``<url>``), so every byte of a test goes through the SDKs' own parsing, streaming and
error handling. Replies are scripted (a queue, then an optional ``responder`` function of the
request), can be errors with any status code, can be held until released (slow replies, deadlines,
cancellation), and every request received is recorded (parsed, and its raw bytes).

It enforces what the real APIs document for native deferral and prompt caching
(:mod:`tests.support.fake_provider_rules`), answering 400 without consuming a scripted reply:

* Anthropic: no ``cache_control`` on a tool with ``defer_loading``; at least one tool not deferred;
  at most 10,000 deferred tools and 4 cache breakpoints; every ``tool_reference`` names a tool in
  ``tools``; no ``tool_result`` for a ``srvtoolu_`` id; server search blocks only with the search
  tool declared. A model in ``strict_models`` also rejects any change to ``tools`` within a
  conversation (told apart by model and first user message) other than adding deferred tools
  nothing references yet.
* Responses: a ``tool_search_output`` must answer an open client ``tool_search_call``; every call
  in the input must be answered; a deferred function may appear in a call (the model's, scripted,
  or one the client sends back) only after a ``tool_search_output`` returned it; a namespace
  appears at most once across the ``tool_search_output`` items of one request ("Namespace names
  must be unique", as an OpenAI-compatible upstream answers).
* Chat Completions: fields in ``unknown_chat_fields`` are refused, as OpenAI-compatible servers
  that do not know them refuse them (``prompt_cache_key``).

Anthropic replies may carry scripted server-side searches (``server_tool_use`` +
``tool_search_tool_result`` blocks); Responses replies may carry reasoning items and client
``tool_search_call`` items.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.support.fake_anthropic import AnthropicAnswer
from tests.support.fake_provider_rules import (
    anthropic_conversation_key,
    anthropic_request_violation,
    anthropic_strict_violation,
    responses_call_violation,
    responses_input_violation,
)
from tests.support.fake_responses import responses_events, responses_json

__all__ = ["FakeProvider", "RecordedRequest", "Reply", "ScriptedCall", "ScriptedSearch", "ServerSearch"]

Api = Literal["openai", "anthropic", "responses"]


@dataclass
class ScriptedCall:
    """A tool call the fake model makes. ``arguments`` may be a string (possibly malformed JSON)."""

    name: str
    arguments: str | dict[str, Any] = field(default_factory=dict)
    id: str | None = None

    def arguments_text(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


@dataclass
class ScriptedSearch:
    """Responses API: a client-executed ``tool_search_call`` the fake model makes."""

    arguments: dict[str, Any]
    call_id: str | None = None


@dataclass
class ServerSearch:
    """Anthropic: a search the API runs itself (``server_tool_use`` + ``tool_search_tool_result``)."""

    query: str
    found: list[str]
    id: str | None = None


@dataclass
class Reply:
    """One scripted provider reply: an answer, tool calls, or an HTTP error."""

    text: str = ""
    reasoning: str = ""
    # OpenAI-compatible servers disagree on the field name (vLLM/DeepSeek vs OpenRouter/Ollama).
    reasoning_field: Literal["reasoning_content", "reasoning"] = "reasoning_content"
    tool_calls: list[ScriptedCall] = field(default_factory=list)
    status: int = 200
    error_message: str = ""
    # Seconds sent in Retry-After on errors (keeps retry tests fast); None = no header.
    retry_after: float | None = 0.0
    input_tokens: int = 10
    output_tokens: int = 5
    cached_tokens: int = 0
    # Anthropic cache_creation_input_tokens / OpenAI (Chat Completions prompt_tokens_details,
    # Responses input_tokens_details) cache_write_tokens.
    cache_write_tokens: int = 0
    # Responses API: client tool_search_call items, before the function calls.
    searches: list[ScriptedSearch] = field(default_factory=list)
    # Anthropic: server-side searches, before the tool_use blocks.
    server_searches: list[ServerSearch] = field(default_factory=list)
    # The reply is sent only once this event is set (or the client disconnects).
    hold: asyncio.Event | None = None
    # Split streamed text into chunks of this many characters.
    chunk_chars: int = 4

    @classmethod
    def answer(cls, text: str, **kw: Any) -> Reply:
        return cls(text=text, **kw)

    @classmethod
    def calls(cls, *calls: ScriptedCall, **kw: Any) -> Reply:
        return cls(tool_calls=list(calls), **kw)

    @classmethod
    def error(cls, status: int, message: str, **kw: Any) -> Reply:
        return cls(status=status, error_message=message, **kw)

    @classmethod
    def tools_not_supported(cls) -> Reply:
        # Ollama's wording for models without tool support.
        return cls.error(400, "registry.ollama.ai/library/tiny:latest does not support tools")


@dataclass
class RecordedRequest:
    api: Api
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    # The body exactly as the SDK sent it.
    raw: bytes = b""
    # The 400 message the fake answered with when the request broke a documented rule.
    rejected: str = ""

    @property
    def tool_names(self) -> list[str]:
        """Declared tool names (Responses: functions, namespaced ones included, and ``tool_search``)."""
        tools = self.body.get("tools") or []
        if self.api == "openai":
            return [t["function"]["name"] for t in tools]
        if self.api == "responses":
            names: list[str] = []
            for t in tools:
                if t.get("type") == "namespace":
                    names += [f["name"] for f in t.get("tools") or []]
                else:
                    names.append(t.get("name") or t["type"])
            return names
        return [t["name"] for t in tools]

    @property
    def streamed(self) -> bool:
        return bool(self.body.get("stream"))


class FakeProvider:
    """Serve on 127.0.0.1 with a free port: ``async with FakeProvider() as fake: fake.openai_base_url``."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.responder: Callable[[RecordedRequest], Reply] | None = None
        self.requests: list[RecordedRequest] = []
        self.disconnects = 0
        # Anthropic model ids that reject changes to tools mid-conversation.
        self.strict_models: set[str] = set()
        # Chat Completions body fields this server refuses, as some OpenAI-compatible servers
        # refuse fields they do not know (e.g. {"prompt_cache_key"}).
        self.unknown_chat_fields: set[str] = set()
        self._conversation_tools: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._changed = asyncio.Condition()
        self._ids = itertools.count(1)
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None
        self.port = 0

    # --- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> FakeProvider:
        app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._openai, methods=["POST"]),
                Route("/v1/responses", self._responses, methods=["POST"]),
                Route("/v1/messages", self._anthropic, methods=["POST"]),
            ]
        )
        config = uvicorn.Config(
            app, host="127.0.0.1", port=0, log_level="warning", lifespan="off", ws="none", access_log=False
        )
        self._server = uvicorn.Server(config)
        self._task = asyncio.create_task(self._server.serve())
        # uvicorn exposes no "started" event; poll its flag, bounded.
        async with asyncio.timeout(10):
            while not self._server.started:  # noqa: ASYNC110
                await asyncio.sleep(0.005)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        assert self._task is not None
        self._server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(self._task, 10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.url

    def openai_client(self, api_key: str = "sk-e2e-0123456789abc") -> dict[str, Any]:
        """An entry of a config's ``clients``: this provider's OpenAI API."""
        return {"provider": "openai", "base_url": self.openai_base_url, "api_key": api_key}

    # --- scripting ---------------------------------------------------------------------------

    def script(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    async def wait_for_requests(self, count: int, within: float = 10.0) -> None:
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(lambda: len(self.requests) >= count)

    async def wait_for_disconnects(self, count: int, within: float = 10.0) -> None:
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(lambda: self.disconnects >= count)

    async def _record(
        self, api: Api, request: Request, check: Callable[[RecordedRequest], str | None] | None = None
    ) -> tuple[RecordedRequest, Reply]:
        """Records the request; a request breaking a rule of ``check`` gets a 400 and leaves the
        scripted replies untouched (the real API rejects it before any model runs)."""
        raw = await request.body()
        rec = RecordedRequest(api, request.url.path, dict(request.headers), json.loads(raw), raw)
        rec.rejected = (check(rec) if check is not None else None) or ""
        if rec.rejected:
            reply = Reply.error(400, rec.rejected)
        elif self.replies:
            reply = self.replies.pop(0)
        elif self.responder is not None:
            reply = self.responder(rec)
        else:
            reply = Reply.error(500, "fake provider: no scripted reply left")
        async with self._changed:
            self.requests.append(rec)
            self._changed.notify_all()
        return rec, reply

    async def _hold(self, reply: Reply, request: Request) -> bool:
        """Waits for the reply's release; False when the client went away first."""
        if reply.hold is None:
            return True

        async def disconnected() -> None:
            while (await request.receive())["type"] != "http.disconnect":
                pass

        release = asyncio.create_task(reply.hold.wait())
        gone = asyncio.create_task(disconnected())
        done, pending = await asyncio.wait({release, gone}, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        if gone in done:
            async with self._changed:
                self.disconnects += 1
                self._changed.notify_all()
            return False
        return True

    def _error(self, api: Api, reply: Reply) -> Response:
        headers = {} if reply.retry_after is None else {"retry-after": str(reply.retry_after)}
        if api == "openai":
            body: dict[str, Any] = {
                "error": {"message": reply.error_message, "type": "invalid_request_error", "code": None}
            }
        else:
            kind = {429: "rate_limit_error", 400: "invalid_request_error", 529: "overloaded_error"}
            body = {
                "type": "error",
                "error": {"type": kind.get(reply.status, "api_error"), "message": reply.error_message},
            }
        return JSONResponse(body, status_code=reply.status, headers=headers)

    # --- OpenAI Chat Completions -------------------------------------------------------------

    def _chat_fields_violation(self, rec: RecordedRequest) -> str | None:
        unknown = sorted(self.unknown_chat_fields & set(rec.body))
        return f"Unrecognized request argument supplied: {unknown[0]}" if unknown else None

    async def _openai(self, request: Request) -> Response:
        rec, reply = await self._record("openai", request, self._chat_fields_violation)
        if not await self._hold(reply, request):
            return Response(status_code=499)
        if reply.status != 200:
            return self._error("openai", reply)
        calls = [(c.id or f"call_{next(self._ids)}", c) for c in reply.tool_calls]
        usage = {
            "prompt_tokens": reply.input_tokens,
            "completion_tokens": reply.output_tokens,
            "total_tokens": reply.input_tokens + reply.output_tokens,
            "prompt_tokens_details": {
                "cached_tokens": reply.cached_tokens,
                "cache_write_tokens": reply.cache_write_tokens,
            },
        }
        base = {"id": f"chatcmpl-{next(self._ids)}", "created": int(time.time()), "model": rec.body["model"]}
        finish = "tool_calls" if calls else "stop"
        if not rec.streamed:
            message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
            if reply.reasoning:
                message[reply.reasoning_field] = reply.reasoning
            if calls:
                message["tool_calls"] = [
                    {
                        "id": cid,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments_text()},
                    }
                    for cid, c in calls
                ]
            return JSONResponse(
                {
                    **base,
                    "object": "chat.completion",
                    "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
                    "usage": usage,
                }
            )

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> str:
            data = {
                **base,
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
            }
            return f"data: {json.dumps(data)}\n\n"

        async def events() -> AsyncIterator[str]:
            yield chunk({"role": "assistant", "content": ""})
            for piece in _pieces(reply.reasoning, reply.chunk_chars):
                yield chunk({reply.reasoning_field: piece})
            for piece in _pieces(reply.text, reply.chunk_chars):
                yield chunk({"content": piece})
            for index, (cid, c) in enumerate(calls):
                args = c.arguments_text()
                head = {
                    "index": index,
                    "id": cid,
                    "type": "function",
                    "function": {"name": c.name, "arguments": ""},
                }
                yield chunk({"tool_calls": [head]})
                for piece in _pieces(args, max(reply.chunk_chars, 8)):
                    yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            yield chunk({}, finish)
            if (rec.body.get("stream_options") or {}).get("include_usage"):
                yield f"data: {json.dumps({**base, 'object': 'chat.completion.chunk', 'choices': [], 'usage': usage})}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    # --- Anthropic Messages ------------------------------------------------------------------

    def _anthropic_rules(self, rec: RecordedRequest) -> str | None:
        body = rec.body
        violation = anthropic_request_violation(body)
        key = anthropic_conversation_key(body)
        if violation is not None or key is None or body.get("model") not in self.strict_models:
            return violation
        tools = body.get("tools") or []
        previous = self._conversation_tools.get(key)
        if previous is not None and len(body.get("messages") or []) > 1:
            violation = anthropic_strict_violation(previous, tools, body["messages"])
        if violation is None:
            self._conversation_tools[key] = tools
        return violation

    async def _anthropic(self, request: Request) -> Response:
        rec, reply = await self._record("anthropic", request, self._anthropic_rules)
        if not await self._hold(reply, request):
            return Response(status_code=499)
        if reply.status != 200:
            return self._error("anthropic", reply)
        answer = AnthropicAnswer(reply, rec.body["model"], self._ids)
        if not rec.streamed:
            return JSONResponse(answer.whole())
        return StreamingResponse(answer.events(), media_type="text/event-stream")

    # --- OpenAI Responses --------------------------------------------------------------------

    def _responses_rules(self, rec: RecordedRequest) -> str | None:
        return responses_input_violation(rec.body)

    async def _responses(self, request: Request) -> Response:
        rec, reply = await self._record("responses", request, self._responses_rules)
        if not await self._hold(reply, request):
            return Response(status_code=499)
        if reply.status == 200:
            bad_script = responses_call_violation(rec.body, [c.name for c in reply.tool_calls])
            if bad_script is not None:
                rec.rejected = bad_script
                reply = Reply.error(400, bad_script)
        if reply.status != 200:
            return self._error("openai", reply)
        if not rec.streamed:
            return JSONResponse(responses_json(reply, rec.body, self._ids))
        return StreamingResponse(responses_events(reply, rec.body, self._ids), media_type="text/event-stream")


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def loop_responder(tool_name: str, iterations: int) -> Callable[[RecordedRequest], Reply]:
    """Stateless script: call ``tool_name`` until the conversation holds ``iterations`` tool
    results, then answer (works for any number of concurrent chats)."""

    def respond(req: RecordedRequest) -> Reply:
        messages = req.body["messages"]
        if req.api == "openai":
            done = sum(1 for m in messages if m["role"] == "tool")
        else:
            done = sum(
                1
                for m in messages
                if m["role"] == "user" and isinstance(m["content"], list)
                for b in m["content"]
                if b.get("type") == "tool_result"
            )
        if done < iterations:
            return Reply.calls(ScriptedCall(tool_name, {"n": done}))
        return Reply.answer("done")

    return respond


async def _serve_forever(tool_name: str, iterations: int) -> None:
    async with FakeProvider() as fake:
        fake.responder = loop_responder(tool_name, iterations)
        # The only line on stdout: the parent reads the port from it.
        print(fake.port, flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    # ``python -m tests.support.fake_provider TOOL ITERATIONS``: a provider in its own process, so
    # benchmarks do not charge its CPU to the process under test. Records nothing useful; stop it
    # with SIGTERM.
    import sys

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve_forever(sys.argv[1], int(sys.argv[2])))
