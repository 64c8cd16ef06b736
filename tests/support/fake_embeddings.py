"""A local server speaking OpenAI's ``POST /v1/embeddings`` wire format, for embedder tests.

The real ``openai`` SDK talks to it through ``base_url`` (``<url>/v1``), so requests, batching,
retries, timeouts and reply parsing all go through the SDK's own code. Vectors are deterministic:
each word of the input adds 1 to one of ``dim`` buckets (a stable hash), so texts sharing words
have similar vectors and a test can predict rankings. Failures are scripted as a queue of HTTP
statuses (one per request), a reply can be held until an event is set (timeouts), and a 200 reply
can be malformed in each way a broken or misconfigured endpoint answers (``malformed``).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import re
import struct
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

__all__ = ["MALFORMED_REPLIES", "FakeEmbeddings", "bag_vector"]

# Ways a 200 reply can be broken (FakeEmbeddings.malformed):
MALFORMED_REPLIES = (
    "non_json",  # an HTML page (a proxy's error page) with status 200
    "bad_json",  # JSON content type, body not JSON
    "no_data",  # a JSON object without "data"
    "wrong_dim",  # well-formed vectors, twice the size asked for (another model behind the URL)
    "ragged",  # vectors of different sizes in one reply
    "nan",  # NaN components
    "inf",  # infinite components
    "wrong_count",  # one vector fewer than inputs
    "bad_index",  # indexes counted from 1, not 0
    "strings",  # embeddings that are strings, not numbers
)

_WORD_RE = re.compile(r"[a-z0-9]+")


def bag_vector(text: str, dim: int) -> list[float]:
    """The fake's embedding of ``text``: word counts hashed into ``dim`` buckets (not normalised)."""
    vector = [0.0] * dim
    for word in _WORD_RE.findall(text.lower()):
        bucket = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "little") % dim
        vector[bucket] += 1.0
    if not any(vector):
        vector[0] = 1e-3  # an all-zero vector would be a useless embedding; real models never return one
    return vector


@dataclass
class FakeEmbeddings:
    """Serve on 127.0.0.1 with a free port: ``async with FakeEmbeddings() as fake: fake.base_url``."""

    dim: int = 64
    statuses: list[int] = field(default_factory=list)  # next replies' HTTP statuses (then 200)
    hold: asyncio.Event | None = None  # when set, every reply waits for this event
    wrong_count: bool = False  # reply with one vector fewer than asked
    malformed: str | None = None  # one of MALFORMED_REPLIES: every 200 reply broken that way
    requests: list[dict[str, Any]] = field(default_factory=list)
    port: int = 0
    _server: uvicorn.Server | None = None
    _task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> FakeEmbeddings:
        app = Starlette(routes=[Route("/v1/embeddings", self._embeddings, methods=["POST"])])
        config = uvicorn.Config(
            app, host="127.0.0.1", port=0, log_level="warning", lifespan="off", ws="none", access_log=False
        )
        self._server = uvicorn.Server(config)
        self._task = asyncio.create_task(self._server.serve())
        async with asyncio.timeout(10):
            while not self._server.started:  # noqa: ASYNC110  # uvicorn has no "started" event
                await asyncio.sleep(0.005)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        assert self._task is not None
        if self.hold is not None:
            self.hold.set()
        self._server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(self._task, 10)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def _embeddings(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append({"body": body, "authorization": request.headers.get("authorization")})
        if self.hold is not None:
            await self.hold.wait()
        if self.statuses:
            status = self.statuses.pop(0)
            if status != 200:
                return JSONResponse(
                    {"error": {"message": f"scripted {status}", "type": "server_error", "code": None}},
                    status_code=status,
                    headers={"retry-after": "0"},
                )
        malformed = self.malformed
        if malformed == "non_json":
            return PlainTextResponse("<html><body>502 Bad Gateway</body></html>", status_code=200)
        if malformed == "bad_json":
            return Response('{"object": "list", "data": [', media_type="application/json")
        if malformed == "no_data":
            return JSONResponse({"object": "list", "model": body.get("model", "")})
        inputs = body["input"]
        texts = [inputs] if isinstance(inputs, str) else list(inputs)
        if self.wrong_count or malformed == "wrong_count":
            texts = texts[:-1]
        dim = int(body.get("dimensions") or self.dim) * (2 if malformed == "wrong_dim" else 1)
        data = []
        for i, text in enumerate(texts):
            vector = bag_vector(text, dim)
            if malformed == "ragged":
                vector = vector[: dim - i - 1] if i % 2 else [*vector, 0.5]
            if malformed in ("nan", "inf"):
                vector[0] = float(malformed)
            embedding: Any = vector
            if malformed == "strings":
                embedding = "0.1, 0.2"
            elif body.get("encoding_format") == "base64":
                embedding = base64.b64encode(struct.pack(f"<{dim}f", *vector)).decode()
            data.append(
                {
                    "object": "embedding",
                    "index": i + 1 if malformed == "bad_index" else i,
                    "embedding": embedding,
                }
            )
        data.reverse()  # servers may answer out of order; clients must sort by index
        reply = {
            "object": "list",
            "data": data,
            "model": body.get("model", ""),
            "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)},
        }
        # json.dumps writes NaN / Infinity as bare words, as some servers do on a float overflow
        # (starlette's JSONResponse refuses them); Python's and the SDK's parsers accept them.
        return Response(json.dumps(reply), media_type="application/json")
