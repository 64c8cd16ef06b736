"""An MCP server behind OAuth 2.1 for tests: the ``mcp`` SDK's resource-server side.

``python protected_mcp_server.py ISSUER [--per-subject-tools]`` serves streamable HTTP at ``http://127.0.0.1:PORT/mcp``
(any free port) with the SDK's bearer middleware and protected resource metadata (RFC 9728)
naming ``ISSUER``. Tokens are JWTs checked against the issuer's JWKS (signature, issuer, audience =
this server, expiry, scope ``mcp:tools``). The tool ``whoami``, the resource ``whoami://subject``,
the prompt ``whoami`` and every completion answer with the token's subject; each is printed as a
JSON line ``{"call": "whoami" | "resource" | "prompt" | "complete", "subject": ...}`` after the
first line ``{"url": ...}``. ``GET /_mark?n=<n>`` prints ``{"event": "mark", "n": "<n>"}`` and answers
204: a reader that has read it has read every line printed before it. Its listings depend on the subject: a resource ``whoami://<subject>``
and a prompt ``whoami_<subject>`` are listed to that subject only (not printed); with
``--per-subject-tools`` so is a tool ``notebook_<subject>`` (its description names the subject;
a call answers ``notebook of: <subject>``, and is printed as ``{"call": "notebook", ...}``).
"""

from __future__ import annotations

import json
import socket
import sys
import threading
from typing import Any
from urllib.parse import parse_qs

import anyio
import httpx2
import jwt
import uvicorn
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp_types import (
    CallToolResult,
    Completion,
    GetPromptResult,
    InputRequiredResult,
    Prompt,
    PromptMessage,
    Resource,
    TextContent,
    Tool,
    ToolAnnotations,
)

SCOPE = "mcp:tools"
_PRINTING = threading.Lock()


class JwksVerifier:
    """The SDK's ``TokenVerifier``: a JWT signed by the issuer, for this resource, not expired."""

    def __init__(self, issuer: str, resource: str) -> None:
        self.issuer = issuer
        self.resource = resource
        self._keys: jwt.PyJWKSet | None = None

    async def _jwks(self) -> jwt.PyJWKSet:
        if self._keys is None:
            async with httpx2.AsyncClient(timeout=10) as client:
                config = (await client.get(f"{self.issuer}/.well-known/openid-configuration")).json()
                self._keys = jwt.PyJWKSet.from_dict((await client.get(config["jwks_uri"])).json())
        return self._keys

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            kid = jwt.get_unverified_header(token).get("kid")
            key = next(k for k in (await self._jwks()).keys if k.key_id == kid)
            claims: dict[str, Any] = jwt.decode(
                token, key=key, algorithms=["ES256"], audience=self.resource, issuer=self.issuer
            )
        except (jwt.PyJWTError, StopIteration, ValueError):
            return None
        return AccessToken(
            token=token,
            client_id=str(claims.get("client_id", "")),
            scopes=str(claims.get("scope", "")).split(),
            expires_at=int(claims["exp"]),
            resource=self.resource,
            subject=str(claims.get("sub")),
        )


def _noted(call: str) -> str | None:
    """The subject of the request's token, printed as ``{"call": call, "subject": ...}``."""
    token = get_access_token()
    subject = token.subject if token is not None else None
    # One write per line under a lock: concurrent calls (threads) must not interleave lines.
    with _PRINTING:
        sys.stdout.write(json.dumps({"call": call, "subject": subject}) + "\n")
        sys.stdout.flush()
    return subject


def _subject() -> str | None:
    token = get_access_token()
    return token.subject if token is not None else None


class _PerSubjectServer(MCPServer[Any]):
    """Lists, besides its own, a resource ``whoami://<subject>`` and a prompt
    ``whoami_<subject>`` to the token's subject only (a listing that depends on the user); with
    ``per_subject_tools``, a tool ``notebook_<subject>`` too."""

    per_subject_tools = False

    async def list_tools(self) -> list[Tool]:
        listed = await super().list_tools()
        subject = _subject()
        if subject and self.per_subject_tools:
            listed.append(
                Tool(
                    name=f"notebook_{subject}",
                    description=f"Reads the private notebook of {subject}: notes only {subject} can see.",
                    input_schema={"type": "object", "properties": {}},
                )
            )
        return listed

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Any = None
    ) -> CallToolResult | InputRequiredResult:
        subject = _subject()
        if self.per_subject_tools and subject and name == f"notebook_{subject}":
            return CallToolResult(
                content=[TextContent(type="text", text=f"notebook of: {_noted('notebook')}")]
            )
        return await super().call_tool(name, arguments, context)

    async def list_resources(self) -> list[Resource]:
        listed = await super().list_resources()
        subject = _subject()
        if subject:
            listed.append(
                Resource(uri=f"whoami://{subject}", name=f"whoami-{subject}", mime_type="text/plain")
            )
        return listed

    async def list_prompts(self) -> list[Prompt]:
        listed = await super().list_prompts()
        subject = _subject()
        if subject:
            listed.append(Prompt(name=f"whoami_{subject}", description=f"{subject}'s own prompt"))
        return listed

    async def get_prompt(
        self, name: str, arguments: dict[str, Any] | None = None, context: Any = None
    ) -> GetPromptResult | InputRequiredResult:
        subject = _subject()
        if subject and name == f"whoami_{subject}":
            text = TextContent(type="text", text=f"own prompt of: {subject}")
            return GetPromptResult(messages=[PromptMessage(role="user", content=text)])
        return await super().get_prompt(name, arguments, context)


def build(issuer: str, url: str, *, per_subject_tools: bool = False) -> MCPServer[Any]:
    server = _PerSubjectServer(
        "protected",
        token_verifier=JwksVerifier(issuer, url),
        # Validated from strings, so that a path-less issuer keeps its exact form (no "/" added).
        auth=AuthSettings.model_validate(
            {
                "issuer_url": issuer,
                "resource_server_url": url,
                "required_scopes": [SCOPE],
                "validate_token_resource": True,
            }
        ),
    )

    server.per_subject_tools = per_subject_tools

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def whoami() -> str:
        """Who the caller's token says it is."""
        return f"subject: {_noted('whoami')}"

    @server.resource("whoami://subject", mime_type="text/plain")
    def subject() -> str:
        """Who the reader's token says it is (a resource: read on the reader's own session)."""
        return f"subject: {_noted('resource')}"

    @server.prompt(name="whoami")
    def whoami_prompt(topic: str = "") -> str:
        """Who the caller's token says it is (a prompt)."""
        return f"subject: {_noted('prompt')}"

    @server.completion()
    async def complete(ref: Any, argument: Any, context: Any) -> Completion:
        return Completion(values=[f"subject: {_noted('complete')}"])

    return server


class _Marks:
    """Answers ``GET /_mark?n=<n>`` (see the module's doc); everything else is the app's."""

    def __init__(self, app: Any) -> None:
        self._app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/_mark":
            mark = parse_qs(scope["query_string"].decode()).get("n", [""])[0]
            with _PRINTING:
                sys.stdout.write(json.dumps({"event": "mark", "n": mark}) + "\n")
                sys.stdout.flush()
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        await self._app(scope, receive, send)


async def main(issuer: str, per_subject_tools: bool) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    # Listening before the URL is printed: a client that connects at once waits in the backlog.
    sock.listen(128)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    app = _Marks(
        build(issuer, url, per_subject_tools=per_subject_tools).streamable_http_app(host="127.0.0.1")
    )
    print(json.dumps({"url": url}), flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    await server.serve(sockets=[sock])


if __name__ == "__main__":
    anyio.run(main, sys.argv[1].rstrip("/"), "--per-subject-tools" in sys.argv[2:])
