"""structlog JSON logging, configured once per process, with request-scoped context.

Request id and RPC method are bound per request by the observability interceptor (one context
variable, :func:`begin_request`); every log line written while handling that request carries them.
They are read only when a line is written: an RPC that logs nothing (the common case on hot paths)
never formats its id. A line
written while an OpenTelemetry span is active also carries its ``trace_id`` and ``span_id`` (W3C hex),
so the lines of one chat can be joined across the services, and with its trace.

Secrets never reach a log line: values of credential-like keys are masked, and bearer tokens and
API keys are masked in free text (:func:`redact`, :func:`redact_value`; spans that carry content
when asked to use the same two functions).
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import sys
from collections.abc import Mapping, MutableMapping
from contextvars import ContextVar, Token
from typing import Any

import structlog
from opentelemetry import trace

__all__ = [
    "RequestContext",
    "begin_request",
    "bind_request_context",
    "clear_request_context",
    "configure_logging",
    "current_request",
    "end_request",
    "get_logger",
    "logs_at",
    "redact",
    "redact_value",
    "without_internals",
]

_configured = False
# The lowest level written (NOTSET until configure_logging: structlog's default writes every level).
_min_level = logging.NOTSET

# Values of keys like these are never written to logs, whatever logs them.
# (Counts such as "manifest_tokens" are not secrets; only a key that *is* a credential matches.)
_SECRET_KEY = re.compile(
    r"^(?:.*[_-])?(api[_-]?key|authorization|token|secret|password|passwd|cookie|credentials?)$",
    re.IGNORECASE,
)
# Bearer tokens and provider-style keys that might sneak into free text (error messages).
_SECRET_TEXT = re.compile(r"(Bearer\s+)[A-Za-z0-9._~+/=-]{8,}|\b(sk|pk|key)-[A-Za-z0-9_-]{12,}")


def redact(text: str) -> str:
    """Masks bearer tokens and API-key-looking strings in free text."""
    return _SECRET_TEXT.sub(lambda m: (m.group(1) or "") + "[REDACTED]", text)


# Peer addresses and exception names in an error's text ("ipv4:127.0.0.1:52205", "DecodeError"):
# neither belongs in what a caller or a model reads.
_INTERNALS = re.compile(
    r"\b(?:ipv4|ipv6|unix|unix-abstract|dns):\S+"
    r"|\[[0-9A-Fa-f:.]+\](?::\d+)?"
    r"|\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"
    r"|\b(?:localhost|[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+):\d{2,5}\b"
    r"|<class '[^']*'>"
    r"|\b(?:[a-z_][a-z0-9_]*\.)*[A-Z][A-Za-z0-9_]*(?:Error|Exception)\b:?"
)
_SPACES = re.compile(r"\s{2,}")


def without_internals(text: str) -> str:
    """``text`` without peer addresses and exception names (and the spaces and colons they leave).

    A redaction, like :func:`redact`: it decides nothing about the error, it only keeps internals
    out of what a caller or a model reads."""
    return _SPACES.sub(" ", _INTERNALS.sub("", text)).strip(" :;")


def redact_value(value: Any) -> Any:
    """``value`` (JSON-like: mappings, lists, text) with credential-like keys masked at any depth and
    :func:`redact` applied to every string."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return {
            key: "[REDACTED]" if isinstance(key, str) and _SECRET_KEY.match(key) else redact_value(item)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact_value(item) for item in value]
    return value


def _redact_processor(_: Any, __: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key, value in list(event_dict.items()):
        if key != "event" and _SECRET_KEY.match(key):
            event_dict[key] = "[REDACTED]"
        elif isinstance(value, str):
            event_dict[key] = redact(value)
    return event_dict


def _trace_processor(_: Any, __: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    # The span of the request (or chat, or tool call) being handled where the line is written;
    # without tracing, nothing is active and the line is left as it is.
    span_context = trace.get_current_span().get_span_context()
    if span_context.is_valid:
        event_dict["trace_id"] = format(span_context.trace_id, "032x")
        event_dict["span_id"] = format(span_context.span_id, "016x")
    return event_dict


# A request id made here: this process's random prefix and a counter (unique across processes and
# restarts without a random draw per request).
_ID_PREFIX = os.urandom(4).hex()
_ids = itertools.count(1)


class RequestContext:
    """The request a log line is written for: its id (the caller's ``x-request-id``, else one made
    here on first use) and its RPC method."""

    __slots__ = ("_id", "rpc")

    def __init__(self, request_id: str, rpc: str) -> None:
        self._id = request_id
        self.rpc = rpc

    @property
    def request_id(self) -> str:
        if not self._id:
            self._id = f"{_ID_PREFIX}{next(_ids):08x}"
        return self._id


_REQUEST: ContextVar[RequestContext | None] = ContextVar("toolscout_request", default=None)


def begin_request(request_id: str, rpc: str) -> Token[RequestContext | None]:
    """Binds the request being handled (``request_id`` empty: one is made when a line needs it)."""
    return _REQUEST.set(RequestContext(request_id, rpc))


def end_request(token: Token[RequestContext | None]) -> None:
    """Unbinds what :func:`begin_request` bound. A stream's end can run in another context than its
    start (gRPC closing the generator of a stream cut at shutdown): there, the request is unbound
    in that context instead (``reset`` refuses a token of another context)."""
    try:
        _REQUEST.reset(token)
    except ValueError:
        _REQUEST.set(None)


def current_request() -> RequestContext | None:
    """The request bound by :func:`begin_request` in this context, if any."""
    return _REQUEST.get()


def logs_at(level: int) -> bool:
    """Whether a line at ``level`` (``logging.DEBUG`` ...) is written at all."""
    return level >= _min_level


def _request_processor(_: Any, __: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    request = _REQUEST.get()
    if request is None or ("request_id" in event_dict and "rpc" in event_dict):
        return event_dict
    # First, as bound context comes first; a field given explicitly or bound (a call on a stream
    # binds its own) wins over the RPC's.
    fields: dict[str, Any] = {}
    if "request_id" not in event_dict:
        fields["request_id"] = request.request_id
    if "rpc" not in event_dict:
        fields["rpc"] = request.rpc
    fields.update(event_dict)
    return fields


# Until configure_logging runs (a library user's process, tests that host services in process),
# structlog's default chain writes the lines: the request's fields go into it as well, as bound
# context always did.
if not structlog.is_configured():
    _defaults = list(structlog.get_config()["processors"])
    structlog.configure(processors=[*_defaults[:1], _request_processor, *_defaults[1:]])


def configure_logging(level: str = "INFO", *, json: bool = True) -> None:
    """Configures structlog (and stdlib logging routed through it) once per process."""
    global _configured, _min_level  # noqa: PLW0603 - logging is process-wide by nature
    numeric = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    _min_level = numeric
    renderer: Any = structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer()
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            _request_processor,
            _trace_processor,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _redact_processor,
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        # No file given: each line goes to whatever sys.stdout is at that moment, so replacing it
        # (test capture, a redirect) never leaves the logger writing to a closed stream.
        logger_factory=structlog.PrintLoggerFactory(),
        cache_logger_on_first_use=False,
    )
    if not _configured:
        # Third-party libraries log through stdlib; keep them quiet unless asked.
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(_LibraryFormatter("%(name)s: %(message)s"))
        logging.basicConfig(level=max(numeric, logging.WARNING), handlers=[handler])
    _configured = True


class _LibraryFormatter(logging.Formatter):
    """A library's line, one line: an exception it logs with its traceback (the MCP SDK's "Error
    parsing SSE message" when a closed session still gets an event, uvicorn's "Exception in ASGI
    application") is named after the message instead, and the line is redacted like ours."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage().strip()
        if record.exc_info and record.exc_info[0] is not None:
            error = record.exc_info[1]
            detail = without_internals(str(error)) if error is not None else ""
            message = f"{message} ({record.exc_info[0].__name__}{': ' + detail if detail else ''})"
        line = f"{record.name}: {' '.join(message.split())}"
        return redact(line)


class _Logger:
    """structlog's lazy logger, which drops a line below the configured level before structlog
    builds a bound logger for it: the lazy proxy builds one on every attribute it is asked for
    (loggers are not cached, see ``configure_logging``), which cost a DEBUG line on a hot path more
    than the work it describes. Everything else is the proxy's."""

    __slots__ = ("_proxy",)

    def __init__(self, proxy: Any) -> None:
        self._proxy = proxy

    def debug(self, event: str, *args: Any, **fields: Any) -> Any:
        if _min_level <= logging.DEBUG:
            return self._proxy.debug(event, *args, **fields)
        return None

    def info(self, event: str, *args: Any, **fields: Any) -> Any:
        if _min_level <= logging.INFO:
            return self._proxy.info(event, *args, **fields)
        return None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._proxy, name)


def get_logger(name: str) -> Any:
    """A structlog logger named for its module."""
    return _Logger(structlog.get_logger(name))


def bind_request_context(**values: Any) -> None:
    """Binds fields to every line written in this context (cleared by :func:`clear_request_context`)."""
    structlog.contextvars.bind_contextvars(**values)


def clear_request_context() -> None:
    structlog.contextvars.clear_contextvars()
