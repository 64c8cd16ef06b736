"""toolscout as an OAuth 2.1 client of remote MCP servers, on the ``mcp`` SDK's client auth: the
pool's sessions, ``toolscout connect`` / ``auth login`` and the gateway's per-user login route all
use it (the kit holds it because those three are different services and the CLI).

The SDK's :class:`~mcp.client.auth.OAuthClientProvider` (an ``httpx2.Auth``) speaks the protocol: a
401's ``WWW-Authenticate`` → protected resource metadata (RFC 9728) → authorization server metadata
(RFC 8414, OIDC discovery and the spec's fallbacks, the issuer checked) → client registration (a
Client ID Metadata Document or dynamic registration) → authorization code with PKCE and ``resource``
(RFC 8707) → tokens and their refresh; scope step-up on a 403 ``insufficient_scope``; and
``client_credentials`` (:class:`ClientCredentialsOAuthProvider`). This module adds what the SDK
leaves to its user:

- where credentials live: :class:`StoredCredentials`, the SDK's ``TokenStorage`` over
  :mod:`toolscout_kit.token_store`, which also keeps when the token expires and the authorization
  server's metadata, so a restarted pool refreshes instead of asking for a new authorization;
- refreshing ahead of expiry (the SDK refreshes once a token has expired, or never after a restart,
  since ``OAuthToken`` carries no absolute expiry);
- a client registered beforehand for the authorization code flow (the SDK has one for
  ``client_credentials`` only);
- who approves (:mod:`toolscout_kit.oauth_approval`): :class:`LoopbackApprover` (a person at a
  printed URL, the redirect caught on 127.0.0.1), :class:`HeadlessApprover` (fetches the URL
  itself, for authorization servers that approve without a person) or :class:`NoApprover` (the
  pool: "run ``toolscout auth login``");
- a failed authorization ends the MCP request at once (the server's own 401) and is reported as
  :class:`AuthorizationError`, rather than the SDK's exception ending the transport's writer and
  the request waiting out its timeout.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
from mcp.client.auth import OAuthClientProvider, OAuthFlowError
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.auth.utils import extract_field_from_www_auth
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthMetadata,
    OAuthToken,
    ProtectedResourceMetadata,
)
from mcp.shared.auth_utils import resource_url_from_server_url
from pydantic import AnyUrl, ValidationError

from toolscout_kit.config import OAuthConfig, RemoteServerConfig
from toolscout_kit.logging import get_logger, redact
from toolscout_kit.oauth_approval import (
    Approver,
    AuthorizationError,
    HeadlessApprover,
    NoApprover,
    redirect_uri_of,
)
from toolscout_kit.token_store import STACK_PRINCIPAL, CredentialKey, TokenStore, TokenStoreError

# Who approves (the approvers, AuthorizationError) is imported from its owner, oauth_approval.
__all__ = [
    "OAuthProvider",
    "RemoteAuth",
    "StoredCredentials",
    "build_provider",
    "reporting_failure",
]
_log = get_logger(__name__)
_CLIENT_NAME = "toolscout"
# A token is refreshed this long before it expires (at most a tenth of its lifetime).
_REFRESH_AHEAD = 60.0


def _issuer_of(provider: OAuthClientProvider) -> str:
    context = provider.context
    if context.oauth_metadata is not None:
        return str(context.oauth_metadata.issuer)
    if context.auth_server_url:
        return context.auth_server_url
    parts = urlsplit(context.server_url)
    return f"{parts.scheme}://{parts.netloc}"


class StoredCredentials:
    """The SDK's ``TokenStorage`` for one (principal, server), kept in a :class:`TokenStore`.

    The entry's issuer is the authorization server the provider discovered; lookups before
    discovery take the principal's newest entry for the server (the SDK drops credentials bound to
    another issuer itself, SEP-2352).
    """

    def __init__(self, store: TokenStore, principal: str, server_url: str, issuer: str | None = None) -> None:
        self.store = store
        self.principal = principal
        self.resource = resource_url_from_server_url(server_url)
        self._issuer = issuer
        self._provider: OAuthClientProvider | None = None

    def bind(self, provider: OAuthClientProvider) -> None:
        self._provider = provider

    async def entry(self) -> dict[str, Any]:
        found = await anyio.to_thread.run_sync(self.store.find, self.principal, self.resource, self._issuer)
        return found or {}

    async def _update(self, fields: Mapping[str, Any]) -> None:
        issuer = self._issuer or (_issuer_of(self._provider) if self._provider else self.resource)
        key = CredentialKey(self.principal, issuer, self.resource)
        context = self._provider.context if self._provider else None
        extra: dict[str, Any] = {}
        if context is not None and context.oauth_metadata is not None:
            extra["authorization_server"] = context.oauth_metadata.model_dump(mode="json", exclude_none=True)
        if context is not None and context.protected_resource_metadata is not None:
            extra["resource_metadata"] = context.protected_resource_metadata.model_dump(
                mode="json", exclude_none=True
            )
        await anyio.to_thread.run_sync(self.store.update, key, {**extra, **fields})

    async def get_tokens(self) -> OAuthToken | None:
        tokens = (await self.entry()).get("tokens")
        return OAuthToken.model_validate(tokens) if tokens else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        expires_at = time.time() + tokens.expires_in if tokens.expires_in is not None else None
        await self._update(
            {"tokens": tokens.model_dump(mode="json", exclude_none=True), "expires_at": expires_at}
        )

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        client = (await self.entry()).get("client")
        return OAuthClientInformationFull.model_validate(client) if client else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        await self._update({"client": client_info.model_dump(mode="json", exclude_none=True)})


def _ahead(expiry: float | None, lifetime: float | None) -> float | None:
    if expiry is None:
        return None
    margin = min(_REFRESH_AHEAD, (lifetime or 0.0) / 10)
    return expiry - margin


class OAuthProvider(OAuthClientProvider):
    """The SDK's provider with toolscout's storage, early refresh, pre-registered clients and
    failures that end the request (see the module docstring). ``failure`` holds the last one."""

    failure: AuthorizationError | None = None
    # The last request's 403 insufficient_scope that a step-up did not cure (None once one passes).
    refusal: AuthorizationError | None = None
    _preregistered: OAuthClientInformationFull | None = None
    _storage: StoredCredentials

    def _setup(self, storage: StoredCredentials, fixed_client: OAuthClientInformationFull | None) -> None:
        self._storage = storage
        storage.bind(self)
        if fixed_client is not None:
            self._preregistered = fixed_client

    async def _initialize(self) -> None:
        entry = await self._storage.entry()
        context = self.context
        context.current_tokens = OAuthToken.model_validate(entry["tokens"]) if entry.get("tokens") else None
        stored_client = entry.get("client")
        context.client_info = self._preregistered or (
            OAuthClientInformationFull.model_validate(stored_client) if stored_client else None
        )
        with contextlib.suppress(ValidationError, KeyError):
            if context.oauth_metadata is None and entry.get("authorization_server"):
                context.oauth_metadata = OAuthMetadata.model_validate(entry["authorization_server"])
            if context.protected_resource_metadata is None and entry.get("resource_metadata"):
                context.protected_resource_metadata = ProtectedResourceMetadata.model_validate(
                    entry["resource_metadata"]
                )
        tokens = context.current_tokens
        context.token_expiry_time = _ahead(entry.get("expires_at"), tokens.expires_in if tokens else None)
        self._initialized = True

    def _expire_early(self) -> None:
        tokens = self.context.current_tokens
        self.context.token_expiry_time = _ahead(
            self.context.token_expiry_time, tokens.expires_in if tokens else None
        )

    async def _handle_token_response(self, response: httpx2.Response) -> None:
        await super()._handle_token_response(response)
        self._expire_early()

    async def _handle_refresh_response(self, response: httpx2.Response) -> bool:
        refreshed = await super()._handle_refresh_response(response)
        self._expire_early()
        return refreshed

    def _note_answer(self, response: httpx2.Response) -> None:
        """Remembers a refusal for more scope that the step-up did not cure (the SDK retries once)."""
        if (
            response.status_code == 403
            and extract_field_from_www_auth(response, "error") == "insufficient_scope"
        ):
            wanted = extract_field_from_www_auth(response, "scope")
            self.refusal = AuthorizationError(
                "the server refused for lack of scope (403 insufficient_scope"
                + (f", wants {wanted!r}" if wanted else "")
                + ") even after asking the authorization server for it"
            )
        elif response.status_code < 400:
            self.refusal = None

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        if self.failure is not None:
            # Authorization already failed on this connection: let the server answer (its 401).
            yield request
            return
        flow = super().async_auth_flow(request)
        try:
            outgoing = await flow.__anext__()
            while True:
                response = yield outgoing
                if outgoing is request:
                    self._note_answer(response)
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        except AuthorizationError as err:
            self.failure = err
        except (OAuthFlowError, ValidationError, httpx2.HTTPError) as err:
            self.failure = AuthorizationError(f"authorization failed: {_describe(err)}")
        finally:
            await flow.aclose()
        request.headers.pop("Authorization", None)
        yield request


class _MachineProvider(OAuthProvider, ClientCredentialsOAuthProvider):
    """``client_credentials`` (the SDK's extension), with the same storage and failure handling."""


class _ReportedByUs(logging.Filter):
    """Drops the SDK's traceback of a failed authorization: :class:`OAuthProvider` reports it once,
    in one line (the pool's ``mcp_server_lost``, the CLI's error), and a missing login is routine."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "OAuth flow error"


_SDK_LOG = logging.getLogger("mcp.client.auth.oauth2")
if not any(isinstance(f, _ReportedByUs) for f in _SDK_LOG.filters):
    _SDK_LOG.addFilter(_ReportedByUs())


def _describe(err: BaseException) -> str:
    # The SDK's messages may quote an authorization server's answer: masked like a log line.
    text = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return redact(f"{type(err).__name__}: {text}")[:300] if text else type(err).__name__


def build_provider(
    server_url: str,
    auth: OAuthConfig,
    *,
    store: TokenStore,
    approver: Approver,
    environ: Mapping[str, str],
    principal: str = STACK_PRINCIPAL,
) -> OAuthProvider:
    """The OAuth provider of one remote server.

    Raises:
        AuthorizationError: ``client_secret_env`` names a variable that is not set.
    """
    secret: str | None = None
    if auth.client_secret_env is not None:
        secret = environ.get(auth.client_secret_env)
        if not secret:
            raise AuthorizationError(f"{auth.client_secret_env} is not set (the OAuth client's secret)")
    storage = StoredCredentials(store, principal, server_url, issuer=auth.issuer)
    scope = " ".join(auth.scopes) if auth.scopes else None
    provider: OAuthProvider
    if auth.grant == "client_credentials":
        assert auth.client_id is not None  # checked by OAuthConfig, as is the secret above
        assert secret is not None
        provider = _MachineProvider(
            server_url,
            storage,
            client_id=auth.client_id,
            client_secret=secret,
            scope=scope,
            issuer=auth.issuer,
        )
        provider._setup(storage, provider._fixed_client_info)
        return provider
    redirect: list[AnyUrl] = [AnyUrl(approver.redirect_uri)]
    metadata = OAuthClientMetadata(
        client_name=_CLIENT_NAME,
        redirect_uris=redirect,
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        scope=scope,
    )
    fixed = None
    if auth.client_id is not None:
        fixed = OAuthClientInformationFull(
            client_id=auth.client_id,
            client_secret=secret,
            redirect_uris=redirect,
            grant_types=["authorization_code", "refresh_token"],
            token_endpoint_auth_method="client_secret_basic" if secret else "none",
            scope=scope,
        )

    async def redirect_handler(url: str) -> None:
        pending.append(url)

    async def callback_handler() -> AuthorizationCodeResult:
        return await approver(pending.pop())

    pending: list[str] = []
    provider = OAuthProvider(
        server_url,
        metadata,
        storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
        client_metadata_url=auth.client_metadata_url,
    )
    provider._setup(storage, fixed)
    return provider


@dataclass
class RemoteAuth:
    """Gives each remote server configured with ``auth`` its OAuth provider, for one connection.

    ``approver(server_name)`` decides who approves a new authorization (by default nobody: the pool
    needs ``toolscout auth login`` first, unless the server's ``auth.headless`` is set).
    """

    environ: Mapping[str, str]
    # Default: the token file the environment names (opened at the first server with ``auth``).
    store: TokenStore | None = None
    principal: str = STACK_PRINCIPAL
    approver: Callable[[str, OAuthConfig], Approver] | None = None

    def renew_store(self) -> bool:
        """Rewrites the token file under ``$TOOLSCOUT_TOKEN_KEY`` if a previous key encrypted it (a
        key rotation, see :mod:`toolscout_kit.token_keys`); whether it did. A file that cannot be
        read is left as it is (the servers that need it say why when they connect).
        """
        try:
            if self.store is None:
                self.store = TokenStore.from_env(self.environ)
            renewed = self.store.renew()
        except TokenStoreError as err:
            _log.warning("token_file_not_renewed", error=str(err))
            return False
        if renewed:
            _log.info("token_file_renewed")
        return renewed

    def provider(self, name: str, config: RemoteServerConfig) -> OAuthProvider | None:
        """A fresh provider (its state lives in the store), or None for a server without ``auth``.

        Raises:
            AuthorizationError: the client secret's variable is not set.
            toolscout_kit.token_store.TokenStoreError: ``$TOOLSCOUT_TOKEN_KEY`` is not a key.
        """
        if config.auth is None:
            return None
        if self.store is None:
            self.store = TokenStore.from_env(self.environ)
        if self.approver is not None:
            approver = self.approver(name, config.auth)
        elif config.auth.headless:
            approver = HeadlessApprover(redirect_uri_of(config.auth))
        else:
            approver = NoApprover(name, redirect_uri_of(config.auth))
        return build_provider(
            config.url,
            config.auth,
            store=self.store,
            approver=approver,
            environ=self.environ,
            principal=self.principal,
        )


@contextlib.asynccontextmanager
async def reporting_failure(provider: OAuthProvider | None) -> AsyncIterator[None]:
    """Turns a connection that failed because authorization did into that :class:`AuthorizationError`."""
    try:
        yield
    except Exception as err:
        problem = provider and (provider.failure or provider.refusal)
        if problem:
            raise problem from err
        raise
