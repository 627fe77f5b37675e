"""The caller's deadline for I/O that a cancellation must not cut short.

A backend waits for the reply to a write it has sent even when its caller is
cancelled (so that a cancellation never hides a change), but never past a
deadline: its own I/O timeout, or the sooner one that the caller set with
`io_deadline`. The worker pool sets it around the outcomes it reports under a
shield, so that "the shutdown's grace plus *io_timeout*" bounds what a shutdown
takes, whatever the backend's own timeout.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["current_io_deadline", "io_deadline"]

_DEADLINE: Final[contextvars.ContextVar[float]] = contextvars.ContextVar(
    "trioqueue_io_deadline", default=math.inf
)


@contextlib.contextmanager
def io_deadline(deadline: float) -> Iterator[None]:
    """Within the block, shielded I/O ends by *deadline* (Trio's clock) at the latest."""
    token = _DEADLINE.set(min(deadline, _DEADLINE.get()))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def current_io_deadline() -> float:
    """The sooner deadline set by an enclosing `io_deadline`; infinity when none is."""
    return _DEADLINE.get()
