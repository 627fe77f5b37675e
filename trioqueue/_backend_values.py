"""What goes in and out of a backend's calls, and the checks every backend makes on it."""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Final, TypeAlias

import attrs

from ._exceptions import (
    ConfigurationError,
    DependencyNotFound,
    IdempotencyConflict,
    JobNotFound,
    QueueFull,
)
from ._records import JobState, Retention

if TYPE_CHECKING:
    from ._records import Job

__all__ = [
    "PLACES",
    "AddMode",
    "AddResult",
    "CancelResult",
    "Claim",
    "NewJob",
    "Receipt",
    "Renewal",
    "SweepReport",
    "checked_capacity",
    "checked_page",
    "checked_place",
    "checked_retention",
    "not_waiting_for_due_time",
]


PLACES: Final = ("ready", "stored", "scheduled", "deferred", "claimed", "dead", "finished")
"""Where a job can be, for `Backend.job_ids`: on the ready queue; stored for want of
room there; waiting for its due time; waiting for the jobs it runs after; claimed by
a worker (running, or waiting out a retry's backoff); a dead letter; finished and
kept by the retention."""


def not_waiting_for_due_time(job_id: str) -> JobNotFound:
    """What `Backend.run_now` raises for a job that is not waiting for its due time."""
    return JobNotFound(
        job_id,
        "jobs waiting for a due time",
        "only a delayed job, or a retry a stopped pool gave back mid-backoff, can run "
        "now (job_ids('scheduled') lists them); a dead letter is requeued instead",
    )


def _check_count(call: str, name: str, value: object) -> None:
    """Raise ValueError, naming *call* and *name*, unless *value* is a whole number >= 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{call}({name}={value!r}): give a whole number >= 0")


def checked_place(place: str, limit: int) -> None:
    """Raise ValueError unless *place* is one of `PLACES` and *limit* a whole number >= 0."""
    if place not in PLACES:
        raise ValueError(f"job_ids({place!r}): a place is one of {', '.join(PLACES)}")
    _check_count("job_ids", "limit", limit)


def checked_page(offset: int, limit: int | None) -> tuple[int, int | None]:
    """*offset* and *limit* of a page of dead letters, checked; ValueError if not whole >= 0."""
    _check_count("dead_letters", "offset", offset)
    if limit is not None:
        _check_count("dead_letters", "limit", limit)
    return offset, limit


def checked_capacity(owner: str, capacity: int) -> int:
    """Return *capacity*, or raise `ConfigurationError` naming *owner* unless it is an int >= 1."""
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
        raise ConfigurationError(
            f"{owner}(capacity={capacity!r}): capacity is the most jobs waiting on the ready "
            "queue; use a whole number >= 1"
        )
    return capacity


def checked_retention(owner: str, retention: Retention | int) -> Retention:
    """Return *retention* as a `Retention`; an int is a count limit."""
    if isinstance(retention, Retention):
        return retention
    if isinstance(retention, bool) or not isinstance(retention, int):
        raise ConfigurationError(
            f"{owner}(retention={retention!r}): pass a trioqueue.Retention, or a whole number "
            "of finished records to keep"
        )
    return Retention(max_count=retention)


class AddMode(enum.Enum):
    """What `Backend.add` does when the ready queue is full."""

    #: Wait for room.
    WAIT = "wait"
    #: Raise `QueueFull` and accept nothing.
    NOWAIT = "nowait"
    #: Store the job with ``queued = False``; it is scheduled when room frees.
    SUBMIT = "submit"


class CancelResult(enum.Enum):
    """What `Queue.cancel` did."""

    #: The job was waiting (ready, stored, scheduled, or between retries): it is
    #: removed and recorded `JobState.CANCELLED` now.
    CANCELLED = "cancelled"
    #: A worker holds the job (running it, about to, or sleeping before a retry): the
    #: worker cancels it when it next renews its claims (`WorkerPool`), and records it
    #: cancelled. A handler that finishes first completes the job. On a stream source,
    #: also an entry its group has not read yet: it ends, cancelled, when read.
    REQUESTED = "requested"
    #: The job had finished already (completed, dead-lettered, dropped or cancelled):
    #: it is left as it was.
    FINISHED = "finished"


@attrs.frozen
class NewJob:
    """A job on its way in, already encoded and hashed by the producer."""

    id: str
    """The caller's id, or a fresh one."""
    encoded: bytes
    """The canonical JSON of the payload."""
    payload_hash: str
    """Hex SHA-256 of *encoded*."""
    delay: float | None = None
    """Seconds from its acceptance, on the backend's clock, until the job is due;
    None (or *at*) for a job that is ready at once."""
    at: float | None = None
    """When the job is due, in wall-clock seconds since the epoch as the backend's
    clock reads them (the Redis server's); None (or *delay*) for a job ready at once.
    At most one of *delay* and *at* is set."""
    max_attempts: int | None = None
    """Attempts this job gets, overriding the pool's `RetryPolicy`; None: the pool's."""
    handler_timeout: float | None = None
    """Seconds one attempt may run, overriding the pool's *handler_timeout*; None: the
    pool's."""
    task: str | None = None
    """The task name: which handler of a pool given several runs the job."""
    priority: int = 0
    """The job's level, one of `PRIORITIES`: a claim takes the highest level first."""
    headers: dict[str, str] | None = None
    """The producer's metadata for the job (`Job.headers`); None for none."""
    after: tuple[str, ...] = ()
    """The ids of the jobs it runs after (`JobState.DEFERRED`); empty for none."""
    unique_key: str | None = None
    """While a job with this key waits or runs, another with it is not added (see
    `Queue.enqueue`); None for none."""
    debounce: bool = False
    """With *unique_key*: the job waits out its *delay*, and a newer job with its key
    replaces it until then."""
    rate_key: str | None = None
    """The key whose rate limit its starts count against (`RateLimits.per_key`);
    None for none."""


@attrs.frozen
class Receipt:
    """What an enqueue returns."""

    id: str
    """The job's id (a fresh one when none was given)."""
    deduplicated: bool
    """True when the job already existed with the same payload and nothing was added;
    or when a job with the same *unique_key* was waiting or running, which this
    receipt then names (*id* is its id)."""
    queued: bool
    """Whether the job is on the ready queue; False when `Queue.submit` stored it
    while the queue was full (it is scheduled when room frees), or while it waits
    for its due time."""
    state: JobState = JobState.RECEIVED
    """The job's state as the enqueue left it: `JobState.FAILED` for one that became
    a dead letter at once (a job it runs after had failed, been dropped or
    cancelled); for a duplicate, or the job holding the *unique_key*, whatever state
    that job is in (running, completed...)."""

    @property
    def scheduled(self) -> bool:
        """True when the job waits for its due time (*state* is `JobState.SCHEDULED`)."""
        return self.state is JobState.SCHEDULED

    @property
    def deferred(self) -> bool:
        """True when the job waits for the jobs it runs after (`JobState.DEFERRED`)."""
        return self.state is JobState.DEFERRED


AddResult: TypeAlias = Receipt | IdempotencyConflict | QueueFull | DependencyNotFound
"""One job's fate in a bulk enqueue: its receipt, or the error a single enqueue raises."""


@attrs.frozen
class Claim:
    """One job claimed by one pool; the token fences out stale owners."""

    job: Job
    """What the handler receives."""
    token: str
    """Identifies this claim; outcomes with an outdated token are ignored."""
    ready_at: float
    """When the job last became ready, on the backend's clock."""
    suspect: bool = False
    """A job that was held by workers that died, more than once: it may be what kills
    them. A suspect comes alone; the pool starts it once no other handler runs, and
    claims nothing more until it is done."""


@attrs.frozen
class Renewal:
    """What one `Backend.renew` found."""

    lost: frozenset[str] = frozenset()
    """The tokens of the claims no longer held (their lease ran out and the job went
    to another worker, or a late outcome of another run finished it): their leases
    were not extended."""
    cancel: frozenset[str] = frozenset()
    """The tokens of claims still held whose jobs were cancelled (`Backend.cancel`):
    the pool stops them and ends them with `Backend.cancel_claim`."""


@attrs.frozen
class SweepReport:
    """What one `Backend.sweep` did."""

    scheduled: int = 0
    """Jobs stored with ``queued = False`` that were put on the ready queue."""
    recovered: int = 0
    """Claims whose lease ran out that were put back."""
    evicted: int = 0
    """Finished records forgotten because of their age."""
    due: int = 0
    """Jobs whose due time came that were put on the ready queue."""
