"""One job as the memory backend holds it, and what it costs the memory budget."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Final

import attrs

from ..._records import ErrorInfo, JobRecord, JobState, Retention, check_transition

if TYPE_CHECKING:
    from ..._backend_values import NewJob

__all__ = [
    "CANCELLED_HELD",
    "CANCELLED_WAITING",
    "CLAIMED",
    "DEFAULT_RETENTION",
    "ENDED_HOW",
    "RECORD_BYTES",
    "Entry",
    "after_failed",
    "cost",
    "due_time",
    "replaced_by",
]

RECORD_BYTES: Final = 1024  # MemoryBackend.RECORD_COST (its docstring says why)
DEFAULT_RETENTION: Final = Retention()
CLAIMED: Final = frozenset({JobState.PROCESSING, JobState.FAILED_RETRY})  # held by a claim
CANCELLED_WAITING: Final = "cancelled while it waited for a worker"
CANCELLED_HELD: Final = "cancelled while a worker held it"


ENDED_HOW: Final = {
    JobState.FAILED: "failed (it is a dead letter)",
    JobState.DROPPED: "was dropped",
    JobState.CANCELLED: "was cancelled",
}
"""How a job that ended without completing ended, as its followers' reasons say it."""


def after_failed(parent: str, how: str) -> str:
    """The reason of a job that became a dead letter because job *parent* ended so (*how*).

    The Redis backend's scripts word it the same (``lua/prelude/5-endings.lua``).
    """
    return f"it was to run after job {parent!r}, which {how}; requeue it to run it all the same"


def replaced_by(job_id: str) -> str:
    """The reason of a debounced job a newer one with its key replaced (also in add.lua)."""
    return f"replaced by job {job_id!r}, enqueued later with the same unique_key"


def due_time(job: NewJob, now: float) -> float | None:
    """When *job* is due on Trio's clock, if that is after *now*; else None (ready now)."""
    if job.delay is not None:
        due = now + job.delay
    elif job.at is not None:
        due = now + (job.at - time.time())  # the wall clock's distance, on Trio's clock
    else:
        return None
    return due if due > now else None


@attrs.define(eq=False, slots=True)
class Entry:
    """The mutable record of one job; `MemoryBackend` hands out frozen copies."""

    id: str
    encoded: bytes
    payload_hash: str
    created_at: float
    updated_at: float
    ready_at: float
    state: JobState = JobState.RECEIVED
    attempts: int = 0
    queued: bool = False
    last_error: ErrorInfo | None = None
    reason: str | None = None
    token: str | None = None  # the live claim, if any
    # claims numbered up to this one belong to an earlier life of the job (before it
    # was requeued from the dead letters, or purged and enqueued anew)
    life_from: int = 0
    lease_until: float = 0.0
    extended_until: float | None = None  # the one more lease a silence gave it
    # while it waits for its due time (delayed, or a retry's backoff): when, on Trio's clock
    due: float | None = None
    max_attempts: int | None = None  # the producer's per-job options (NewJob)
    handler_timeout: float | None = None
    task: str | None = None
    priority: int = 0
    result: bytes | None = None  # the handler's return value, as JSON
    result_error: str | None = None
    progress: bytes | None = None  # what the handler last reported, as JSON
    headers: dict[str, str] = attrs.field(factory=dict)  # the producer's metadata
    cancel_requested: bool = False  # cancelled while claimed: its pool stops it
    after: tuple[str, ...] = ()  # the jobs it was enqueued to run after
    waiting_on: int = 0  # while DEFERRED: how many of them have not completed
    # the deferred jobs that run after it, each once, in the order they came
    followers: dict[str, None] = attrs.field(factory=dict)
    unique_key: str | None = None  # held in MemoryBase._unique while the job waits or runs
    debounce: bool = False  # a newer job with its key replaces it while it is scheduled
    rate_key: str | None = None  # its starts count against this key's rate limit
    promised: bool = False  # it waits for a start its rate key promised it

    def move(self, target: JobState, now: float) -> None:
        check_transition(self.id, self.state, target)
        self.state = target
        self.updated_at = now

    def record(self, wall_offset: float) -> JobRecord:
        """The record, its times moved from Trio's clock to the wall clock by *wall_offset*."""
        return JobRecord(
            id=self.id,
            payload=json.loads(self.encoded),
            payload_hash=self.payload_hash,
            state=self.state,
            attempts=self.attempts,
            queued=self.queued,
            created_at=self.created_at + wall_offset,
            updated_at=self.updated_at + wall_offset,
            last_error=self.last_error,
            reason=self.reason,
            due_at=None if self.due is None else self.due + wall_offset,
            result=None if self.result is None else json.loads(self.result),
            result_error=self.result_error,
            priority=self.priority,
            progress=None if self.progress is None else json.loads(self.progress),
            headers=dict(self.headers),
            after=self.after,
            unique_key=self.unique_key,
            rate_key=self.rate_key,
        )


def cost(entry: Entry) -> int:
    """What *entry* counts for in a `MemoryBackend`'s budget."""
    extra = len(entry.result or b"") + len(entry.progress or b"") + headers_bytes(entry.headers)
    extra += sum(len(parent) for parent in entry.after) + len(entry.unique_key or "")
    extra += len(entry.rate_key or "")
    return len(entry.encoded) + extra + RECORD_BYTES


def headers_bytes(headers: dict[str, str] | None) -> int:
    """What a job's headers count for in a `MemoryBackend`'s budget."""
    return sum(len(name.encode()) + len(value.encode()) for name, value in (headers or {}).items())
