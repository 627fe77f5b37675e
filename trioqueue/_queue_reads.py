"""The producer's reads and repairs: results, records, counts, cancels and dead letters."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio
from outcome import Error, Value

from ._backend_values import CancelResult, Receipt
from ._exceptions import JobNotFound
from ._records import JobState
from ._result_errors import JobCancelled, JobDropped, JobFailed, NoResult, ResultNotStored

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, Iterable

    from outcome import Maybe

    from ._backend import Backend
    from ._metrics import MetricsSnapshot
    from ._records import JobRecord

__all__ = ["QueueReads"]


def _checked_id(call: str, job_id: object) -> str:
    """*job_id* if it is a str; else a TypeError that says what to pass."""
    if isinstance(job_id, str):
        return job_id
    hint = "pass receipt.id" if isinstance(job_id, Receipt) else "pass the job's id"
    raise TypeError(f"Queue.{call}: a job id is a str, not {type(job_id).__name__}; {hint}")


def _value(job_id: str, record: JobRecord | None) -> Any:
    """A finished job's result, or the error that says why it has none."""
    if record is None:
        raise JobNotFound(
            job_id,
            why="it was never enqueued, or its record was forgotten under the backend's "
            "retention; keep finished records longer (Retention) to read results later",
        )
    if record.state is JobState.FAILED:
        raise JobFailed(record)
    if record.state is JobState.DROPPED:
        raise JobDropped(record)
    if record.state is JobState.CANCELLED:
        raise JobCancelled(record)
    if record.result_error is not None:
        raise ResultNotStored(record)
    return record.result


class QueueReads:
    """`Queue` methods that read what a backend holds, cancel a job or recover dead letters."""

    _backend: Backend  # set by Queue.__init__

    async def result(self, job_id: str) -> Any:
        """Wait until job *job_id* finishes, and return what its handler returned.

        A job finished already answers at once. The value is the handler's return
        value as JSON gives it back (a tuple comes back a list); None when it
        returned None. Waiting takes no polling loop: the memory backend wakes the
        call when the job finishes, and Redis sends it one event per finished job
        that someone waits for (see `RedisBackend`).

        Cancellable, as any Trio wait (``with trio.fail_after(5): await
        queue.result(job_id)``); cancelling the wait does not touch the job.

        Raises:
            TypeError: *job_id* is not a str (given a `Receipt`, pass its ``id``).
            JobNotFound: No job *job_id* is known: never enqueued, or its record
                was forgotten under the backend's `Retention` (keep records longer
                to read results later).
            JobFailed: The job is a dead letter; the error carries its record,
                with the last error's type, message and traceback.
            JobDropped: The handler dropped the job (`Drop`).
            ResultNotStored: The job completed, but its return value could not
                be stored (not JSON, or over the pool's *max_result*).
        """
        async with self._backend.finished([_checked_id("result", job_id)]) as finished:
            async for _, record in finished:
                return _value(job_id, record)
        raise JobNotFound(job_id)  # pragma: no cover - finished() gives every id once

    @trio.as_safe_channel
    async def results(self, job_ids: Iterable[str]) -> AsyncGenerator[tuple[str, Maybe[Any]], None]:
        """A channel of each of *job_ids* with its outcome, as the jobs finish.

        First finished, first given. Each outcome is an ``outcome.Value`` holding
        the return value, or an ``outcome.Error`` holding what `result` would
        raise (`JobFailed`, …); ``.unwrap()`` gives the value or raises the error.
        A context manager, as Trio's `trio.as_safe_channel` makes one: leaving it
        (a ``break``, a cancellation) stops the wait at once::

            async with queue.results(ids) as results:
                async for job_id, outcome in results:
                    try:
                        print(job_id, outcome.unwrap())
                    except trioqueue.NoResult as exc:
                        print(job_id, "finished without a value:", exc)

        Raises:
            BackendUnavailable: The backend could not be reached.
        """
        ids = [_checked_id("results", job_id) for job_id in job_ids]
        async with self._backend.finished(ids) as finished:
            async for job_id, record in finished:
                try:
                    value = _value(job_id, record)
                except (NoResult, JobNotFound) as exc:
                    got: Maybe[Any] = Error(exc)
                else:
                    got = Value(value)
                yield job_id, got

    async def cancel(self, job_id: str) -> CancelResult:
        """Cancel job *job_id*: it will not run (again), and ends `JobState.CANCELLED`.

        A job waiting for a worker (ready, stored, scheduled, or waiting out a
        retry's backoff in the backend) is removed at once: `CancelResult.CANCELLED`.
        A job a worker holds (running, prefetched, or sleeping before a retry) is
        marked, and `CancelResult.REQUESTED` is returned at once: its pool hears of
        it when it next renews its claims, within its sweep interval (1 s by
        default) or a third of its lease, whichever comes first, from whichever
        process runs it. The handler then sees `trio.Cancelled` (its ``finally``
        blocks run), and the job is recorded cancelled, not failed: it is not
        retried. A handler that finishes first completes the job. (On a stream
        source, an entry its group has not read yet is `CancelResult.REQUESTED` too: the stream
        keeps it for its other groups, and it ends when this group reads it.) A
        finished job
        is left alone: `CancelResult.FINISHED`. `result` raises `JobCancelled` for
        a cancelled job; wait on it to know when a requested cancel is done.

        Raises:
            TypeError: *job_id* is not a str (given a `Receipt`, pass its ``id``).
            JobNotFound: No job *job_id* is known (never enqueued, or forgotten
                under the retention).
        """
        return await self._backend.cancel(_checked_id("cancel", job_id))

    async def stats(self) -> MetricsSnapshot:
        """Every counter and gauge of the queue, as all its users see it.

        Always checkpoints; it only reads, so a cancellation changes nothing.
        """
        return await self._backend.stats()

    async def status(self, job_id: str) -> JobRecord | None:
        """The record of *job_id*, or None if it is unknown or was evicted.

        Always checkpoints; it only reads, so a cancellation changes nothing.
        """
        return await self._backend.status(_checked_id("status", job_id))

    async def job_ids(self, place: str, *, limit: int = 100) -> list[str]:
        """The ids of up to *limit* jobs in *place*, next in turn first.

        *place* is one of `PLACES`: ``"ready"``, ``"stored"``, ``"scheduled"``,
        ``"deferred"``, ``"claimed"``, ``"dead"`` or ``"finished"``; see `Backend.job_ids` for the
        order of each. `status` tells more of each job.

        Raises:
            ValueError: *place* is not one of them, or *limit* is negative.

        Always checkpoints; it only reads, so a cancellation changes nothing.
        """
        return await self._backend.job_ids(place, limit=limit)

    async def dead_letters(self, *, offset: int = 0, limit: int | None = None) -> list[JobRecord]:
        """The dead letters, oldest first, each with its attempts, last error and reason.

        *limit* of them (None: all) after the first *offset*: a page (see
        `Backend.dead_letters` for what a page sees when letters come and go).

        Raises:
            ValueError: *offset* or *limit* is negative, or not a whole number.

        Always checkpoints; it only reads, so a cancellation changes nothing.
        """
        return await self._backend.dead_letters(offset=offset, limit=limit)

    async def purge_dead(self, job_id: str | None = None) -> int:
        """Forget the dead letter *job_id*, or every dead letter; return how many.

        Counters are unchanged: the jobs stay counted as dead-lettered.

        Always checkpoints. If cancelled while it forgets every dead letter,
        some may be forgotten already (on Redis they go in slices): call again.
        """
        if job_id is not None:
            job_id = _checked_id("purge_dead", job_id)
        return await self._backend.purge_dead(job_id)

    async def run_now(self, job_id: str) -> JobRecord:
        """Run a job that waits for its due time now; return its record.

        A delayed job, or a retry a stopped pool gave back mid-backoff (the
        ``scheduled`` place of `job_ids`), goes on the ready queue at once; when the
        queue is full it goes on first as room frees. (A retry a running pool holds
        while it sleeps out the backoff is that pool's: it is not waiting here.)

        Raises:
            JobNotFound: *job_id* is not waiting for a due time.

        Always checkpoints. If cancelled, nothing changed.
        """
        return await self._backend.run_now(_checked_id("run_now", job_id))

    async def requeue_dead(self, job_id: str) -> JobRecord:
        """Put the dead letter *job_id* back on the queue with fresh attempts.

        Never waits for room: when the queue is full the job is stored with
        ``queued = False`` and scheduled when room frees.

        Always checkpoints. If cancelled, the dead letter was left as it was.

        Raises:
            TypeError: *job_id* is not a str (given a `Receipt`, pass its ``id``).
            JobNotFound: *job_id* is not a dead letter.
        """
        return await self._backend.requeue_dead(_checked_id("requeue_dead", job_id))
