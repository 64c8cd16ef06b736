"""The console's Starlette application: server-rendered pages under ``/console``.

The gateway's front hands it every ``/console`` request once the ``Host`` and ``Origin`` checks
passed (:mod:`mcp_gateway_svc.front`); who may see what is :mod:`.access`, what the pages show is
read by :mod:`.data` and :mod:`.chat` through the client library. Pages are Jinja2 templates with
one small hand-written script (``static/console.js``, no build step, nothing from a CDN); live
parts are server-sent events: the servers table on every catalog change (the pool's
``WatchCatalog``), a chat turn's events as the orchestrator's ``StreamChat`` yields them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import Receive, Scope, Send
from toolscout.client import (
    AsyncDiscoveryClient,
    AsyncOrchestratorClient,
    AsyncPoolClient,
    ToolscoutClientError,
)
from toolscout.client.sharded import AsyncShardedPoolClient

from mcp_gateway_svc.console.access import COOKIE, Access, ConsoleSession, Viewer, csrf_ok, same_origin
from mcp_gateway_svc.console.chat import ChatRunner
from mcp_gateway_svc.console.data import CatalogFollower, ConsoleData, problem_text
from mcp_gateway_svc.console.paths import EVENTS, PREFIX
from mcp_gateway_svc.front import Tenants
from toolscout_kit.config import ToolscoutConfig
from toolscout_kit.logging import get_logger
from toolscout_kit.tracing import Tracing

__all__ = ["Console"]

_HERE = Path(__file__).resolve().parent
_log = get_logger(__name__)
# Seconds between looks at the server states when the catalog did not change: a server back
# within pool.blip_grace leaves the catalog as it was, but its restarts and state changed. A look
# sends the table only when it differs from the last one sent (else a keep-alive comment).
_REFRESH = 5.0
_SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    ),
    "x-content-type-options": "nosniff",
    # "no-referrer" would make the browser send "Origin: null" on the console's own form posts.
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}
_SEARCH_LIMITS = (5, 10, 20, 50)

Handler = Callable[[Request, ConsoleSession, Viewer], Awaitable[Response]]


def _no_toolset(viewer: Viewer) -> str:
    """What a page says when the toolset asked for is not the viewer's (or it has none)."""
    return "No such toolset here." if viewer.toolsets else "This token may use no toolset."


class Console:
    """The ASGI app of ``/console``; ``close()`` ends its event streams (the gateway stops)."""

    def __init__(
        self,
        *,
        config: ToolscoutConfig,
        tenants: Tenants,
        pool: AsyncShardedPoolClient | AsyncPoolClient,
        discovery: AsyncDiscoveryClient,
        orchestrator: AsyncOrchestratorClient | None,
        tracing: Tracing,
    ) -> None:
        settings = config.toolscout.gateway
        self.access = Access(tenants, config.tool_sets, settings.console_chat)
        self.data = ConsoleData(pool, discovery)
        self.follower = CatalogFollower(pool)
        self.chat = ChatRunner(orchestrator, tracing, settings.console_trace_url)
        self._templates = Jinja2Templates(directory=str(_HERE / "templates"))
        self._templates.env.globals["prefix"] = PREFIX
        page = self._page
        self._app = Starlette(
            routes=[
                Mount(
                    PREFIX,
                    routes=[
                        Route("/", page(self._home)),
                        Route("/login", self._login, methods=["GET", "POST"]),
                        Route("/logout", self._logout, methods=["POST"]),
                        Route("/servers", page(self._servers)),
                        Route(EVENTS, page(self._server_events)),
                        Route("/catalog", page(self._catalog)),
                        Route("/catalog/schema", page(self._schema)),
                        Route("/search", page(self._search)),
                        Route("/chat", page(self._chat_page)),
                        Route("/chat/send", page(self._chat_send, post=True), methods=["POST"]),
                        Route("/chat/reset", page(self._chat_reset, post=True), methods=["POST"]),
                        Route("/tokens", page(self._tokens)),
                        Mount("/static", StaticFiles(directory=str(_HERE / "static")), name="static"),
                    ],
                )
            ]
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["path"] == PREFIX:
            scope = {**scope, "path": PREFIX + "/"}
        await self._app(scope, receive, send)

    async def close(self) -> None:
        await self.follower.close()

    # --- plumbing -------------------------------------------------------------------------------

    def _session(self, request: Request) -> tuple[ConsoleSession, bool]:
        """The request's session, or a new one (True: its cookie must be set)."""
        found = self.access.sessions.get(request.cookies.get(COOKIE))
        return (found, False) if found is not None else (self.access.sessions.new(), True)

    @staticmethod
    def _finish(request: Request, response: Response, session: ConsoleSession, new: bool) -> Response:
        for name, value in _SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        if new:
            # Behind a TLS-terminating proxy the scheme says https only if the proxy says so.
            secure = request.url.scheme == "https" or request.headers.get("x-forwarded-proto") == "https"
            response.set_cookie(
                COOKIE, session.sid, path=PREFIX, httponly=True, samesite="strict", secure=secure
            )
        return response

    def _page(self, handler: Handler, *, post: bool = False) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            session, new = self._session(request)
            if post and not await self._post_ok(request, session):
                return self._finish(
                    request, PlainTextResponse("forbidden: not sent from the console", 403), session, new
                )
            viewer = self.access.viewer(request, session)
            if viewer is None:
                if post or request.url.path.endswith("/events"):
                    response: Response = PlainTextResponse("sign in first", 401)
                else:
                    response = RedirectResponse(f"{PREFIX}/login", 303)
                return self._finish(request, response, session, new)
            return self._finish(request, await handler(request, session, viewer), session, new)

        return endpoint

    async def _post_ok(self, request: Request, session: ConsoleSession) -> bool:
        if not same_origin(request):
            return False
        given = request.headers.get("x-csrf-token")
        if given is None and request.headers.get("content-type", "").startswith(
            "application/x-www-form-urlencoded"
        ):
            given = str((await request.form()).get("csrf", ""))
        return csrf_ok(session, given)

    def _render(
        self, request: Request, template: str, session: ConsoleSession, viewer: Viewer | None, **context: Any
    ) -> Response:
        # Each page is its template: "catalog.html" is the page "catalog" (base.html marks it in the nav).
        page = template.removesuffix(".html")
        return self._templates.TemplateResponse(
            request,
            template,
            {
                "viewer": viewer,
                "csrf": session.csrf,
                "needs_sign_in": self.access.needs_sign_in,
                "page": page,
                **context,
            },
        )

    # --- sign in --------------------------------------------------------------------------------

    async def _login(self, request: Request) -> Response:
        session, new = self._session(request)
        if not self.access.needs_sign_in:
            return self._finish(request, RedirectResponse(f"{PREFIX}/servers", 303), session, new)
        error = ""
        if request.method == "POST":
            if not await self._post_ok(request, session):
                return self._finish(
                    request, PlainTextResponse("forbidden: not sent from the console", 403), session, new
                )
            tenant = self.access.sign_in(str((await request.form()).get("token", "")).strip())
            if tenant is not None:
                # A new session id on sign-in: an id planted before it is worth nothing after.
                self.access.sessions.drop(session)
                fresh = self.access.sessions.new(tenant)
                return self._finish(request, RedirectResponse(f"{PREFIX}/servers", 303), fresh, True)
            error = "That token is not one of the gateway's."
        response = self._render(request, "login.html", session, None, error=error)
        if error:
            response.status_code = 401
        return self._finish(request, response, session, new)

    async def _logout(self, request: Request) -> Response:
        session, new = self._session(request)
        if not await self._post_ok(request, session):
            return self._finish(
                request, PlainTextResponse("forbidden: not sent from the console", 403), session, new
            )
        self.access.sessions.drop(session)
        fresh = self.access.sessions.new()
        return self._finish(request, RedirectResponse(f"{PREFIX}/login", 303), fresh, True)

    # --- pages ----------------------------------------------------------------------------------

    async def _home(self, request: Request, session: ConsoleSession, viewer: Viewer) -> Response:
        return RedirectResponse(f"{PREFIX}/servers", 303)

    async def _server_rows(self, viewer: Viewer) -> tuple[list[Any], str]:
        try:
            rows = await self.data.servers()
        except ToolscoutClientError as err:
            return [], problem_text(err)
        return [r for r in rows if viewer.may_see_server(r.status.name)], ""

    async def _servers(self, request: Request, session: ConsoleSession, viewer: Viewer) -> Response:
        rows, problem = await self._server_rows(viewer)
        return self._render(request, "servers.html", session, viewer, rows=rows, problem=problem)

    async def _server_events(self, request: Request, session: ConsoleSession, viewer: Viewer) -> Response:
        template = self._templates.get_template("_server_rows.html")

        async def events() -> AsyncIterator[str]:
            seen = -1
            sent = None
            while not self.follower.closed.is_set():
                seen = await self.follower.wait(seen, _REFRESH)
                if self.follower.closed.is_set():
                    break
                rows, problem = await self._server_rows(viewer)
                html = template.render(rows=rows, problem=problem)
                if html == sent:
                    yield ": keep-alive\n\n"
                    continue
                sent = html
                yield "event: servers\n" + "".join(f"data: {line}\n" for line in html.splitlines()) + "\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    def _toolset(self, request: Request, viewer: Viewer) -> str | None:
        """The toolset asked for (the first one shown when none), None when not the viewer's."""
        wanted = request.query_params.get("toolset")
        if wanted is None:
            return viewer.toolsets[0] if viewer.toolsets else None
        return wanted if viewer.may_use_toolset(wanted) else None

    async def _catalog(self, request: Request, session: ConsoleSession, viewer: Viewer) -> Response:
        toolset = self._toolset(request, viewer)
        rows: list[Any] = []
        manifest = None
        problem = ""
        if toolset is None:
            problem = _no_toolset(viewer)
        else:
            try:
                rows, manifest = await self.data.catalog(toolset)
            except ToolscoutClientError as err:
                problem = problem_text(err)
        return self._render(
            request,
            "catalog.html",
            session,
            viewer,
            rows=rows,
            manifest=manifest,
            toolset=toolset,
            problem=problem,
        )

    async def _schema(self, request: Request, session: ConsoleSession, viewer: Viewer) -> Response:
        toolset = self._toolset(request, viewer)
        tool = request.query_params.get("tool", "")
        if toolset is None or not tool:
            return PlainTextResponse("not found", 404)
        try:
            schema = await self.data.schema(toolset, tool)
        except ToolscoutClientError as err:
            return PlainTextResponse(problem_text(err), 502)
        if schema is None:
            return PlainTextResponse("not found", 404)
        return PlainTextResponse(schema, media_type="application/json")

    async def _search(self, request: Request, session: ConsoleSession, viewer: Viewer) -> Response:
        params = request.query_params
        query = params.get("q", "").strip()
        server = params.get("server", "")
        limit = int(params["limit"]) if params.get("limit", "").isdigit() else 10
        limit = limit if limit in _SEARCH_LIMITS else 10
        toolset = self._toolset(request, viewer)
        result = None
        problem = ""
        servers: list[str] = []
        try:
            servers = sorted(
                r.status.name for r in (await self.data.servers()) if viewer.may_see_server(r.status.name)
            )
        except ToolscoutClientError as err:
            problem = problem_text(err)
        if toolset is None:
            problem = _no_toolset(viewer)
        elif server and server not in servers:
            problem = "No such server here."
        elif query or server:
            try:
                result = await self.data.search(query, toolset, server, limit)
            except ToolscoutClientError as err:
                problem = problem_text(err)
        return self._render(
            request,
            "search.html",
            session,
            viewer,
            query=query,
            server=server,
            servers=servers,
            toolset=toolset,
            limit=limit,
            limits=_SEARCH_LIMITS,
            result=result,
            problem=problem,
        )

    async def _chat_page(self, request: Request, session: ConsoleSession, viewer: Viewer) -> Response:
        models: list[Any] = []
        problem = ""
        if not viewer.may_chat:
            problem = "Chatting from the console is not allowed for this sign-in (gateway.console_chat)."
        elif not self.chat.available:
            problem = "The console has no orchestrator to chat through."
        else:
            try:
                models = list(await self.chat.models())
            except ToolscoutClientError as err:
                problem = problem_text(err)
        return self._render(
            request,
            "chat.html",
            session,
            viewer,
            models=models,
            problem=problem,
            history=session.chat.get("turns", []),
            chosen_model=session.chat.get("model", ""),
            chosen_toolset=session.chat.get("toolset", viewer.toolsets[0] if viewer.toolsets else ""),
        )

    async def _chat_send(self, request: Request, session: ConsoleSession, viewer: Viewer) -> Response:
        if not viewer.may_chat or not self.chat.available:
            return PlainTextResponse("chatting is not allowed here", 403)
        try:
            body = await request.json()
        except ValueError:
            return PlainTextResponse("send a JSON object", 400)
        if not isinstance(body, dict):
            return PlainTextResponse("send a JSON object", 400)
        message = str(body.get("message", "")).strip()
        model = str(body.get("model", ""))
        toolset = str(body.get("toolset", ""))
        if not message or not model:
            return PlainTextResponse("a message and a model are needed", 400)
        if not viewer.may_use_toolset(toolset):
            return PlainTextResponse("no such toolset here", 403)
        stream = self.chat.turn(session.chat, message=message, model=model, toolset=toolset)
        return StreamingResponse(stream, media_type="text/event-stream")

    async def _chat_reset(self, request: Request, session: ConsoleSession, viewer: Viewer) -> Response:
        session.chat.clear()
        return RedirectResponse(f"{PREFIX}/chat", 303)

    async def _tokens(self, request: Request, session: ConsoleSession, viewer: Viewer) -> Response:
        toolset = self._toolset(request, viewer)
        figures: list[dict[str, Any]] = []
        problem = ""
        if toolset is None:
            problem = _no_toolset(viewer)
        else:
            try:
                figures = await self.data.tokens(toolset)
            except ToolscoutClientError as err:
                problem = problem_text(err)
        return self._render(
            request,
            "tokens.html",
            session,
            viewer,
            toolset=toolset,
            figures=figures,
            savings=self.chat.savings,
            problem=problem,
        )
