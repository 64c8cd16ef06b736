"""How to add the MCP front door to the MCP hosts people use: what ``toolscout up`` prints."""

from __future__ import annotations

import json

__all__ = ["host_setup_lines"]


def host_setup_lines(url: str, token_env: str | None = None) -> list[str]:
    """The lines that tell a person how to connect Claude Code, Codex, VS Code and Cursor to ``url``.

    ``token_env`` names the environment variable holding a gateway token, when tokens are on.
    """
    header = {"Authorization": f"Bearer ${{env:{token_env}}}"} if token_env else None
    vscode: dict[str, object] = {"type": "http", "url": url, **({"headers": header} if header else {})}
    cursor: dict[str, object] = {"url": url, **({"headers": header} if header else {})}
    claude = f"claude mcp add --transport http toolscout {url}"
    if token_env:
        claude += f' --header "Authorization: Bearer ${token_env}"'
    codex = ["[mcp_servers.toolscout]", f'url = "{url}"']
    if token_env:
        codex.append(f'bearer_token_env_var = "{token_env}"')
    return [
        f"MCP front door: {url}  (one toolset: {url}/<toolset>)",
        f"  Claude Code: {claude}",
        "  Codex:       in ~/.codex/config.toml:",
        *(f"                 {line}" for line in codex),
        f"  VS Code:     in .vscode/mcp.json: {json.dumps({'servers': {'toolscout': vscode}})}",
        f"  Cursor:      in ~/.cursor/mcp.json: {json.dumps({'mcpServers': {'toolscout': cursor}})}",
    ]
