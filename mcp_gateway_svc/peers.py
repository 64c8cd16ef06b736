"""Sessions across gateway replicas: each session is served by the replica that holds it.

Progressive mode keeps a session's loaded tools in the replica that opened the session. Rather than
ask every load balancer for affinity (a plain Kubernetes Service balances connections, and the
first request of a session carries no session id to hash), the session id itself says where the
session lives: it is the holding replica's id (random, 8 hex digits, chosen at start) followed by
the transport's own id. A replica that receives a request for another replica's session forwards
it there, body and streamed answer included; so any replica can be hit, and a client never learns
an internal address. Replicas find each other through ``toolscout.gateway.peers`` (each replica's
address, or one DNS name resolving to all of them: a headless Service) and ask each peer its id at
``/_toolscout/replica``. A session whose replica is gone answers 404, and the client opens a new
session, as the MCP specification prescribes.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import socket
import time
from collections.abc import Sequence
from typing import Any

import anyio
import httpx2
from starlette.types import Message, Receive, Scope, Send

from toolscout_kit.logging import get_logger

__all__ = ["FORWARDED_HEADER", "REPLICA_PATH", "Forwarder", "Replica"]

_log = get_logger(__name__)

REPLICA_PATH = "/_toolscout/replica"
# Set on a forwarded request: the receiving replica serves it or answers 404, never forwards again.
FORWARDED_HEADER = "x-toolscout-forwarded"
_ID_LENGTH = 8
# Hop-by-hop headers (RFC 9110 §7.6.1) are not forwarded.
_HOP_BY_HOP = frozenset(
    {b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer", b"transfer-encoding", b"upgrade"}
)
# Peers are looked up again at most this often when an unknown replica id comes in.
_REFRESH_INTERVAL = 2.0


class Replica:
    """This replica's id and the session ids it hands out."""

    def __init__(self, replica_id: str | None = None) -> None:
        self.id = replica_id or secrets.token_hex(_ID_LENGTH // 2)

    def session_id(self, transport_id: str) -> str:
        return f"{self.id}{transport_id}"

    @staticmethod
    def split(session_id: str) -> tuple[str, str]:
        """``(replica id, transport id)`` of a session id handed out by any replica."""
        return session_id[:_ID_LENGTH], session_id[_ID_LENGTH:]


class Forwarder:
    """Forwards a request to the replica holding its session."""

    def __init__(self, peers: Sequence[str], own_id: str, *, timeout: float = 5.0) -> None:
        self._peers = list(peers)
        self._own = own_id
        self._addresses: dict[str, str] = {}
        self._refreshed = 0.0
        self._lock = asyncio.Lock()
        # No read timeout: a forwarded GET stream lasts as long as the session's.
        self._client = httpx2.AsyncClient(timeout=httpx2.Timeout(timeout, read=None))

    async def close(self) -> None:
        await self._client.aclose()

    async def _resolve(self) -> list[str]:
        addresses: list[str] = []
        loop = asyncio.get_running_loop()
        for peer in self._peers:
            host, _, port = peer.rpartition(":")
            try:
                infos = await loop.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
            except (OSError, ValueError):
                continue
            for info in infos:
                ip = str(info[4][0])
                addresses.append(f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}")
        return list(dict.fromkeys(addresses))

    async def _refresh(self) -> None:
        async with self._lock:
            if time.monotonic() - self._refreshed < _REFRESH_INTERVAL:
                return
            self._refreshed = time.monotonic()
            found: dict[str, str] = {}
            for address in await self._resolve():
                with contextlib.suppress(httpx2.HTTPError, ValueError, KeyError):
                    answer = await self._client.get(f"http://{address}{REPLICA_PATH}", timeout=2.0)
                    replica = str(answer.json()["replica"])
                    if replica != self._own:
                        found[replica] = address
            self._addresses = found

    async def address_of(self, replica_id: str) -> str | None:
        """Where the replica with this id listens, or None when no peer has it (any more)."""
        if replica_id not in self._addresses:
            await self._refresh()
        return self._addresses.get(replica_id)

    async def forward(self, address: str, scope: Scope, receive: Receive, send: Send) -> bool:
        """Sends the request to ``address`` and streams its answer back; False when unreachable
        (nothing was answered yet)."""
        body = await _read_body(receive)
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in _HOP_BY_HOP]
        headers.append((FORWARDED_HEADER.encode(), b"1"))
        path = scope.get("raw_path") or scope["path"].encode()
        query = scope.get("query_string") or b""
        url = f"http://{address}{path.decode('latin-1')}" + (f"?{query.decode('latin-1')}" if query else "")
        request = self._client.build_request(scope["method"], url, headers=headers, content=body)
        try:
            response = await self._client.send(request, stream=True)
        except httpx2.HTTPError as err:
            _log.warning("forwarding to a peer failed", error=type(err).__name__)
            return False
        try:
            out = [(k, v) for k, v in response.headers.raw if k.lower() not in _HOP_BY_HOP]
            await send({"type": "http.response.start", "status": response.status_code, "headers": out})
            async with anyio.create_task_group() as tg:
                # A client that goes away ends the forwarded stream (a GET stream never ends itself).
                tg.start_soon(_cancel_on_disconnect, receive, tg.cancel_scope)
                try:
                    async for chunk in response.aiter_raw():
                        await send({"type": "http.response.body", "body": chunk, "more_body": True})
                except httpx2.HTTPError:
                    pass  # the peer went away mid-answer: end ours where it stopped
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                tg.cancel_scope.cancel()
        finally:
            await response.aclose()
        return True


async def _cancel_on_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message: Message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    return b"".join(chunks)


def replica_answer(replica: Replica) -> dict[str, Any]:
    return {"replica": replica.id}
