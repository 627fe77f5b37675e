"""The backend whose pool runs the current handler: how a handler reaches its Redis."""

from __future__ import annotations

import contextvars
from typing import TYPE_CHECKING, Final

from ._exceptions import TrioqueueError

if TYPE_CHECKING:
    from ._backend import Backend

__all__ = ["current_backend", "running_on"]

_BACKEND: Final[contextvars.ContextVar[Backend]] = contextvars.ContextVar("trioqueue_backend")


def running_on(backend: Backend) -> None:
    """Say, in a worker task of a pool, that its handlers run on *backend*."""
    _BACKEND.set(backend)


def current_backend() -> Backend:
    """The backend of the worker pool that runs the calling handler.

    For a handler that needs the backend its pool holds (``trioqueue worker``
    makes both): on Redis, `current_redis` is the one to call. Set in each
    worker task of a pool, so it is known in the handler and in the tasks it
    starts; a pool inside a handler's pool sets its own.

    Raises:
        TrioqueueError: Called outside a handler that a worker pool runs.
    """
    try:
        return _BACKEND.get()
    except LookupError:
        raise TrioqueueError(
            "no worker pool runs this code: current_backend() and current_redis() are for "
            "handlers (and the tasks they start); elsewhere, use the backend you made"
        ) from None
