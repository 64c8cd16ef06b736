"""The orchestrator's exception tree; each class sits under one toolscout_kit category."""

from __future__ import annotations

from toolscout_kit.errors import (
    DeadlineExceededError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    ResourceExhaustedError,
    UnavailableError,
)

__all__ = [
    "ChatDeadlineError",
    "InvalidChatError",
    "ProviderAuthError",
    "ProviderRateLimitedError",
    "ProviderRejectedError",
    "ProviderUnavailableError",
    "TemplateError",
    "UnknownModelError",
]


class UnknownModelError(NotFoundError):
    """The requested model is not in the config's ``models``; the message lists them."""


class InvalidChatError(InvalidArgumentError):
    """The request's messages or options are malformed."""


class ProviderRateLimitedError(ResourceExhaustedError):
    """The provider kept answering 429 after our retries."""


class ProviderUnavailableError(UnavailableError):
    """The provider kept failing (5xx, connection errors) after our retries."""


class ProviderRejectedError(InvalidArgumentError):
    """The provider refused the request (400-class other than rate limits and auth)."""


class ProviderAuthError(FailedPreconditionError):
    """No API key configured, or the provider rejected it."""


class TemplateError(FailedPreconditionError):
    """The model's system prompt template is missing or does not render."""


class ChatDeadlineError(DeadlineExceededError):
    """The chat ran past the caller's deadline."""
