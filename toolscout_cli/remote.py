"""Commands that talk to MCP servers directly, as the pool does: ``connect`` and ``auth``.

``toolscout connect URL`` opens one connection with the pool's own code (transport, revision
negotiation, OAuth 2.1 through :mod:`toolscout_kit.oauth_client`), prints what the server offers and may
call one tool. ``toolscout auth login|status|logout SERVER`` manage the stack's stored
authorization of a configured server: the tokens the pool uses (:mod:`toolscout_kit.token_store`).
Tokens are never printed.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
import webbrowser
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
import mcp_types
from mcp.shared.auth_utils import resource_url_from_server_url
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from mcp_pool_svc import Connection, connect_server
from toolscout_cli.connection import (
    EXIT_ERROR,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    CliError,
    load_optional_config,
)
from toolscout_cli.output import Output, truncate
from toolscout_kit.config import OAuthConfig, RemoteServerConfig
from toolscout_kit.errors import ToolscoutError
from toolscout_kit.logging import redact
from toolscout_kit.names import unknown_name
from toolscout_kit.oauth_approval import (
    Approver,
    AuthorizationError,
    HeadlessApprover,
    LoopbackApprover,
    redirect_uri_of,
)
from toolscout_kit.oauth_client import RemoteAuth
from toolscout_kit.token_keys import TOKEN_KEY_ENV, TOKEN_KEY_PREVIOUS_ENV
from toolscout_kit.token_store import STACK_PRINCIPAL, TokenStore

__all__ = ["run_auth", "run_connect"]

# `--client-secret` reaches the OAuth client through this (never a file or a log line).
_SECRET_VAR = "TOOLSCOUT_CONNECT_CLIENT_SECRET"  # noqa: S105 - a variable name


def _approver(args: argparse.Namespace, out: Output, auth: OAuthConfig | None) -> Approver:
    redirect_uri = redirect_uri_of(auth)
    if args.headless:
        return HeadlessApprover(redirect_uri)

    def announce(url: str) -> None:
        out.note(f"toolscout: authorize at: {url}")
        out.note("toolscout: waiting for the redirect to 127.0.0.1 ...")
        if not args.no_browser:
            webbrowser.open(url)

    return LoopbackApprover(announce, redirect_uri)


def _arguments(text: str) -> dict[str, Any]:
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError as err:
        raise CliError(f"--args is not JSON: {err}", EXIT_USAGE) from None
    if not isinstance(value, dict):
        raise CliError("--args must be a JSON object", EXIT_USAGE)
    return value


def _failure(err: BaseException, url: str) -> CliError:
    """One line and an exit code for a connection that failed."""
    while isinstance(err, BaseExceptionGroup) and err.exceptions:
        err = err.exceptions[0]
    if isinstance(err, CliError):
        return err
    code = EXIT_ERROR
    if isinstance(err, AuthorizationError | ToolscoutError):
        message = err.message
    elif isinstance(err, TimeoutError):
        message, code = f"{url}: no answer in time", EXIT_UNREACHABLE
    elif isinstance(err, MCPError) and err.code == mcp_types.CONNECTION_CLOSED:
        message, code = f"{url}: the server closed the connection", EXIT_UNREACHABLE
    elif isinstance(err, MCPError):
        message = f"{url}: the server refused: {err.error.message}"
    elif isinstance(err, OSError | httpx2.TransportError):
        message, code = f"{url}: unreachable ({type(err).__name__})", EXIT_UNREACHABLE
    else:
        first = str(err).splitlines()[0] if str(err).strip() else ""
        message = f"{url}: {type(err).__name__}: {first}"
    return CliError(redact(message), code)


async def _open_and(
    config: RemoteServerConfig,
    remote: RemoteAuth,
    name: str,
    then: Callable[[Connection], Any],
) -> Any:
    async with connect_server(config, auth=remote.provider(name, config)) as conn:
        return await then(conn)


def _capabilities(caps: mcp_types.ServerCapabilities | None) -> list[str]:
    if caps is None:
        return []
    dumped = caps.model_dump(by_alias=True, exclude_none=True)
    return sorted(dumped)


def _block_text(block: Any) -> str:
    if isinstance(block, mcp_types.TextContent):
        return block.text
    return json.dumps(block.model_dump(by_alias=True, exclude_none=True, mode="json"))


def _quiet_sdk() -> None:
    # The SDK logs a failed authorization with a traceback; the CLI says it in one line instead.
    logging.getLogger("mcp").addHandler(logging.NullHandler())


def run_connect(args: argparse.Namespace, out: Output, environ: Mapping[str, str] | None = None) -> int:
    _quiet_sdk()
    env = dict(os.environ if environ is None else environ)
    arguments = _arguments(args.args)
    if args.client_secret and not args.client_id:
        raise CliError("--client-secret needs --client-id", EXIT_USAGE)
    if args.client_secret:
        env[_SECRET_VAR] = args.client_secret
    try:
        auth = OAuthConfig(
            client_id=args.client_id,
            client_secret_env=_SECRET_VAR if args.client_secret else None,
            scopes=args.scope,
            client_metadata_url=args.client_metadata_url,
        )
        config = RemoteServerConfig(
            url=args.url, auth=auth, connect_timeout=args.timeout, call_timeout=args.timeout
        )
    except ValueError as err:
        raise CliError(_first_problem(err), EXIT_USAGE) from None
    remote = RemoteAuth(env, approver=lambda name, auth: _approver(args, out, auth))

    async def inspect(conn: Connection) -> dict[str, Any]:
        with anyio.fail_after(args.timeout):
            tools = await conn.list_tools()
        report: dict[str, Any] = {
            "server": conn.server_info,
            "revision": conn.protocol_version,
            "capabilities": _capabilities(conn.session.server_capabilities),
            "tools": [{"name": t.name, "description": t.description} for t in tools],
        }
        if args.call:
            if args.call not in {t.name for t in tools}:
                raise CliError(unknown_name("tool", args.call, [t.name for t in tools]), EXIT_NOT_FOUND)
            with anyio.fail_after(args.timeout):
                result = await conn.session.call_tool(args.call, arguments)
            report["call"] = {
                "tool": args.call,
                "is_error": bool(result.is_error),
                "content": [_block_text(b) for b in result.content],
                "structured": result.structured_content,
            }
        return report

    try:
        report = anyio.run(_open_and, config, remote, _host(args.url), inspect)
    except Exception as err:
        raise _failure(err, args.url) from None
    _print_report(report, out)
    return EXIT_ERROR if report.get("call", {}).get("is_error") else EXIT_OK


def _first_problem(err: ValueError) -> str:
    if isinstance(err, ValidationError):
        problem = err.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(part) for part in problem["loc"])
        option = {"url": "URL", "auth.client_metadata_url": "--client-metadata-url"}.get(where, where)
        return f"{option}: {problem['msg']}"
    return str(err)


def _host(url: str) -> str:
    return urlsplit(url).hostname or url


def _print_report(report: dict[str, Any], out: Output) -> None:
    if out.json_mode:
        out.json(report)
        return
    out.line(f"server: {report['server'] or '(no name)'}")
    out.line(f"revision: {report['revision']}")
    out.line(f"capabilities: {', '.join(report['capabilities']) or '(none)'}")
    out.line(f"tools ({len(report['tools'])}):")
    for tool in report["tools"]:
        out.line(f"  {tool['name']}  {truncate(tool['description'] or '', 80)}".rstrip())
    call = report.get("call")
    if call is not None:
        out.line(f"call {call['tool']}: {'error' if call['is_error'] else 'ok'}")
        for text in call["content"]:
            out.line(text)
        if call["structured"] is not None:
            out.line(json.dumps(call["structured"], ensure_ascii=False))


# --- auth ----------------------------------------------------------------------------------


def _oauth_servers(args: argparse.Namespace) -> dict[str, RemoteServerConfig]:
    config, _ = load_optional_config(args.config)
    if config is None:
        raise CliError("`toolscout auth` needs the config: -c CONFIG (or TOOLSCOUT_CONFIG)", EXIT_USAGE)
    servers = {
        name: server
        for name, server in config.servers.items()
        if isinstance(server, RemoteServerConfig) and server.auth is not None
    }
    if args.server is not None and args.server not in servers:
        if args.server in config.servers:
            raise CliError(f"server {args.server!r} has no `auth` in the config", EXIT_USAGE)
        raise CliError(unknown_name("server", args.server, sorted(servers)), EXIT_NOT_FOUND)
    return servers if args.server is None else {args.server: servers[args.server]}


def run_auth(args: argparse.Namespace, out: Output, environ: Mapping[str, str] | None = None) -> int:
    _quiet_sdk()
    env = os.environ if environ is None else environ
    if args.action == "rekey":
        return _rekey(env, out)
    if args.action != "status" and args.server is None:
        raise CliError(f"`toolscout auth {args.action}` needs the server's name", EXIT_USAGE)
    servers = _oauth_servers(args)
    try:
        store = TokenStore.from_env(env)
    except ToolscoutError as err:
        raise CliError(err.message, EXIT_USAGE) from None
    if args.action == "status":
        return _status(servers, store, out)
    name, server = next(iter(servers.items()))
    if args.action == "logout":
        try:
            removed = store.remove(STACK_PRINCIPAL, resource_url_from_server_url(server.url))
        except ToolscoutError as err:
            raise CliError(err.message, EXIT_ERROR) from None
        out.line(f"{name}: {'logged out' if removed else 'was not logged in'}")
        return EXIT_OK

    async def count_tools(conn: Connection) -> int:
        with anyio.fail_after(server.connect_timeout):
            return len(await conn.list_tools())

    approver = _approver(args, out, server.auth)
    remote = RemoteAuth(env, store=store, approver=lambda _name, _auth: approver)
    try:
        # A login is a new authorization: what was stored for the server goes first.
        store.remove(STACK_PRINCIPAL, resource_url_from_server_url(server.url))
        tools = anyio.run(_open_and, server, remote, name, count_tools)
    except Exception as err:
        raise _failure(err, server.url) from None
    out.line(f"{name}: authorized ({tools} tools)")
    return EXIT_OK


def _rekey(env: Mapping[str, str], out: Output) -> int:
    """Rewrites the token file under ``$TOOLSCOUT_TOKEN_KEY`` when a previous key (or none) encrypted it."""
    try:
        store = TokenStore.from_env(env)
        if not store.encrypted:
            raise CliError(f"set {TOKEN_KEY_ENV} (and the old key in {TOKEN_KEY_PREVIOUS_ENV})", EXIT_USAGE)
        renewed = store.renew()
    except ToolscoutError as err:
        raise CliError(err.message, EXIT_ERROR) from None
    if renewed:
        out.line(f"{store.path}: rewritten under {TOKEN_KEY_ENV}")
    elif store.path.exists():
        out.line(f"{store.path}: already under {TOKEN_KEY_ENV}")
    else:
        out.line(f"{store.path}: no token file")
    return EXIT_OK


def _status(servers: dict[str, RemoteServerConfig], store: TokenStore, out: Output) -> int:
    rows: list[dict[str, Any]] = []
    try:
        for name, server in sorted(servers.items()):
            entry = store.find(STACK_PRINCIPAL, resource_url_from_server_url(server.url)) or {}
            tokens = entry.get("tokens") or {}
            expires_at = entry.get("expires_at")
            rows.append(
                {
                    "server": name,
                    "authorized": bool(tokens.get("access_token")),
                    "issuer": (entry.get("authorization_server") or {}).get("issuer", ""),
                    "scope": tokens.get("scope") or "",
                    "expires_in": round(expires_at - time.time()) if expires_at else None,
                    "refreshable": bool(tokens.get("refresh_token")),
                }
            )
    except ToolscoutError as err:
        raise CliError(err.message, EXIT_ERROR) from None

    def row(r: dict[str, Any]) -> list[Any]:
        expiry = (
            "" if r["expires_in"] is None else ("expired" if r["expires_in"] <= 0 else f"{r['expires_in']}s")
        )
        state = "yes" if r["authorized"] else "no (`toolscout auth login " + r["server"] + "`)"
        return [r["server"], state, expiry, "yes" if r["refreshable"] else "no", r["scope"], r["issuer"]]

    out.listing(
        "servers",
        rows,
        empty="no server in the config has `auth`",
        headers=["SERVER", "AUTHORIZED", "EXPIRES", "REFRESH", "SCOPE", "ISSUER"],
        row=row,
    )
    return EXIT_OK
