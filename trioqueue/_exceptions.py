"""Every error trioqueue raises, and the two signals a handler may raise.

Each error subclasses `TrioqueueError`, so callers can catch broadly, and the
builtin that fits, so they can also catch narrowly. Messages say what to do.
"""

from __future__ import annotations

import math

from ._util import MAX_DELAY

__all__ = [
    "BackendOutOfMemory",
    "BackendRefused",
    "BackendUnavailable",
    "ConfigurationError",
    "Drop",
    "IdempotencyConflict",
    "InvalidTransition",
    "JobNotFound",
    "MemoryFull",
    "QueueFull",
    "Retry",
    "TrioqueueError",
    "UnknownTask",
]


class TrioqueueError(Exception):
    """Base class of every error trioqueue raises."""


class QueueFull(TrioqueueError):
    """`Queue.try_enqueue` found the ready buffer full; nothing was accepted.

    Wait with `Queue.enqueue`, or accept without waiting with `Queue.submit`.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        super().__init__(
            f"the queue is full ({capacity} ready jobs); nothing was accepted. Use enqueue() "
            "to wait for room, submit() to store the job and schedule it later, or raise "
            "the backend's capacity"
        )


def _bytes_text(count: int) -> str:
    """*count* bytes the way a person reads them: 512 bytes, 64 KiB, 1.5 MiB."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:.1f}".removesuffix(".0") + f" {unit}"
    return f"{count} bytes"


class MemoryFull(QueueFull):
    """A `MemoryBackend` holds all the bytes its *max_bytes* allows; nothing was accepted.

    Its unfinished jobs and dead letters fill the budget (finished records give
    way to new jobs first), or the job alone is larger than all of it.
    `Queue.enqueue` waits instead, unless the job can never fit; workers
    finishing jobs, or purging dead letters, make room. A subclass of `QueueFull`, so code
    that handles a full queue handles this too.
    """

    def __init__(self, capacity: int, max_bytes: int, size: int) -> None:
        TrioqueueError.__init__(
            self,
            f"the memory backend holds as much as its max_bytes "
            f"({_bytes_text(max_bytes)}) allows, and this job takes {_bytes_text(size)} "
            "more; nothing was accepted. Use enqueue() to wait for workers to finish "
            "jobs, purge dead letters, or give the backend a larger max_bytes "
            "(trioqueue serve --max-memory)",
        )
        self.capacity = capacity
        self.max_bytes = max_bytes
        self.size = size


class IdempotencyConflict(TrioqueueError, ValueError):
    """A job with this id already exists with a different payload.

    The existing job is untouched. Use a new id for a different payload.
    """

    def __init__(self, job_id: str, existing_hash: str, new_hash: str) -> None:
        self.job_id = job_id
        self.existing_hash = existing_hash
        self.new_hash = new_hash
        super().__init__(
            f"job {job_id!r} already exists with a different payload (stored hash "
            f"{existing_hash[:12]}…, new hash {new_hash[:12]}…); the stored job is "
            "unchanged. Give a different payload a new id"
        )


class InvalidTransition(TrioqueueError, RuntimeError):
    """A job record was asked to move between two states that are not linked.

    This is a bug in trioqueue or in a third-party backend; please report it.
    """

    def __init__(self, job_id: str, source: str, target: str) -> None:
        self.job_id = job_id
        self.source = source
        self.target = target
        super().__init__(
            f"job {job_id!r} cannot move from {source} to {target}; this is a bug in "
            "the backend, please report it with this message"
        )


class JobNotFound(TrioqueueError, LookupError):
    """No job with this id is held (never enqueued, or evicted after retention)."""

    def __init__(self, job_id: str, where: str = "jobs", why: str | None = None) -> None:
        self.job_id = job_id
        self.where = where
        super().__init__(
            f"no job {job_id!r} among the {where}; "
            + (
                why
                or "check the id (Queue.job_ids lists them by place); a finished job is "
                "forgotten once the backend's retention has passed"
            )
        )


class DependencyNotFound(JobNotFound):
    """A job names, in ``after=``, a job the backend does not know; it was not accepted."""

    def __init__(self, job_id: str, parent: str) -> None:
        #: The job that was not accepted.
        self.child = job_id
        super().__init__(
            parent,
            f"queue's jobs, for job {job_id!r} to run after",
            "enqueue that job first (a chain in one batch: Queue.enqueue_chain), or check "
            "the id; a finished job is forgotten once the backend's retention has passed, "
            f"so keep finished records longer for jobs that run after it. Job {job_id!r} "
            "was not accepted",
        )


class UnknownTask(TrioqueueError, LookupError):
    """A job names a task that its worker has no handler for (see `dispatch`).

    Raised inside the attempt, so the job is retried like any failure (another
    worker of a rolling deploy may have the handler) and otherwise ends as a dead
    letter whose error names the task and the handlers the worker had.
    """


class ConfigurationError(TrioqueueError, ValueError):
    """A setting is out of range; the message names the setting and the fix."""


class BackendUnavailable(TrioqueueError, ConnectionError):
    """The backend could not be reached (a dropped connection, a restarting server).

    A worker pool retries by itself with backoff, logging one line per step of
    it (see `open_worker_pool`), and raises this error only when its
    ``give_up_after`` has passed; a producer's call fails with this error and
    accepted nothing it did not report.

    Args:
        where: The backend's address, without its password.
        detail: What went wrong, e.g. the client's error.
        advice: What the message tells the caller to do; by default, to check
            the backend and retry the call once it is back.

    Attributes:
        where: The backend's address, without its password.
        detail: The cause alone (``Connection refused``), without the advice to
            callers that the message adds: for log lines of a process that
            retries by itself.
    """

    def __init__(self, where: str, detail: str, *, advice: str | None = None) -> None:
        self.where = where
        self.detail = detail
        if advice is None:
            advice = (
                "check that it is up and reachable. Worker pools retry by themselves; "
                "retry this call when it is back"
            )
        super().__init__(f"the backend at {where} could not be reached ({detail}); {advice}")


class BackendRefused(BackendUnavailable):
    """The backend answered, but refused the call.

    Redis is out of memory, or a key of the queue holds something trioqueue did
    not put there (changed by hand).

    Worker pools treat a refusal like an outage: they log it and retry with
    backoff, so a pool never crashes on one. A producer's call fails with it.
    """

    def __init__(self, where: str, message: str) -> None:
        self.where = where
        self.detail = message  # the whole message: what was refused, and the fix
        ConnectionError.__init__(self, message)


class BackendOutOfMemory(BackendRefused):
    """Redis is out of memory (its ``maxmemory``): it refuses new jobs, nothing was enqueued.

    Workers keep draining the queue meanwhile (claims and outcomes are allowed
    on a full Redis). Free memory, or raise ``maxmemory``, then retry.
    """

    def __init__(self, where: str, limit: str) -> None:
        super().__init__(
            where,
            f"Redis at {where} is out of memory (maxmemory {limit}); nothing was enqueued. "
            "Workers keep draining the queue meanwhile. Free memory (purge dead letters, "
            "keep fewer finished records with Retention) or raise maxmemory, then retry",
        )


class Retry(Exception):
    """Raise from a handler to run the job again.

    The attempt counts towards `RetryPolicy.max_attempts`; when none are left the
    job is dead-lettered.

    Args:
        delay: Seconds to wait before the next attempt. ``None`` puts the job
            back on the queue at once. The backend keeps the due time: a pool
            that stops or crashes meanwhile does not make the attempt early.
    """

    def __init__(self, delay: float | None = None) -> None:
        if delay is not None and (
            isinstance(delay, bool)
            or not isinstance(delay, int | float)
            or not math.isfinite(delay)
            or not 0 <= delay <= MAX_DELAY
        ):
            raise ConfigurationError(
                f"Retry(delay={delay!r}): give a finite number of seconds from 0 to 100 years "
                f"({MAX_DELAY:.0f}), or None to retry at once"
            )
        self.delay = delay
        super().__init__(f"retry requested (delay={delay!r})")


class Drop(Exception):
    """Raise from a handler to give up on the job without dead-lettering it.

    The job ends in state ``DROPPED`` with the reason kept on its record.

    Args:
        reason: Why the job was dropped, kept on the record.
    """

    def __init__(self, reason: str = "") -> None:
        self.reason = reason
        super().__init__(reason or "dropped by the handler")
