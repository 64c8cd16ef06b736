"""``read_result``: how a model reads on in a tool result that came back as a preview and a handle.

Discovery defines the tool (:data:`discovery_svc.surface.READ_RESULT_TOOL`, on every plan); this
module owns the rest of the contract that the orchestrator and the gateway both speak: reading the
call's arguments into the pool's :class:`~toolscout.client.ReadRequest` (:func:`read_arguments`),
and the sentences the model reads when a read is refused (:func:`no_handle_text`,
:func:`read_refused_text`). The pool answers the read itself (``ReadResult``: a page, a grep or a
JMESPath projection within the budget) and writes why a handle is gone; neither caller rewrites it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolscout.client import READ_RESULT_NAME, ReadRequest

from toolscout_kit.result_reading import MAX_CONTEXT_LINES

__all__ = ["no_handle_text", "read_arguments", "read_refused_text"]

_SHAPE = (
    f'{READ_RESULT_NAME} takes {{"handle": "<the handle a preview gave>", and one of "offset": <int>, '
    '"pattern": "<text>" (with "context_lines": <0-20>) or "path": "<JMESPath>"}'
)


def _integer(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read_arguments(
    arguments: Mapping[str, Any], *, principal: str, conversation: str, token_encoding: str = ""
) -> ReadRequest | str:
    """The read a ``read_result`` call asks for, bound to the caller's ``principal`` and
    ``conversation``, or what is wrong with the call (a sentence for the model)."""
    problems: list[str] = []
    handle = arguments.get("handle")
    if not isinstance(handle, str) or not handle.strip():
        problems.append("'handle' must be the handle a result preview gave")
    offset = _integer(arguments.get("offset", 0))
    if offset is None or offset < 0:
        problems.append("'offset' must be a non-negative integer")
    pattern = arguments.get("pattern", "")
    if not isinstance(pattern, str):
        problems.append("'pattern' must be a string")
    path = arguments.get("path", "")
    if not isinstance(path, str):
        problems.append("'path' must be a string")
    context = _integer(arguments.get("context_lines", 0))
    if context is None or not 0 <= context <= MAX_CONTEXT_LINES:
        problems.append(f"'context_lines' must be an integer from 0 to {MAX_CONTEXT_LINES}")
    if isinstance(pattern, str) and isinstance(path, str) and pattern and path:
        problems.append("give 'pattern' or 'path', not both")
    if (
        problems
        or not isinstance(handle, str)
        or offset is None
        or context is None
        or not isinstance(pattern, str)
        or not isinstance(path, str)
    ):
        return f"{_SHAPE}: {'; '.join(problems)}"
    return ReadRequest(
        handle=handle.strip(),
        principal=principal,
        conversation=conversation,
        offset=offset,
        pattern=pattern,
        context_lines=context,
        path=path,
        token_encoding=token_encoding,
    )


def no_handle_text(handle: str) -> str:
    """The refusal of a read of a handle this conversation was never given (or none at all)."""
    named = f"result handle {handle!r}" if handle else "result handle"
    return (
        f"Error: no {named} in this conversation. {READ_RESULT_NAME} reads only the handles that "
        "result previews above gave; call the tool again to get its result."
    )


def read_refused_text(message: str) -> str:
    """A read the pool refused (an expired handle, a bad offset, pattern or path): its reason,
    written for the model by the pool, as a tool error."""
    return message if message.startswith("Error") else f"Error: {message}"
