"""Checks that run before anything starts: everything a config can be found wrong about at load.

``toolscout up`` and ``toolscout serve`` (and ``python -m <service>``) run these before the first
MCP server process or port: a second ``toolscout up`` on the same ports, for instance, is refused
at once, naming every address in use, instead of starting every MCP server and failing on the
last port. Each service adds its own checks (discovery: the hybrid embedder; the orchestrator:
prompt templates and API keys) beside the ones here.
"""

from __future__ import annotations

import errno
import socket
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from toolscout_kit.config import ToolscoutConfig
from toolscout_kit.errors import ConfigError

__all__ = [
    "Endpoint",
    "GatewayAuth",
    "check_free",
    "gateway_auth",
    "is_loopback",
    "missing_api_keys",
    "service_endpoints",
]


@dataclass(frozen=True)
class Endpoint:
    """An address a service will bind: ``what`` names it in messages (``discovery gRPC``)."""

    what: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def _split(address: str) -> tuple[str, int] | None:
    """``host:port`` / ``[v6]:port`` of a gRPC listen address; None for forms not checked here."""
    if address.startswith("unix:") or ":" not in address:
        return None
    host, _, port = address.rpartition(":")
    host = host.strip("[]") or "0.0.0.0"  # noqa: S104 - ":50051" binds every interface
    try:
        return host, int(port)
    except ValueError:
        return None


def service_endpoints(
    config: ToolscoutConfig, service: str, *, listen: str | None = None, metrics_port: int | None = None
) -> list[Endpoint]:
    """The gRPC and metrics addresses ``service`` binds with ``config`` (and the same overrides
    ``build_server`` takes); port 0 (any free port) and -1 (off) are left out."""
    settings = getattr(config.toolscout, service)
    found: list[Endpoint] = []
    grpc_address = _split(listen or settings.listen)
    if grpc_address is not None and grpc_address[1] > 0:
        # The gateway serves MCP over HTTP; the others gRPC.
        found.append(Endpoint(f"{service} {'HTTP' if service == 'gateway' else 'gRPC'}", *grpc_address))
    port = settings.metrics_port if metrics_port is None else metrics_port
    if port > 0:
        found.append(Endpoint(f"{service} metrics", settings.metrics_host, port))
    return found


# A port held by an outgoing connection (nothing listens there) is tried again for this long:
# such connections are short-lived. See _in_use.
HELD_PORT_RETRY = 3.0
_HELD_PORT_POLL = 0.1


def _listening(endpoint: Endpoint) -> bool:
    """Whether something accepts connections at ``endpoint`` (a wildcard host: on loopback)."""
    wildcard = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}  # noqa: S104 - compared, not bound
    host = wildcard.get(endpoint.host, endpoint.host)
    try:
        with socket.create_connection((host, endpoint.port), timeout=0.5):
            return True
    except OSError:
        return False


def _in_use(endpoint: Endpoint) -> str | None:
    """Why ``endpoint`` cannot be bound now, or None when it can.

    The default ports (50051-50054) lie in Linux's ephemeral range (32768-60999), from which
    outgoing connections take their local ports: one may hold a port although nothing listens
    there. Such a port is tried again for up to :data:`HELD_PORT_RETRY` seconds, and the answer
    then says what holds it. (The defaults stay where they are: every config, manifest and client
    that names them would change.)
    """
    why = _bind_problem(endpoint)
    if why != _IN_USE or _listening(endpoint):
        return why
    deadline = time.monotonic() + HELD_PORT_RETRY
    while time.monotonic() < deadline:
        time.sleep(_HELD_PORT_POLL)  # a connection's end gives no event to wait on
        why = _bind_problem(endpoint)
        if why != _IN_USE:
            return why
    return (
        "address already in use by a short-lived connection, not a server (nothing listens there: "
        "an outgoing connection took it as its local port, as ports in Linux's ephemeral range "
        "32768-60999 can be taken); try again in a moment, or use a port below 32768"
    )


_IN_USE = "address already in use"


def _bind_problem(endpoint: Endpoint) -> str | None:
    """Why ``endpoint`` cannot be bound at this moment, or None when it can."""
    try:
        infos = socket.getaddrinfo(
            endpoint.host, endpoint.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except OSError as err:
        return f"cannot resolve {endpoint.host!r}: {err.strerror or err}"
    for family, kind, proto, _, address in infos:
        with socket.socket(family, kind, proto) as probe:
            # As a server binds: TIME_WAIT leftovers do not count, a listener does.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address)
            except OSError as err:
                if err.errno == errno.EADDRINUSE:
                    return _IN_USE
                if err.errno == errno.EADDRNOTAVAIL:
                    return "not an address of this machine"
                return err.strerror or str(err)
    return None


def check_free(endpoints: Iterable[Endpoint]) -> None:
    """Refuses addresses that are taken, or wanted twice.

    Raises:
        ConfigError: one line per problem, naming what wanted the address.
    """
    problems: list[str] = []
    seen: dict[tuple[str, int], Endpoint] = {}
    for endpoint in endpoints:
        key = (endpoint.host, endpoint.port)
        if key in seen:
            problems.append(f"{endpoint.what} and {seen[key].what} both want {endpoint}")
            continue
        seen[key] = endpoint
        why = _in_use(endpoint)
        if why is not None:
            problems.append(f"cannot listen on {endpoint} ({endpoint.what}): {why}")
    if problems:
        if any(p.endswith(_IN_USE) for p in problems):
            problems.append(
                "is another toolscout (or another program) running on these ports? Stop it, or set "
                "other `listen` / `metrics_port` values in the config (0 = any free port)"
            )
        raise ConfigError("\n".join(problems))


def missing_api_keys(config: ToolscoutConfig, env: Mapping[str, str]) -> dict[str, Sequence[str]]:
    """Models that cannot chat here: ``{environment variable: [model, ...]}`` for every model
    whose client needs a key (see :attr:`ClientConfig.needs_api_key`) that is neither configured
    nor in ``env``."""
    missing: dict[str, list[str]] = {}
    for name, model in sorted(config.models.items()):
        variable = config.clients[model.client].missing_api_key(env)
        if variable is not None:
            missing.setdefault(variable, []).append(name)
    return dict(missing)


def is_loopback(listen: str) -> bool:
    """Whether the listen address ``host:port`` is reachable from this machine only."""
    host = listen.rpartition(":")[0].strip("[]").lower()
    return host in ("localhost", "::1") or host.startswith("127.")


@dataclass(frozen=True)
class GatewayAuth:
    """Who may use the gateway: bearer-token variables and the toolsets each may use (empty: anyone),
    and, when anyone may, why that was allowed (for the start-up warning)."""

    tokens: Mapping[str, Sequence[str]]
    open_because: str = ""
    # ``gateway.oauth`` is set: callers prove who they are with the identity provider's tokens.
    oauth: bool = False

    @property
    def open(self) -> bool:
        """Whether anyone who reaches the gateway is answered (no static token and no OAuth)."""
        return not self.tokens and not self.oauth


def gateway_auth(
    config: ToolscoutConfig, env: Mapping[str, str], *, listen: str | None = None
) -> GatewayAuth:
    """The gateway's tokens: its own ``gateway.tokens``, else the services' own token (the gateway
    is not open while the services are closed), else none.

    With ``gateway.oauth`` set it is closed whatever the static tokens. With neither it runs open: on a loopback address, or anywhere with ``gateway.allow_anonymous``.

    Raises:
        ConfigError: a token variable of ``gateway.tokens`` is not set, or the gateway would run open
            on a non-loopback address without ``allow_anonymous: true`` (one line naming the setting).
    """
    settings = config.toolscout.gateway
    for name in settings.tokens:
        if not env.get(name):
            raise ConfigError(
                f"toolscout.gateway.tokens.{name}: the environment variable {name} is not set "
                "(it holds a bearer token clients send to the gateway)"
            )
    oauth = settings.oauth is not None
    if settings.tokens:
        return GatewayAuth(settings.tokens, oauth=oauth)
    service_token = config.toolscout.security.auth_token_env
    if env.get(service_token) and not settings.allow_anonymous:
        return GatewayAuth({service_token: ["*"]}, oauth=oauth)
    if oauth:
        return GatewayAuth({}, oauth=True)
    address = listen or settings.listen
    if settings.allow_anonymous:
        return GatewayAuth({}, "toolscout.gateway.allow_anonymous is true")
    if not is_loopback(address):
        raise ConfigError(
            f"toolscout.gateway.allow_anonymous: the gateway would answer anyone on {address} (no "
            f"toolscout.gateway.tokens, {service_token} not set); set a token, or allow_anonymous: true"
        )
    return GatewayAuth({}, f"it listens on the loopback address {address} and no token is set")
