"""The provider interface and the retry / tools-fallback policy every adapter shares.

Adapters set their SDK's own ``max_retries=0`` and implement :meth:`SdkProvider._call_once` and
:meth:`SdkProvider._classify`; retries on 429/5xx with backoff, the one retry without tools when a
provider rejects tool calling, and the translation to domain errors happen here, once.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from toolscout.client import Deferral

from orchestrator_svc.errors import (
    ChatDeadlineError,
    ProviderAuthError,
    ProviderRateLimitedError,
    ProviderRejectedError,
    ProviderUnavailableError,
    UnknownModelError,
)
from orchestrator_svc.messages import DeltaSink, LLMRequest, LLMResult, ToolCall, Usage
from orchestrator_svc.providers.deferral import NativeDeferralLimitError, ProviderApi, native_limit_problem
from orchestrator_svc.reasoning import ThinkSplitter
from toolscout_kit.logging import get_logger, redact
from toolscout_kit.tracing import add_event

__all__ = [
    "Failure",
    "FailureKind",
    "LLMProvider",
    "ProviderErrorHook",
    "SdkErrors",
    "SdkProvider",
    "StreamCollector",
    "classify_sdk_error",
    "connection_failure",
    "looks_like_tools_rejected",
]

_log = get_logger(__name__)

FailureKind = Literal[
    "rate_limited", "unavailable", "timeout", "tools_rejected", "bad_request", "auth", "not_found"
]
# Called for every failed provider attempt (metrics), with the failure kind as the reason.
ProviderErrorHook = Callable[[str], None]

_MAX_BACKOFF = 8.0
_BASE_BACKOFF = 0.5
_MAX_REASON = 300


class LLMProvider(Protocol):
    """One configured client (``clients.<name>``)."""

    provider: str

    async def complete(
        self,
        request: LLMRequest,
        *,
        stream: DeltaSink | None = None,
        on_error: ProviderErrorHook | None = None,
    ) -> LLMResult:
        """Runs one LLM call. ``stream`` receives deltas when given (the call then streams).

        Raises:
            ProviderRateLimitedError, ProviderUnavailableError, ProviderRejectedError,
            ProviderAuthError, ChatDeadlineError.
        """
        ...

    async def aclose(self) -> None:
        """Closes the SDK client's connections."""
        ...


@dataclass(frozen=True, slots=True)
class Failure:
    kind: FailureKind
    # The provider's reason, already free of secrets.
    reason: str
    status: int | None = None
    retry_after: float | None = None


def looks_like_tools_rejected(status: int | None, message: str) -> bool:
    """A 400 whose text is about tools: Ollama, vLLM, OpenRouter and LM Studio word it differently."""
    return status == 400 and "tool" in message.lower()


def clean_reason(text: str) -> str:
    text = redact(" ".join(text.split()))
    return text if len(text) <= _MAX_REASON else text[:_MAX_REASON] + "..."


def connection_failure(exc: Exception) -> Failure:
    """A connection error of an SDK, naming the URL it tried and why it failed.

    The SDKs word every one of them "Connection error." and keep the request (with its URL) and
    the transport's own exception (refused, no such host, TLS) on the side.
    """
    request = getattr(exc, "request", None)
    url = getattr(request, "url", None)
    # Scheme, host, port and path only: no credentials or query string.
    where = f" to {url.copy_with(query=None, fragment=None, username=None, password=None)}" if url else ""
    # The innermost cause says what went wrong (ConnectionRefusedError, gaierror, an SSL error).
    cause: BaseException | None = exc
    while cause is not None and (cause.__cause__ or cause.__context__) is not None:
        cause = cause.__cause__ or cause.__context__
    if isinstance(cause, OSError) and isinstance(cause.errno, int) and cause.errno > 0:
        text = os.strerror(cause.errno)  # asyncio words ECONNREFUSED "Connect call failed (...)"
    else:
        text = str(cause or "")
    why = f": {text}" if cause is not exc and text else ""
    return Failure("unavailable", clean_reason(f"connection error{where}{why}"))


class SdkProvider(ABC):
    """Retry, backoff and fallback around one SDK call."""

    provider: str
    # Retry once without tools when the provider rejects them (local models without tool
    # support). Off for providers whose every model takes tools: there a 400 about tools is a
    # request the retry would only hide (e.g. a strict model refusing a changed tool list).
    tools_fallback = True

    def __init__(
        self,
        *,
        client_name: str,
        max_retries: int,
        request_timeout: float,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.client_name = client_name
        self.max_retries = max_retries
        self.request_timeout = request_timeout
        self._sleep = sleep

    @abstractmethod
    async def _call_once(
        self, request: LLMRequest, *, tools: bool, stream: DeltaSink | None, time_limit: float
    ) -> LLMResult: ...

    @abstractmethod
    async def aclose(self) -> None: ...

    def _wire_params(self, request: LLMRequest, body: dict[str, Any], api: ProviderApi) -> dict[str, Any]:
        """SDK keyword arguments for a wire ``body``: a native-mode request is checked against the
        provider's documented limits first, and the tool definitions (already wire-format JSON) go
        as ``extra_body``, skipping the SDK's recursive TypedDict transform, which costs
        milliseconds per call on large schemas.

        Raises:
            NativeDeferralLimitError: a native request breaks a limit (the loop should have fallen
                back to append mode before sending it).
        """
        if request.deferral == Deferral.NATIVE and "tools" in body:
            problem = native_limit_problem(request, api, body=body)
            if problem is not None:
                raise NativeDeferralLimitError(
                    f"provider {self.client_name!r}: native deferral limit: {problem.detail}"
                )
        params = {k: v for k, v in body.items() if k != "tools"}
        if "tools" in body:
            params["extra_body"] = {"tools": body["tools"]}
        return params

    @abstractmethod
    def _classify(self, exc: Exception) -> Failure | None:
        """The failure an SDK exception stands for, or None when it is not a provider error."""

    async def complete(
        self,
        request: LLMRequest,
        *,
        stream: DeltaSink | None = None,
        on_error: ProviderErrorHook | None = None,
    ) -> LLMResult:
        tools = bool(request.tools)
        tools_disabled = False
        attempt = 0
        started = time.monotonic()
        emitted = False

        async def tracking_sink(kind: Literal["text", "reasoning"], text: str) -> None:
            nonlocal emitted
            emitted = True
            assert stream is not None
            await stream(kind, text)

        while True:
            remaining = None if request.timeout is None else request.timeout - (time.monotonic() - started)
            if remaining is not None and remaining <= 0:
                raise ChatDeadlineError(f"deadline exceeded waiting for provider {self.client_name!r}")
            limit = self.request_timeout if remaining is None else min(self.request_timeout, remaining)
            try:
                result = await self._call_once(
                    request, tools=tools, stream=tracking_sink if stream else None, time_limit=limit
                )
            except Exception as exc:
                failure = self._classify(exc)
                if failure is None:
                    raise
                if failure.kind == "timeout" and remaining is not None and limit >= remaining:
                    failure = Failure("timeout", "deadline exceeded waiting for the provider")
                if failure.kind == "tools_rejected" and (
                    request.deferral == Deferral.NATIVE or not self.tools_fallback
                ):
                    # Native deferral uses tools the provider documents (defer_loading, tool
                    # search): a 400 about them is our bug or a limit, never a model without tools.
                    failure = Failure("bad_request", failure.reason, failure.status)
                if on_error is not None:
                    on_error(failure.kind)
                _log.warning(
                    "provider_call_failed",
                    client=self.client_name,
                    kind=failure.kind,
                    status=failure.status,
                    reason=failure.reason,
                    attempt=attempt,
                )
                add_event(
                    "provider_error",
                    {
                        "error.type": failure.kind,
                        "http.response.status_code": failure.status,
                        "attempt": attempt,
                    },
                )
                if failure.kind == "tools_rejected" and tools and not tools_disabled and not emitted:
                    # Local models without tool support: answer without tools rather than fail.
                    tools, tools_disabled = False, True
                    add_event("fallback", {"to": "no tools", "reason": failure.kind})
                    continue
                retryable = failure.kind in ("rate_limited", "unavailable") and not emitted
                if retryable and attempt < self.max_retries:
                    delay = self._backoff(attempt, failure.retry_after)
                    left = None if request.timeout is None else request.timeout - (time.monotonic() - started)
                    if left is None or delay < left:
                        attempt += 1
                        add_event("retry", {"attempt": attempt, "delay_seconds": delay})
                        await self._sleep(delay)
                        continue
                raise self._to_error(failure, attempts=attempt + 1) from exc
            result.tools_disabled = tools_disabled
            return result

    @staticmethod
    def _backoff(attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return max(0.0, min(float(retry_after), _MAX_BACKOFF))
        jitter = 0.5 + random.random() / 2  # noqa: S311 - backoff jitter, not cryptography
        return float(min(_MAX_BACKOFF, _BASE_BACKOFF * 2**attempt) * jitter)

    def _to_error(self, failure: Failure, *, attempts: int) -> Exception:
        who = f"provider {self.client_name!r}"
        if failure.kind == "rate_limited":
            return ProviderRateLimitedError(f"{who} rate limited after {attempts} attempts: {failure.reason}")
        if failure.kind == "unavailable":
            return ProviderUnavailableError(f"{who} unavailable after {attempts} attempts: {failure.reason}")
        if failure.kind == "timeout":
            return ChatDeadlineError(f"{who}: {failure.reason}")
        if failure.kind == "auth":
            return ProviderAuthError(f"{who} rejected the credentials: {failure.reason}")
        if failure.kind == "not_found":
            return UnknownModelError(f"{who}: {failure.reason}")
        return ProviderRejectedError(f"{who} rejected the request: {failure.reason}")


class StreamCollector:
    """Accumulates one streamed reply, whatever the wire format: answer text (with ``<think>`` tags
    split out as reasoning), reasoning, tool calls by index, and usage; every piece also goes to
    the caller's sink as it arrives."""

    def __init__(self, sink: DeltaSink) -> None:
        self._sink = sink
        self._splitter = ThinkSplitter()
        self._text: list[str] = []
        self._reasoning: list[str] = []
        # index -> [id, name, arguments JSON so far]
        self.calls: dict[int, list[str]] = {}
        self.usage = Usage()
        self.finish_reason = ""

    async def _emit(self, pieces: list[tuple[Literal["text", "reasoning"], str]]) -> None:
        for kind, piece in pieces:
            (self._text if kind == "text" else self._reasoning).append(piece)
            await self._sink(kind, piece)

    async def answer(self, piece: str) -> None:
        """A piece of answer text (may contain or continue ``<think>`` tags)."""
        await self._emit(self._splitter.feed(piece))

    async def reasoning(self, piece: str) -> None:
        """A piece the provider marked as reasoning."""
        await self._emit([("reasoning", piece)])

    def call(self, index: int) -> list[str]:
        """The tool call being streamed at ``index`` (created empty on first sight)."""
        return self.calls.setdefault(index, ["", "", ""])

    async def finish(self, *, empty_arguments: str = "") -> LLMResult:
        """Flushes held-back text and returns the whole reply."""
        await self._emit(self._splitter.flush())
        return LLMResult(
            "".join(self._text).strip(),
            "".join(self._reasoning).strip(),
            [
                ToolCall(cid, name, args or empty_arguments)
                for _, (cid, name, args) in sorted(self.calls.items())
            ],
            self.usage,
            finish_reason=self.finish_reason,
        )


@dataclass(frozen=True, slots=True)
class SdkErrors:
    """The exception classes of a provider SDK built like openai's and anthropic's: a timeout is
    a connection error, each carries the request, a status error its response and body."""

    timeout: type[Exception]
    connection: type[Exception]
    status: type[Exception]
    base: type[Exception]
    # The provider's reason in a status error (from its body, else the SDK's message).
    status_reason: Callable[[Any], str]


def classify_sdk_error(exc: Exception, sdk: SdkErrors) -> Failure | None:
    """The failure an SDK exception stands for, or None when it is not one of the SDK's."""
    if isinstance(exc, sdk.timeout):
        return Failure("timeout", "the provider did not answer in time")
    if isinstance(exc, sdk.connection):
        return connection_failure(exc)
    if isinstance(exc, sdk.status):
        err: Any = exc
        retry_after = parse_retry_after(err.response.headers.get("retry-after"))
        reason = clean_reason(f"{err.status_code} {sdk.status_reason(err)}")
        return classify_status(err.status_code, reason, retry_after)
    if isinstance(exc, sdk.base):
        return Failure("unavailable", clean_reason(str(exc)))
    return None


def classify_status(status: int, reason: str, retry_after: float | None) -> Failure:
    """The failure kind of an HTTP status from any provider."""
    if status == 429:
        return Failure("rate_limited", reason, status, retry_after)
    if status >= 500 or status in (408, 409):
        return Failure("unavailable", reason, status, retry_after)
    if status in (401, 403):
        return Failure("auth", reason, status)
    if status == 404:
        return Failure("not_found", reason, status)
    if looks_like_tools_rejected(status, reason):
        return Failure("tools_rejected", reason, status)
    return Failure("bad_request", reason, status)


def parse_retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None
