"""What a handler knows of its pool: the backend it runs on, and the claim it works on.

How a handler reaches its Redis (`current_backend`) and reports how far it got
(`report_progress`).
"""

from __future__ import annotations

import contextvars
import logging
from typing import TYPE_CHECKING, Any, Final

from ._exceptions import BackendRefused, BackendUnavailable, TrioqueueError
from ._payload import canonical_json

if TYPE_CHECKING:
    from ._backend import Backend
    from ._backend_values import Claim

__all__ = ["MAX_PROGRESS", "current_backend", "report_progress", "running", "running_on"]

_BACKEND: Final[contextvars.ContextVar[Backend]] = contextvars.ContextVar("trioqueue_backend")
_CLAIM: Final[contextvars.ContextVar[Claim]] = contextvars.ContextVar("trioqueue_claim")

logger = logging.getLogger("trioqueue.pool")

MAX_PROGRESS: Final = 64 * 1024
"""The most bytes a progress report may take as JSON."""


def running_on(backend: Backend) -> None:
    """Say, in a worker task of a pool, that its handlers run on *backend*."""
    _BACKEND.set(backend)


def running(claim: Claim) -> None:
    """Say, in a worker task of a pool, that its handler now works on *claim*."""
    _CLAIM.set(claim)


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


async def report_progress(progress: Any) -> bool:
    """Report how far the calling handler got: kept on its job's record.

    *progress* is any JSON value up to 64 KiB, e.g. ``0.4`` or ``{"done": 40,
    "of": 100}``; it replaces the one before, and `JobRecord.progress` shows it
    (`Queue.status`, ``GET /jobs/ID``, the dashboard's job lookup, ``trioqueue jobs
    --json``). Call it from the handler or a task it started; from a thread
    (``run_sync``), through ``trio.from_thread.run(trioqueue.report_progress, value)``.
    One call is one write to the backend: report at steps a person would read, not
    in a tight loop.

    Returns:
        Whether it was kept: False when the job's claim is no longer held (its
        lease ran out, or it was cancelled), or when the backend could not keep it
        (unreachable, out of memory: a WARNING says so). A report that fails
        never fails the job.

    Raises:
        TrioqueueError: No worker pool runs the calling code.
        TypeError: *progress* is not JSON.
        ValueError: *progress* takes more than 64 KiB as JSON.

    Cancellation: a checkpoint; cancelled, nothing was kept.
    """
    try:
        claim, backend = _CLAIM.get(), _BACKEND.get()
    except LookupError:
        raise TrioqueueError(
            "no worker pool runs this code: report_progress() is for handlers (and the "
            "tasks and threads they start)"
        ) from None
    encoded = canonical_json(progress, "the progress")
    if len(encoded) > MAX_PROGRESS:
        raise ValueError(
            f"the progress takes {len(encoded):,} bytes as JSON, over {MAX_PROGRESS:,} bytes; "
            "report a summary (a fraction, counts), and keep details elsewhere"
        )
    try:
        return await backend.set_progress(claim, encoded)
    except (BackendUnavailable, BackendRefused) as exc:
        logger.warning("job %s: its progress was not kept: %s", claim.job.id, exc)
        return False
