"""Job records and their state machine: pure values, no I/O.

A job moves ``RECEIVED → PROCESSING → COMPLETED`` when all goes well and
``PROCESSING → FAILED_RETRY → PROCESSING → … → FAILED`` when it keeps failing; a
job enqueued with a delay starts ``SCHEDULED`` and becomes ``RECEIVED`` when due;
`Queue.cancel` ends an unfinished job ``CANCELLED``.
`TRANSITIONS` is the whole table; `check_transition` enforces it.
"""

from __future__ import annotations

import enum
import traceback
from typing import Any, Final

import attrs

from ._exceptions import ConfigurationError, InvalidTransition

__all__ = [
    "MAX_ERROR_TEXT",
    "MAX_TRACEBACK_TEXT",
    "TERMINAL_STATES",
    "TRANSITIONS",
    "ErrorInfo",
    "Job",
    "JobRecord",
    "JobState",
    "Retention",
    "check_transition",
]


class JobState(enum.StrEnum):
    """Where a job is in its life."""

    #: Accepted and waiting for its first attempt.
    RECEIVED = "received"
    #: Accepted to run after other jobs (``enqueue(..., after=[...])``): stored,
    #: not claimable, taking no room, until the last of them completes; it then
    #: becomes `RECEIVED`. When one of them fails, is dropped or is cancelled, it
    #: becomes a dead letter (`FAILED`) whose reason names that job.
    DEFERRED = "deferred"
    #: Accepted with a due time still to come (``enqueue(..., delay=...)``), or
    #: over its rate key's limit when claimed (``enqueue(..., rate_key=...)``):
    #: stored, not claimable before it; it becomes `RECEIVED` when due.
    SCHEDULED = "scheduled"
    #: Claimed by a worker pool: prefetched or running its handler.
    PROCESSING = "processing"
    #: The handler returned; the job is finished.
    COMPLETED = "completed"
    #: An attempt failed and another is due (sleeping, or waiting on the queue).
    FAILED_RETRY = "failed_retry"
    #: Attempts are exhausted; the job is a dead letter until requeued or purged.
    FAILED = "failed"
    #: The handler raised `Drop`; the job is finished.
    DROPPED = "dropped"
    #: `Queue.cancel` ended the job before it finished; it never runs again.
    CANCELLED = "cancelled"


TRANSITIONS: Final[dict[JobState, frozenset[JobState]]] = {
    # claimed by a pool; over its rate key's limit, it waits for its turn; or cancelled
    JobState.RECEIVED: frozenset({JobState.PROCESSING, JobState.SCHEDULED, JobState.CANCELLED}),
    # the jobs it runs after completed; or one of them did not; or cancelled
    JobState.DEFERRED: frozenset({JobState.RECEIVED, JobState.FAILED, JobState.CANCELLED}),
    # due: on the ready queue (or stored unqueued while it is full); or cancelled
    JobState.SCHEDULED: frozenset({JobState.RECEIVED, JobState.CANCELLED}),
    JobState.PROCESSING: frozenset(
        {
            JobState.COMPLETED,  # handler returned
            JobState.FAILED_RETRY,  # failed with attempts left, or released after one
            JobState.FAILED,  # failed with no attempts left
            JobState.DROPPED,  # handler raised Drop
            JobState.RECEIVED,  # released by shutdown or recovery before any attempt ended
            JobState.CANCELLED,  # cancelled: its pool stopped the handler, or never started it
        }
    ),
    # claimed again; or cancelled while it waited out its backoff
    JobState.FAILED_RETRY: frozenset({JobState.PROCESSING, JobState.CANCELLED}),
    JobState.FAILED: frozenset({JobState.RECEIVED}),  # requeue_dead
    JobState.COMPLETED: frozenset(),
    JobState.DROPPED: frozenset(),
    JobState.CANCELLED: frozenset(),
}
"""Every legal move: ``TRANSITIONS[source]`` holds the states *source* may move to."""

TERMINAL_STATES: Final = frozenset(
    {JobState.COMPLETED, JobState.DROPPED, JobState.FAILED, JobState.CANCELLED}
)
"""States in which a job is finished (a dead letter is finished until requeued)."""


def check_transition(job_id: str, source: JobState, target: JobState) -> None:
    """Raise `InvalidTransition` unless *source* may move to *target*."""
    if target not in TRANSITIONS[source]:
        raise InvalidTransition(job_id, source.value, target.value)


MAX_ERROR_TEXT = 4000
"""The most characters of an exception's message that a record keeps."""

MAX_TRACEBACK_TEXT = 8000
"""The most characters of an exception's traceback that a record keeps."""


@attrs.frozen
class ErrorInfo:
    """The type, message and traceback of the exception that ended an attempt."""

    type: str
    """The exception class: ``"ValueError"`` for builtins, else ``"module.Class"``."""
    message: str
    """``str()`` of the exception, cut to 4,000 characters."""
    traceback: str = attrs.field(default="", eq=False)
    """The formatted traceback, its last 8,000 characters (the frames
    nearest the error); empty when none was kept. Not compared: two errors of the
    same type and message are the same error."""
    attempt: int | None = attrs.field(default=None, eq=False)
    """The attempt it ended (1 for the first), as the backend recorded it; None
    before it was recorded, and for an error recorded by an older version. A job
    that completed after a failure keeps its error: this says which attempt it
    was. Attempts count again from 1 after `Queue.requeue_dead`. Not compared."""

    @classmethod
    def from_exception(cls, exc: BaseException) -> ErrorInfo:
        """Describe *exc*, with its traceback."""
        kind = type(exc)
        name = kind.__qualname__
        if kind.__module__ not in ("builtins", "__main__"):
            name = f"{kind.__module__}.{name}"
        message = str(exc)
        if len(message) > MAX_ERROR_TEXT:  # a record keeps a bounded account
            cut = len(message) - MAX_ERROR_TEXT
            message = f"{message[:MAX_ERROR_TEXT]}… ({cut} more characters)"
        trace = "".join(traceback.format_exception(exc))
        if len(trace) > MAX_TRACEBACK_TEXT:  # the end is where the error is
            cut = len(trace) - MAX_TRACEBACK_TEXT
            trace = f"({cut} characters cut) …{trace[-MAX_TRACEBACK_TEXT:]}"
        return cls(type=name, message=message, traceback=trace)


@attrs.frozen
class JobRecord:
    """A snapshot of everything the backend keeps about one job."""

    id: str
    """The job id: the caller's, or a fresh one."""
    payload: Any
    """The JSON payload, as decoded from its canonical form (the raw bytes of a
    record another client pushed that never decoded, which is a dead letter)."""
    payload_hash: str
    """Hex SHA-256 of the canonical payload; idempotent enqueue compares it."""
    state: JobState
    """Where the job is in its life."""
    attempts: int
    """Handler attempts that have ended (cancelled attempts do not count)."""
    queued: bool
    """Whether the job sits on the ready queue; False for a job stored by
    `Queue.submit` while the queue was full, until room frees."""
    created_at: float
    """When the job was accepted: wall-clock seconds since the epoch (the Redis
    server's clock on Redis)."""
    updated_at: float
    """When the record last changed, in the same terms as *created_at*."""
    last_error: ErrorInfo | None = None
    """The exception that ended the last failed attempt, if any: kept when a later
    attempt completes the job (`ErrorInfo.attempt` says which one failed)."""
    reason: str | None = None
    """Why the job was dropped or dead-lettered, if it was."""
    due_at: float | None = None
    """When a job waiting for its due time (`JobState.SCHEDULED`, or a retry
    waiting out its backoff in the backend) becomes ready, in the same terms as
    *created_at*; None for any other job."""
    result: Any = None
    """What the handler of a completed job returned, decoded from JSON; None
    for any other job, or when the handler returned None (`Queue.result`)."""
    result_error: str | None = None
    """Why a completed job's return value was not stored (not JSON, or larger
    than the pool's *max_result*); None when it was, or there was none."""
    priority: int = 0
    """The job's level (``enqueue(..., priority=...)``), one of `PRIORITIES`."""
    headers: dict[str, str] = attrs.field(factory=dict)
    """The metadata its producer gave the job (``enqueue(..., headers=...)``)."""
    progress: Any = None
    """What the job's handler last reported with `report_progress`, decoded from
    JSON; None until it reports. Kept after the job finishes, and across its
    attempts until the next report."""
    after: tuple[str, ...] = ()
    """The ids of the jobs it was enqueued to run after (``enqueue(...,
    after=[...])``), in the order given; empty for a job that waited for none."""
    unique_key: str | None = None
    """The key no other job held while this one waited or ran (``enqueue(...,
    unique_key=...)``); None for none."""
    rate_key: str | None = None
    """The key whose rate limit its starts count against (``enqueue(...,
    rate_key=...)``); None for none."""


@attrs.frozen
class Job:
    """What a handler receives: one attempt at one job."""

    id: str
    """The job id."""
    payload: Any
    """The JSON payload."""
    attempt: int
    """Which attempt this is, from 1."""
    max_attempts: int | None = None
    """The attempts this job gets, if its producer chose (``enqueue(...,
    max_attempts=...)``); None: the pool's `RetryPolicy` decides."""
    handler_timeout: float | None = None
    """Seconds one attempt of this job may run, if its producer chose
    (``enqueue(..., handler_timeout=...)``); None: the pool's *handler_timeout*."""
    task: str | None = None
    """The job's task name (``enqueue(..., task=...)``): which handler of a pool
    given several (``open_worker_pool(backend, {"send_email": ..., ...})``) runs it."""
    priority: int = 0
    """The job's level (``enqueue(..., priority=...)``), one of `PRIORITIES`: a
    claim takes the highest level first."""
    headers: dict[str, str] = attrs.field(factory=dict)
    """The metadata its producer gave the job (``enqueue(..., headers=...)``): trace
    context, a tenant, where it came from; empty for none."""


def _check_limit(name: str, value: float | None, *, whole: bool) -> None:
    if value is None:
        return
    kinds = int if whole else int | float
    if isinstance(value, bool) or not isinstance(value, kinds) or not value >= 0:
        kind = "a whole number" if whole else "a number of seconds"
        raise ConfigurationError(f"Retention({name}={value!r}): use {kind} >= 0, or None")


@attrs.frozen
class Retention:
    """How long finished records (completed and dropped) are kept.

    The oldest are evicted first once there are more than *max_count*, and any
    older than *max_age* seconds are evicted by the sweeper. An evicted id is
    forgotten: enqueueing it again creates a new job. Dead letters are never
    evicted; requeue or purge them.
    """

    max_count: int | None = 10_000
    """Most finished records kept; ``None`` for no count limit."""
    max_age: float | None = None
    """Seconds a finished record is kept; ``None`` for no age limit."""

    def __attrs_post_init__(self) -> None:
        _check_limit("max_count", self.max_count, whole=True)
        _check_limit("max_age", self.max_age, whole=False)
