"""Discovery's domain errors, each in one of the kit's categories (one gRPC status each).

Their messages are written for the caller, and for ``search_tools`` for the LLM itself: the
orchestrator hands them to the model verbatim so that it can correct its arguments.
"""

from __future__ import annotations

from toolscout_kit.errors import InvalidArgumentError, NotFoundError

__all__ = ["InvalidToolsetError", "SearchArgumentError", "ToolsetNotFoundError", "UnknownServerError"]


class SearchArgumentError(InvalidArgumentError):
    """The search_tools arguments are malformed; the message is written for the LLM."""


class InvalidToolsetError(InvalidArgumentError):
    """An inline toolset that is not in the ``tool_sets`` shape, or given beside a toolset name."""


class ToolsetNotFoundError(NotFoundError):
    """The toolset, or a server or tool it names, does not exist."""


class UnknownServerError(NotFoundError):
    """server_name is not a server of the toolset; the message lists the valid ones."""
