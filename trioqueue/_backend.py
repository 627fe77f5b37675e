"""The backend protocol: everything the pool and the producer ask of storage.

The pool and `Queue` know only `Backend`. A backend keeps the jobs (ready queue,
records, claims, dead letters) and moves them between states; the pool decides
*which* move to make (ack, retry, dead-letter, drop) and when.

Every method is atomic with respect to cancellation: if it raises `trio.Cancelled`
it changed nothing, and if it returns, the whole change happened. `Backend.add_many`
is atomic job by job: cancelled, it accepted the jobs before the one it waited on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Sequence
    from contextlib import AbstractAsyncContextManager

    from trio.abc import ReceiveChannel

    from ._backend_values import (
        AddMode,
        AddResult,
        CancelResult,
        Claim,
        NewJob,
        Receipt,
        Renewal,
        SweepReport,
    )
    from ._metrics import Metrics, MetricsSnapshot
    from ._rate import RateLimits
    from ._records import ErrorInfo, JobRecord

__all__ = ["Backend"]


@runtime_checkable
class Backend(Protocol):
    """Storage for jobs, shared by producers (`Queue`) and worker pools.

    Implemented by `MemoryBackend`, `RedisBackend` and `ShardedBackend`;
    third-party backends implement it too and can check themselves with the
    contract tests.

    Cancellation: every async method is a Trio checkpoint. Cancelled before it
    changes anything, it raises `trio.Cancelled` and has changed nothing; once
    its change is under way it finishes it (on Redis a script sent is waited
    for, at most the I/O timeout) and returns, so a call that raises
    `trio.Cancelled` made no change. The calls that work in steps say so in
    their own entries, and keep the steps done before a cancellation: `add_many`
    (each job in turn), `sweep` and `purge_dead` (slices), and on a sharded
    queue the calls that go shard by shard. A claim once made always reaches
    the caller of `claim`; a wait it cancels takes nothing.
    """

    @property
    def capacity(self) -> int:
        """Most jobs the ready queue holds."""
        ...

    @property
    def metrics(self) -> Metrics:
        """Counters and histograms of this process (all of them, for an embedded backend)."""
        ...

    @property
    def default_lease(self) -> float:
        """Seconds a claim holds without renewal, when the pool does not say."""
        ...

    @property
    def redelivers(self) -> bool:
        """Whether a job whose handler was interrupted may run again (at-least-once).

        False for an at-most-once backend: then a pool never puts back a job whose
        handler started without an outcome; it dead-letters it with the reason.
        """
        ...

    def now(self) -> float:
        """The backend's clock, in seconds, as used for record timestamps."""
        ...

    async def add(self, job: NewJob, mode: AddMode) -> Receipt:
        """Accept *job*, or return the existing job with the same id and payload.

        Raises:
            IdempotencyConflict: The id exists with another payload.
            QueueFull: The queue is full and *mode* is `AddMode.NOWAIT`.

        Cancellation: a checkpoint; cancelled, before it stored the job or while it
        waits for room (`AddMode.WAIT`), it has accepted nothing. Once the job is
        being stored it finishes.
        """
        ...

    async def add_many(self, jobs: Sequence[NewJob], mode: AddMode) -> list[AddResult]:
        """Accept each of *jobs* in order as `add` would; one result per job, in order.

        A job whose id exists with another payload gets the `IdempotencyConflict`
        `add` would raise, and with `AddMode.NOWAIT` one that finds the queue full
        gets a `QueueFull`; the other jobs are accepted all the same. With
        `AddMode.WAIT` it waits for room job by job: if cancelled, the jobs before
        the one it waited on were accepted (enqueue them again with the same ids to
        finish: those are deduplicated).

        Cancellation: a checkpoint; it works job by job, as `add` does, so a
        cancelled call keeps the jobs accepted before the cancellation.
        """
        ...

    async def claim(self, max_jobs: int, *, lease: float, block: float) -> list[Claim]:
        """Claim up to *max_jobs* ready jobs, waiting up to *block* seconds for the first.

        Each claim holds for *lease* seconds unless renewed. May return fewer
        jobs, or none, early: in particular when the backend becomes idle.
        A suspect (`Claim.suspect`) always comes alone.

        Cancellation: a checkpoint; cancelled while it waits for a job, it has
        claimed nothing. A claim once made is returned, whatever cancellation
        arrives meanwhile: the caller meets that at its next checkpoint.
        """
        ...

    async def renew(self, claims: Sequence[Claim], *, lease: float) -> Renewal:
        """Extend the leases of *claims* still held to *lease* seconds from now.

        Returns:
            The claims no longer held, and those whose jobs were cancelled.

        Cancellation: a checkpoint; cancelled, it has changed nothing. Once its change
        is under way it finishes it.
        """
        ...

    async def cancel(self, job_id: str) -> CancelResult:
        """Cancel job *job_id*: at once if it waits, else by asking its worker to.

        A job nobody holds (ready, stored, scheduled, waiting out a backoff given
        back) is removed and recorded `JobState.CANCELLED`. A claimed one is marked:
        `renew` reports it to its pool (`Renewal.cancel`), and a claim of it given
        back (`release`, `requeue`) or recovered (`sweep`) ends it cancelled
        instead of putting it back.

        Raises:
            JobNotFound: No job *job_id* is known.

        Cancellation: a checkpoint; cancelled, it has changed nothing. Once its change
        is under way it finishes it.
        """
        ...

    async def set_progress(self, claim: Claim, progress: bytes) -> bool:
        """Keep *progress* (canonical JSON) on the claimed job's record (`JobRecord.progress`).

        False (and nothing changed) if the claim is no longer held. Not a state
        change: the record's ``updated_at`` stays.

        Cancellation: a checkpoint; cancelled, it has changed nothing. Once its change
        is under way it finishes it.
        """
        ...

    async def pause(self) -> None:
        """Pause the queue: claims take nothing until `resume`; jobs still come in.

        Jobs already claimed run to their outcomes as usual (a retry goes back to
        wait), so a paused queue's pools finish what they hold and then wait. On
        Redis the pause is stored with the queue: every process using it stops
        claiming at once, and it lasts until someone resumes it. Pausing a paused
        queue changes nothing.

        Cancellation: a checkpoint; cancelled, it has changed nothing.
        """
        ...

    async def resume(self) -> None:
        """Let claims take jobs again; resuming a queue not paused changes nothing.

        A pool waiting on the queue claims again within its *poll_interval*.

        Cancellation: a checkpoint; cancelled, it has changed nothing.
        """
        ...

    async def is_paused(self) -> bool:
        """Whether the queue is paused (`pause`).

        Cancellation: a checkpoint; it only reads, so a cancelled call changed nothing.
        """
        ...

    async def set_rate_limits(self, limits: RateLimits) -> None:
        """Limit how fast claims start jobs, replacing the queue's limits.

        `RateLimits.queue` bounds every claim; `RateLimits.per_key` bounds the jobs of
        each ``rate_key`` (`NewJob.rate_key`) on its own. A claim takes no more jobs
        than the queue limit allows now, and waits within its *block* for the next
        start it allows. A job over its key's limit goes back to wait
        (`JobState.SCHEDULED`) for the start its key gives it, and the claim goes on
        to other jobs. On Redis the limits are stored with the queue and kept across
        every process using it.

        Cancellation: a checkpoint; cancelled, it has changed nothing.
        """
        ...

    async def rate_limits(self) -> RateLimits:
        """The queue's rate limits (`set_rate_limits`); none set: ``RateLimits()``.

        Cancellation: a checkpoint; it only reads, so a cancelled call changed nothing.
        """
        ...

    async def cancel_claim(self, claim: Claim) -> bool:
        """End a claim whose job was cancelled: the job is `JobState.CANCELLED`.

        False (and nothing changed) if the claim is stale.

        Cancellation: a checkpoint; cancelled, it has changed nothing. Once its change
        is under way it finishes it.
        """
        ...

    async def ack(
        self, claim: Claim, result: bytes | None = None, *, result_error: str | None = None
    ) -> bool:
        """Complete the job. False (and nothing changed) if the claim is stale.

        *result* is the handler's return value as canonical JSON (None when it
        returned None), kept on the record (`JobRecord.result`); *result_error*
        says why a return value could not be kept (`JobRecord.result_error`).

        Cancellation: a checkpoint; cancelled, it has changed nothing. Once its change
        is under way it finishes it.
        """
        ...

    async def retry_later(
        self, claim: Claim, error: ErrorInfo | None, *, delay: float = 0.0
    ) -> bool:
        """End an attempt that will be retried; the claim keeps the job until `requeue`.

        *error* is None when the handler asked for the retry by raising `Retry`.
        The next attempt is due *delay* seconds from now: the backend keeps that
        due time (the record's `JobRecord.due_at`), so a job released mid-backoff
        (`release`) or recovered from a dead owner (`sweep`) waits out the rest of
        its backoff among the delayed jobs instead of running early.

        Cancellation: a checkpoint; cancelled, it has changed nothing. Once its change
        is under way it finishes it.
        """
        ...

    async def requeue(self, claim: Claim) -> bool:
        """Put a job waiting to retry back on the ready queue (or stored unqueued if full).

        Cancellation: a checkpoint; cancelled, it has changed nothing. Once its change
        is under way it finishes it.
        """
        ...

    async def dead_letter(self, claim: Claim, error: ErrorInfo | None, reason: str) -> bool:
        """End the last attempt and move the job to the dead letters.

        Cancellation: a checkpoint; cancelled, it has changed nothing. Once its change
        is under way it finishes it.
        """
        ...

    async def drop(self, claim: Claim, reason: str) -> bool:
        """End the attempt and drop the job.

        Cancellation: a checkpoint; cancelled, it has changed nothing. Once its change
        is under way it finishes it.
        """
        ...

    async def release(self, claims: Sequence[Claim]) -> int:
        """Put unfinished claims back at once, without counting an attempt; return how many.

        A job waiting to retry whose due time is ahead is stored until then.

        Cancellation: a checkpoint; cancelled, it has changed nothing. Once its change
        is under way it finishes it.
        """
        ...

    async def sweep(self) -> SweepReport:
        """Schedule stored jobs when there is room, recover expired claims, evict old records.

        On Redis it also makes dead letters of the followers that a failed, dropped
        or cancelled job left for later (its end makes a slice of them at once).

        Cancellation: a checkpoint; it works in slices, each finished once begun, so
        a cancelled sweep keeps the slices done before the cancellation (the next
        sweep does the rest).
        """
        ...

    async def stats(self) -> MetricsSnapshot:
        """Every counter and true gauge of the queue, as all its users see it.

        Cancellation: a checkpoint; it only reads, so a cancelled call changed nothing.
        """
        ...

    async def pending(self) -> int:
        """Jobs accepted and not finished: waiting, claimed, or waiting to retry.

        Cancellation: a checkpoint; it only reads, so a cancelled call changed nothing.
        """
        ...

    async def status(self, job_id: str) -> JobRecord | None:
        """The record of *job_id*, or None if unknown or evicted.

        Cancellation: a checkpoint; it only reads, so a cancelled call changed nothing.
        """
        ...

    def finished(
        self, job_ids: Sequence[str]
    ) -> AbstractAsyncContextManager[ReceiveChannel[tuple[str, JobRecord | None]]]:
        """A channel of each of *job_ids* with its record, as it finishes, in that order.

        Finished means completed, dropped or dead-lettered (or cancelled);
        jobs finished already come first. An id the backend does not know (never
        enqueued, or forgotten after the retention) comes with None, at once.
        Waiting must not poll in a tight loop. A context manager, as
        `trio.as_safe_channel` makes one: leaving it stops the wait::

            async with backend.finished(ids) as finished:
                async for job_id, record in finished:
                    ...
        """
        ...

    async def job_ids(self, place: str, *, limit: int = 100) -> list[str]:
        """The ids of up to *limit* jobs in *place* (one of `PLACES`), next in turn first.

        Ready jobs in the order workers take them; stored ones in the order they go
        on; scheduled ones soonest due first; deferred ones (waiting for the jobs
        they run after) in the order they came; claimed ones longest held first; dead
        letters and finished records oldest first. On Redis, elements another
        program pushed that no worker has claimed yet have no id, and are left out;
        so are a stream's entries its group has not read.

        Raises:
            ValueError: *place* is not one of `PLACES`, or *limit* is negative.

        Cancellation: a checkpoint; it only reads, so a cancelled call changed nothing.
        """
        ...

    async def dead_letters(self, *, offset: int = 0, limit: int | None = None) -> list[JobRecord]:
        """The dead letters, oldest first: *limit* of them (None: all) after the first *offset*.

        A page is as of its call: a letter requeued or purged between two calls
        moves the later ones one place up, so the next page may start one past
        a letter not yet seen; new dead letters go to the end, and move nothing.

        Raises:
            ValueError: *offset* or *limit* is negative, or not a whole number.

        Cancellation: a checkpoint; it only reads, so a cancelled call changed nothing.
        """
        ...

    async def purge_dead(self, job_id: str | None = None) -> int:
        """Forget one dead letter, or all of them; return how many were forgotten.

        Cancellation: a checkpoint; forgetting all of them works in slices, each
        finished once begun, so a cancelled call keeps the slices done before it.
        """
        ...

    async def requeue_dead(self, job_id: str) -> JobRecord:
        """Put a dead letter back on the queue with fresh attempts.

        Raises:
            JobNotFound: *job_id* is not a dead letter.

        Cancellation: a checkpoint; cancelled, it has changed nothing. Once its change
        is under way it finishes it.
        """
        ...

    async def run_now(self, job_id: str) -> JobRecord:
        """Make a job that waits for its due time due now; return its record.

        A delayed job, or a retry a stopped pool gave back mid-backoff (the
        ``scheduled`` place of `job_ids`), goes on the ready queue at once, or, when
        the queue is full, stays stored and goes on first as room frees.

        Raises:
            JobNotFound: *job_id* is not waiting for a due time.

        Cancellation: a checkpoint; cancelled, it has changed nothing. Once its change
        is under way it finishes it.
        """
        ...

    async def mark_schedule(self, name: str, tick: float) -> None:
        """Record that schedule *name*'s tick at *tick* (seconds since the epoch) is stored.

        A later tick recorded already stays (see `open_scheduler`).

        Cancellation: a checkpoint; cancelled, it has changed nothing. Once its change
        is under way it finishes it.
        """
        ...

    async def schedule_marks(self) -> dict[str, float]:
        """Each schedule's latest tick stored in the queue (`mark_schedule`).

        Cancellation: a checkpoint; it only reads, so a cancelled call changed nothing.
        """
        ...
