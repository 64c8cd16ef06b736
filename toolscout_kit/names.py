"""One wording for every "unknown name" toolscout reports, with the closest known names.

``unknown tool 'x' (closest: a, b)``, or the known names when nothing is close (at most a dozen,
then how many more). The pool's NOT_FOUND, the CLI's exit-3 messages and the config loader's
unknown keys all use it, so a reader sees one shape whatever was misspelt.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence

__all__ = ["closest", "unknown_name"]

_LISTED = 12  # names listed when none is close


def closest(name: str, known: Iterable[str], n: int = 3, cutoff: float = 0.6) -> list[str]:
    """The known names most like ``name`` (best first; none when nothing is close)."""
    return difflib.get_close_matches(name, list(known), n=n, cutoff=cutoff)


def unknown_name(
    kind: str, name: str, known: Sequence[str], close: Sequence[str] | None = None, *, where: str = ""
) -> str:
    """``unknown <kind> '<name>'<where> (closest: ...)``; the known names when nothing is close.

    ``close`` replaces the computed closest names (a caller with a better measure, such as
    discovery's, passes its own; an empty list means "none").
    """
    found = list(close) if close is not None else closest(name, known)
    head = f"unknown {kind} '{name}'{where}"
    if found:
        return f"{head} (closest: {', '.join(found)})"
    if not known:
        return f"{head} (no similar names)" if close is not None else f"{head} (no {kind}s configured)"
    names = sorted(known)
    more = f", ... {len(names) - _LISTED} more" if len(names) > _LISTED else ""
    return f"{head} ({kind}s: {', '.join(names[:_LISTED])}{more})"
