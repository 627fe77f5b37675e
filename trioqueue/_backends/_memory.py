"""The embedded backend: everything in this process, on Trio primitives."""

from __future__ import annotations

import collections
import heapq
import itertools
import json
import math
import time
from typing import TYPE_CHECKING, Final, final

import attrs
import trio

from .._backend import (
    AddMode,
    AddResult,
    CancelResult,
    Claim,
    NewJob,
    Receipt,
    Renewal,
    SweepReport,
    checked_capacity,
    checked_page,
    checked_place,
    checked_retention,
)
from .._exceptions import (
    ConfigurationError,
    IdempotencyConflict,
    JobNotFound,
    MemoryFull,
    QueueFull,
)
from .._metrics import Gauges, Metrics, MetricsSnapshot
from .._records import (
    TERMINAL_STATES,
    ErrorInfo,
    Job,
    JobRecord,
    JobState,
    Retention,
    check_transition,
)
from ._levels import ReadyLevels
from ._waiters import Waiters

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, Iterable, Sequence

__all__ = ["MemoryBackend"]

_DEFAULT_RETENTION: Final = Retention()
_CLAIMED: Final = frozenset({JobState.PROCESSING, JobState.FAILED_RETRY})  # held by a claim
_CANCELLED_WAITING: Final = "cancelled while it waited for a worker"
_CANCELLED_HELD: Final = "cancelled while a worker held it"


def _due(job: NewJob, now: float) -> float | None:
    """When *job* is due on Trio's clock, if that is after *now*; else None (ready now)."""
    if job.delay is not None:
        due = now + job.delay
    elif job.at is not None:
        due = now + (job.at - time.time())  # the wall clock's distance, on Trio's clock
    else:
        return None
    return due if due > now else None


@attrs.define(eq=False, slots=True)
class _Entry:
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
    cancel_requested: bool = False  # cancelled while claimed: its pool stops it

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
        )


def _cost(entry: _Entry) -> int:
    """What *entry* counts for in a `MemoryBackend`'s budget."""
    return len(entry.encoded) + len(entry.result or b"") + MemoryBackend.RECORD_COST


@final
class MemoryBackend:
    """Jobs held in this process: zero set-up, gone when the process ends.

    The default backend. Records, the ready queue, claims and dead letters are
    plain Python structures; waits use Trio parking lots and times use Trio's
    clock, so tests on a mock clock are exact (delayed jobs wait in a heap by
    due time on it). Share one instance between the
    `Queue` producers and the worker pools of one process.

    Cancellation: as the `Backend` protocol says; each call makes its change
    with no cancel point after it.

    Args:
        capacity: Most jobs on the ready queue. `Queue.enqueue` waits beyond it.
        retention: How long finished records are kept: a `Retention`, or an int
            as a shorthand for ``Retention(max_count=n)``. By default the latest
            10,000 finished records are kept.
        max_bytes: The most memory the records may hold, counted as each
            payload and result in bytes and `RECORD_COST` more per record
            (`memory_held`); None (the default) for no bound. A new job that
            would pass it first evicts the oldest finished records; if unfinished
            jobs and dead letters fill it, `Queue.enqueue` waits for room and
            `Queue.submit` and `Queue.try_enqueue` raise `MemoryFull` (as every
            call does for a job larger than the whole budget). Give one
            where producers may outrun the workers with submit or delays, or
            payloads are large: the capacity bounds only the ready queue.

    Raises:
        ConfigurationError: *capacity* is below 1, or *max_bytes* not a whole number >= 1.
    """

    RECORD_COST: Final = 1024
    """Bytes the budget counts for one record beside its payload and result.

    Measured with tracemalloc on CPython 3.11: a record with a small payload
    takes about 500 bytes on the ready queue and 340 once finished (its entry,
    id, hash and places in the backend's structures); 1 KiB errs on the safe side.
    """

    def __init__(
        self,
        capacity: int = 1000,
        *,
        retention: Retention | int = _DEFAULT_RETENTION,
        max_bytes: int | None = None,
    ) -> None:
        self._capacity = checked_capacity("MemoryBackend", capacity)
        if max_bytes is not None and (
            isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1
        ):
            raise ConfigurationError(
                f"MemoryBackend(max_bytes={max_bytes!r}): give the most bytes the records "
                "may hold, a whole number >= 1, or None for no bound"
            )
        self._max_bytes = max_bytes
        self._bytes = 0  # see memory_held
        self._epoch_offset: float | None = None  # see _wall_offset
        self._retention = checked_retention("MemoryBackend", retention)
        self._records: dict[str, _Entry] = {}
        self._ready = ReadyLevels[_Entry](lambda entry: entry.priority)
        self._unqueued: collections.deque[_Entry] = collections.deque()
        # jobs waiting for their due time: (due, order of arrival, entry)
        self._scheduled: list[tuple[float, int, _Entry]] = []
        self._arrivals = itertools.count()
        self._claims: dict[str, _Entry] = {}
        self._finished: collections.OrderedDict[str, float] = collections.OrderedDict()
        self._dead: dict[str, None] = {}
        self._last_token = 0  # claim tokens are the numbers after it, never reused
        self._room = trio.lowlevel.ParkingLot()
        self._work = trio.lowlevel.ParkingLot()
        self._waiters = Waiters()  # finished() calls
        self._metrics = Metrics(self._gauges)
        # see _touch: when a worker last reached the backend, when the last silence ended
        self._seen: float | None = None
        self._quiet_end = -math.inf
        self._marks: dict[str, float] = {}  # each schedule's latest tick stored

    def __repr__(self) -> str:
        g = self._gauges()
        return (
            f"<MemoryBackend capacity={self._capacity} ready={g.queue_depth} "
            f"backlog={g.backlog} inflight={g.inflight} retry_waiting={g.retry_waiting} "
            f"dead={g.dead}>"
        )

    @property
    def max_bytes(self) -> int | None:
        """The most bytes the records may hold (see the class), or None for no bound."""
        return self._max_bytes

    @property
    def memory_held(self) -> int:
        """Bytes the records hold by the budget's count: payloads, results, `RECORD_COST` each.

        Counted whether or not *max_bytes* bounds it. It estimates, and does not
        measure, the process's memory: Python's own objects and the allocator's
        slack come on top (see the HTTP page for a measured full queue).
        """
        return self._bytes

    @property
    def capacity(self) -> int:
        """Most jobs the ready queue holds."""
        return self._capacity

    @property
    def retention(self) -> Retention:
        """How long finished records are kept."""
        return self._retention

    @property
    def metrics(self) -> Metrics:
        """The backend's counters, gauges and histograms."""
        return self._metrics

    @property
    def default_lease(self) -> float:
        """Seconds a claim holds without renewal unless the pool says otherwise."""
        return 30.0

    @property
    def redelivers(self) -> bool:
        """True: an interrupted job goes back on the queue (at-least-once)."""
        return True

    def now(self) -> float:
        """Trio's clock: leases, ages and waits run on it (a mock clock in tests)."""
        now = trio.current_time()
        if self._epoch_offset is None:
            self._epoch_offset = time.time() - now
        return now

    def _wall_offset(self) -> float:
        """Add to a time on Trio's clock to get wall-clock seconds since the epoch.

        Fixed when the backend first reads the time, so records keep the order and
        spacing of Trio's clock (exact on a mock clock) and read as dates, as
        Redis's records do.
        """
        if self._epoch_offset is None:
            self.now()
        assert self._epoch_offset is not None
        return self._epoch_offset

    # --- bookkeeping -----------------------------------------------------------------

    def _gauges(self) -> Gauges:
        retrying = sum(1 for e in self._claims.values() if e.state is JobState.FAILED_RETRY)
        return Gauges(
            queue_depth=len(self._ready),
            backlog=len(self._ready) + len(self._unqueued),
            inflight=len(self._claims) - retrying,
            retry_waiting=retrying,
            dead=len(self._dead),
            scheduled=len(self._scheduled),
            ready_by_priority=self._ready.depths(),
        )

    def _held(self) -> int:
        return len(self._ready) + len(self._unqueued) + len(self._claims) + len(self._scheduled)

    def _schedule(self, entry: _Entry, now: float, *, front: bool = False) -> None:
        """Put *entry* on the ready queue if there is room, else store it unqueued.

        *front*: next in line (a job given back: it was taken in its turn already).
        """
        entry.ready_at = now
        if len(self._ready) < self._capacity:
            entry.queued = True
            self._ready.push(entry, front=front)
            self._work.unpark()
        else:
            entry.queued = False
            (self._unqueued.appendleft if front else self._unqueued.append)(entry)

    def _defer(self, entry: _Entry, due: float) -> None:
        """Store *entry* until *due* (Trio's clock); wake a claimer if it is now the next due."""
        entry.due = due
        entry.queued = False
        heapq.heappush(self._scheduled, (due, next(self._arrivals), entry))
        if self._scheduled[0][2] is entry:
            self._work.unpark()  # a claimer waiting until a later due time waits anew

    def _next_due(self) -> float:
        """When the next stored job is due (Trio's clock); infinity when none is stored."""
        return self._scheduled[0][0] if self._scheduled else math.inf

    def _fill(self, now: float) -> tuple[int, int]:
        """Move unqueued jobs, then due ones, into free room; then wake waiting producers.

        Unqueued jobs go first (they were ready before), then due jobs in due
        order; a due job that finds no room stays stored until room frees. Returns
        how many of each moved.
        """
        moved = due = 0
        while self._unqueued and len(self._ready) < self._capacity:
            entry = self._unqueued.popleft()
            entry.queued = True
            entry.ready_at = now
            self._ready.push(entry)
            moved += 1
        while self._scheduled and self._scheduled[0][0] <= now:
            if len(self._ready) >= self._capacity:
                break
            when, _, entry = heapq.heappop(self._scheduled)
            entry.due = None
            if entry.state is JobState.SCHEDULED:
                entry.move(JobState.RECEIVED, now)
            entry.queued = True
            entry.ready_at = when  # its wait counts from its due time: lateness shows
            self._ready.push(entry)
            due += 1
        if moved + due:
            self._work.unpark(count=moved + due)
        room = self._capacity - len(self._ready)
        if room > 0:
            self._room.unpark(count=room)
        return moved, due

    def _touch(self, now: float) -> None:
        """A worker reached the backend now; note a silence longer than half a lease.

        A silence means no worker could reach the backend (an outage a test
        simulates, or an event loop blocked for that long), so live owners could
        not renew: for one lease (`default_lease`) after it, `sweep` gives each
        expired claim one more lease before it recovers it, as the Redis backend
        does with its *min_idle*.
        """
        if self._seen is not None and now - self._seen > self.default_lease / 2:
            self._quiet_end = now
        self._seen = now

    def _live(self, claim: Claim) -> _Entry | None:
        self._touch(self.now())
        entry = self._claims.get(claim.token)
        if entry is None:
            self._metrics.stale += 1
        return entry

    def _unclaim(self, claim: Claim) -> None:
        self._unclaim_token(claim.token)

    def _unclaim_token(self, token: str) -> None:
        entry = self._claims.pop(token)
        entry.token = None
        if not self._held():
            self._work.unpark_all()  # let idle fetchers see that everything is done

    def _finish(self, entry: _Entry, now: float) -> None:
        """An attempt finished the job: note it, wake its waiters, apply the retention."""
        self._metrics.processed += 1
        self._retire(entry, now)

    def _cancel_now(self, entry: _Entry, now: float, reason: str) -> None:
        """End *entry*, which no claim holds, as cancelled."""
        entry.move(JobState.CANCELLED, now)
        entry.reason = reason
        entry.due = None
        entry.queued = False
        entry.cancel_requested = False
        self._metrics.cancelled += 1
        self._retire(entry, now)

    def _retire(self, entry: _Entry, now: float) -> None:
        """*entry* is finished: wake its waiters, keep its record as the retention allows."""
        self._waiters.notify(entry.id)
        self._finished[entry.id] = now
        limit = self._retention.max_count
        while limit is not None and len(self._finished) > limit:
            old, _ = self._finished.popitem(last=False)
            self._forget(old)
        if self._max_bytes is not None:
            self._room_for(0)  # its result may have passed the budget
            self._room.unpark_all()  # its bytes may fit several producers waiting

    def _forget(self, job_id: str) -> None:
        """Drop *job_id*'s record, and its bytes from `memory_held`."""
        self._bytes -= _cost(self._records.pop(job_id))

    def _room_for(self, size: int) -> bool:
        """Whether *size* more bytes fit the budget, after evicting finished records for them."""
        if self._max_bytes is None:
            return True
        while self._bytes + size > self._max_bytes and self._finished:
            old, _ = self._finished.popitem(last=False)
            self._forget(old)
        return self._bytes + size <= self._max_bytes

    def _evict_old(self, now: float) -> int:
        max_age = self._retention.max_age
        evicted = 0
        if max_age is None:
            return 0
        while self._finished:
            job_id, finished_at = next(iter(self._finished.items()))
            if now - finished_at <= max_age:
                break
            del self._finished[job_id]
            self._forget(job_id)
            evicted += 1
        return evicted

    def _put_back(self, entry: _Entry, now: float, *, front: bool) -> None:
        """Return a claimed, unfinished job to the queue without counting an attempt.

        *front*: next in line, for a job taken in its turn already (given back by
        a live pool, or recovered from a dead owner). A job whose retry is due
        later (see `retry_later`) is stored until then instead.
        """
        if entry.cancel_requested:
            self._cancel_now(entry, now, _CANCELLED_HELD)
            return
        if entry.state is JobState.PROCESSING:
            target = JobState.FAILED_RETRY if entry.attempts else JobState.RECEIVED
            entry.move(target, now)
        entry.updated_at = now
        if entry.due is not None and entry.due > now:
            self._defer(entry, entry.due)  # mid-backoff: it waits out the rest
            return
        entry.due = None
        self._schedule(entry, now, front=front)

    # --- producer side ---------------------------------------------------------------

    async def add(self, job: NewJob, mode: AddMode) -> Receipt:
        """Accept *job*; see `Backend.add`. Waits only in `AddMode.WAIT` on a full queue."""
        (result,) = await self.add_many((job,), mode)
        if isinstance(result, Exception):
            raise result
        return result

    async def add_many(self, jobs: Sequence[NewJob], mode: AddMode) -> list[AddResult]:
        """Accept *jobs* in order; see `Backend.add_many`. Checkpoints once unless it waits."""
        await trio.lowlevel.checkpoint_if_cancelled()
        results: list[AddResult] = []
        for job in jobs:
            woken = False
            while (result := self._add_one(job, mode)) is None:
                await self._room.park()  # cancelled here: the jobs before were accepted
                woken = True
            if woken and not (isinstance(result, Receipt) and not result.deduplicated):
                self._room.unpark()  # this producer takes no room: pass the wakeup on
            results.append(result)
        await trio.lowlevel.cancel_shielded_checkpoint()
        return results

    def _add_one(self, job: NewJob, mode: AddMode) -> AddResult | None:
        """One job's fate, or None when it must wait for room (`AddMode.WAIT`)."""
        entry = self._records.get(job.id)
        if entry is not None:
            if entry.payload_hash != job.payload_hash:
                self._metrics.conflicts += 1
                return IdempotencyConflict(job.id, entry.payload_hash, job.payload_hash)
            self._metrics.deduplicated += 1
            return self._receipt(entry, deduplicated=True)
        now = self.now()
        due = _due(job, now)
        if due is None and len(self._ready) >= self._capacity and mode is not AddMode.SUBMIT:
            return QueueFull(self._capacity) if mode is AddMode.NOWAIT else None
        size = len(job.encoded) + self.RECORD_COST
        if self._max_bytes is not None and size > self._max_bytes:
            return MemoryFull(self._capacity, self._max_bytes, size)  # it never fits
        if not self._room_for(size):  # evicts finished records for it first
            assert self._max_bytes is not None  # no budget, always room
            if mode is AddMode.WAIT:
                return None  # room comes as jobs finish
            return MemoryFull(self._capacity, self._max_bytes, size)
        entry = _Entry(
            id=job.id,
            encoded=job.encoded,
            payload_hash=job.payload_hash,
            created_at=now,
            updated_at=now,
            ready_at=now,
            life_from=self._last_token,
            max_attempts=job.max_attempts,
            handler_timeout=job.handler_timeout,
            task=job.task,
            priority=job.priority,
        )
        self._records[job.id] = entry
        self._bytes += size
        if due is None:
            self._schedule(entry, now)
        else:
            entry.state = JobState.SCHEDULED
            self._defer(entry, due)
        self._metrics.enqueued += 1
        return self._receipt(entry, deduplicated=False)

    @staticmethod
    def _receipt(entry: _Entry, *, deduplicated: bool) -> Receipt:
        return Receipt(
            id=entry.id,
            deduplicated=deduplicated,
            queued=entry.queued,
            scheduled=entry.state is JobState.SCHEDULED,
        )

    async def status(self, job_id: str) -> JobRecord | None:
        """The record of *job_id*, or None if unknown or evicted."""
        await trio.lowlevel.checkpoint()
        entry = self._records.get(job_id)
        return None if entry is None else entry.record(self._wall_offset())

    async def stats(self) -> MetricsSnapshot:
        """The same as ``metrics.snapshot()``: one process holds everything."""
        await trio.lowlevel.checkpoint()
        return self._metrics.snapshot()

    async def pending(self) -> int:
        """Jobs accepted and not finished."""
        await trio.lowlevel.checkpoint()
        return self._held()

    @trio.as_safe_channel
    async def finished(
        self, job_ids: Sequence[str]
    ) -> AsyncGenerator[tuple[str, JobRecord | None], None]:
        """Each of *job_ids* with its record as it finishes; see `Backend.finished`."""
        await trio.lowlevel.checkpoint()
        inbox = self._waiters.open(job_ids)
        try:
            look_at = list(dict.fromkeys(job_ids))
            while True:
                ended: list[tuple[str, JobRecord | None]] = []
                for job_id in look_at:
                    entry = self._records.get(job_id)
                    if job_id not in inbox.waiting:
                        continue  # given already (delivered while it was looked at first)
                    if entry is None:
                        ended.append((job_id, None))
                    elif entry.state in TERMINAL_STATES:
                        ended.append((job_id, entry.record(self._wall_offset())))
                    else:
                        continue
                    self._waiters.done(inbox, job_id)
                for pair in ended:
                    yield pair
                if not inbox.waiting:
                    return
                await inbox.wait()
                look_at = inbox.take()
        finally:
            self._waiters.close(inbox)

    async def job_ids(self, place: str, *, limit: int = 100) -> list[str]:
        """The ids of up to *limit* jobs in *place*; see `Backend.job_ids`."""
        checked_place(place, limit)
        await trio.lowlevel.checkpoint()
        held: Iterable[str]
        if place == "ready":
            held = (entry.id for entry in self._ready)
        elif place == "stored":
            held = (entry.id for entry in self._unqueued)
        elif place == "scheduled":
            held = (entry.id for _, _, entry in sorted(self._scheduled, key=lambda s: s[:2]))
        elif place == "claimed":  # a dict keeps the order claims were made in
            held = (entry.id for entry in self._claims.values())
        else:
            held = self._dead if place == "dead" else self._finished
        return list(itertools.islice(held, limit))

    async def dead_letters(self, *, offset: int = 0, limit: int | None = None) -> list[JobRecord]:
        """The dead letters, oldest first; see `Backend.dead_letters`."""
        offset, limit = checked_page(offset, limit)
        await trio.lowlevel.checkpoint()
        page = itertools.islice(self._dead, offset, None if limit is None else offset + limit)
        return [self._records[job_id].record(self._wall_offset()) for job_id in page]

    async def purge_dead(self, job_id: str | None = None) -> int:
        """Forget one dead letter, or all of them; return how many were forgotten."""
        await trio.lowlevel.checkpoint()
        ids = list(self._dead) if job_id is None else [job_id] if job_id in self._dead else []
        for dead_id in ids:
            del self._dead[dead_id]
            self._forget(dead_id)
        if ids and self._max_bytes is not None:
            self._room.unpark_all()  # room for the producers waiting for bytes
        return len(ids)

    async def requeue_dead(self, job_id: str) -> JobRecord:
        """Put a dead letter back with fresh attempts; see `Backend.requeue_dead`."""
        await trio.lowlevel.checkpoint_if_cancelled()
        if job_id not in self._dead:
            raise JobNotFound(job_id, "dead letters")
        del self._dead[job_id]
        entry = self._records[job_id]
        now = self.now()
        entry.move(JobState.RECEIVED, now)
        entry.attempts = 0
        entry.reason = None
        entry.cancel_requested = False
        entry.life_from = self._last_token
        self._schedule(entry, now)
        self._metrics.dead_requeued += 1
        record = entry.record(self._wall_offset())
        await trio.lowlevel.cancel_shielded_checkpoint()
        return record

    # --- worker side -----------------------------------------------------------------

    async def claim(self, max_jobs: int, *, lease: float, block: float) -> list[Claim]:
        """Claim up to *max_jobs* ready jobs; see `Backend.claim`.

        No job is ever a suspect: the workers of one process cannot die one at a time.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        now = self.now()
        self._fill(now)  # what came due
        deadline = now + block
        while not self._ready:
            # until woken, or until the next due time (then it is on the ready queue)
            with trio.move_on_at(min(deadline, self._next_due())) as waited:
                await self._work.park()
            now = self.now()
            self._fill(now)
            idle = not waited.cancelled_caught and not self._held()
            if not self._ready and (idle or now >= deadline):
                await trio.lowlevel.checkpoint_if_cancelled()
                self._touch(now)
                return []
        self._touch(now)
        claims: list[Claim] = []
        while self._ready and len(claims) < max_jobs:
            entry = self._ready.pop()
            entry.move(JobState.PROCESSING, now)
            entry.queued = False
            self._last_token += 1
            token = str(self._last_token)
            entry.token = token
            entry.lease_until = now + lease
            self._claims[token] = entry
            job = Job(
                id=entry.id,
                payload=json.loads(entry.encoded),
                attempt=entry.attempts + 1,
                max_attempts=entry.max_attempts,
                handler_timeout=entry.handler_timeout,
                task=entry.task,
                priority=entry.priority,
            )
            claims.append(Claim(job=job, token=token, ready_at=entry.ready_at))
        self._fill(now)
        await trio.lowlevel.cancel_shielded_checkpoint()
        return claims

    async def renew(self, claims: Sequence[Claim], *, lease: float) -> Renewal:
        """Extend the leases of the claims still held; those lost, and those cancelled."""
        await trio.lowlevel.checkpoint_if_cancelled()
        now = self.now()
        self._touch(now)
        until = now + lease
        lost, cancel = set(), set()
        for claim in claims:
            entry = self._claims.get(claim.token)
            if entry is None:
                lost.add(claim.token)
            else:
                entry.lease_until = until
                if entry.cancel_requested:
                    cancel.add(claim.token)
        await trio.lowlevel.cancel_shielded_checkpoint()
        return Renewal(lost=frozenset(lost), cancel=frozenset(cancel))

    async def cancel(self, job_id: str) -> CancelResult:
        """Cancel job *job_id*, at once or through its pool; see `Backend.cancel`."""
        await trio.lowlevel.checkpoint_if_cancelled()
        entry = self._records.get(job_id)
        if entry is None:
            raise JobNotFound(job_id)
        if entry.state in TERMINAL_STATES:
            result = CancelResult.FINISHED
        elif entry.token is not None:
            entry.cancel_requested = True
            result = CancelResult.REQUESTED
        else:
            now = self.now()
            if entry in self._ready:
                self._ready.remove(entry)
            elif entry in self._unqueued:
                self._unqueued.remove(entry)
            else:
                self._scheduled = [item for item in self._scheduled if item[2] is not entry]
                heapq.heapify(self._scheduled)
            self._cancel_now(entry, now, _CANCELLED_WAITING)
            self._fill(now)  # its room goes to the next
            result = CancelResult.CANCELLED
        await trio.lowlevel.cancel_shielded_checkpoint()
        return result

    async def cancel_claim(self, claim: Claim) -> bool:
        """End a claim whose job was cancelled; False if the claim is stale."""
        await trio.lowlevel.checkpoint_if_cancelled()
        entry = self._live(claim)
        if entry is not None:
            self._unclaim(claim)
            self._cancel_now(entry, self.now(), _CANCELLED_HELD)
        await trio.lowlevel.cancel_shielded_checkpoint()
        return entry is not None

    async def ack(
        self, claim: Claim, result: bytes | None = None, *, result_error: str | None = None
    ) -> bool:
        """Complete the job, keeping *result*; False if the claim is stale.

        A late success is kept: when this claim's lease ran out and the job was
        claimed again, but no run of it has finished, the job completes now and
        the other run's claim ends (its outcome will be refused). Not across
        lives: a claim from before the job was requeued from the dead letters
        (or purged and enqueued anew) is stale.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        entry = self._claims.get(claim.token)
        token = claim.token
        if entry is None:
            entry = self._records.get(claim.job.id)
            if (
                entry is None
                or entry.token is None
                or entry.state not in _CLAIMED
                or int(claim.token) <= entry.life_from
            ):
                entry = self._live(claim)  # stale: counted as such
            else:
                token = entry.token  # another run's claim: it ends here
                if entry.state is JobState.FAILED_RETRY:
                    entry.move(JobState.PROCESSING, self.now())
                    entry.due = None  # its backoff ends with it
        if entry is not None:
            self._touch(self.now())
            now = self.now()
            entry.move(JobState.COMPLETED, now)
            entry.attempts += 1
            self._bytes += len(result or b"") - len(entry.result or b"")
            entry.result, entry.result_error = result, result_error
            self._metrics.succeeded += 1
            self._metrics.end_to_end.observe(now - entry.created_at)
            self._finish(entry, now)
            self._unclaim_token(token)
        await trio.lowlevel.cancel_shielded_checkpoint()
        return entry is not None

    async def retry_later(
        self, claim: Claim, error: ErrorInfo | None, *, delay: float = 0.0
    ) -> bool:
        """End an attempt that will be retried; the claim keeps the job.

        The next attempt is due *delay* seconds from now (see `Backend.retry_later`).
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        entry = self._live(claim)
        if entry is not None:
            now = self.now()
            entry.move(JobState.FAILED_RETRY, now)
            entry.due = now + delay
            entry.attempts += 1
            self._metrics.processed += 1
            self._metrics.retries += 1
            if error is not None:
                entry.last_error = error
                self._metrics.failed += 1
        await trio.lowlevel.cancel_shielded_checkpoint()
        return entry is not None

    async def requeue(self, claim: Claim) -> bool:
        """Put a job waiting to retry back on the queue (a cancelled one ends instead)."""
        await trio.lowlevel.checkpoint_if_cancelled()
        entry = self._live(claim)
        if entry is not None:
            entry.due = None
            if entry.cancel_requested:
                self._cancel_now(entry, self.now(), _CANCELLED_HELD)
            else:
                self._schedule(entry, self.now())
            self._unclaim(claim)
        await trio.lowlevel.cancel_shielded_checkpoint()
        return entry is not None

    async def dead_letter(self, claim: Claim, error: ErrorInfo | None, reason: str) -> bool:
        """End the last attempt and keep the job as a dead letter (a cancelled one ends so)."""
        await trio.lowlevel.checkpoint_if_cancelled()
        entry = self._live(claim)
        if entry is not None and entry.cancel_requested:
            self._unclaim(claim)
            self._cancel_now(entry, self.now(), _CANCELLED_HELD)
        elif entry is not None:
            entry.move(JobState.FAILED, self.now())
            entry.attempts += 1
            entry.reason = reason
            self._metrics.processed += 1
            self._metrics.dead_lettered += 1
            if error is not None:
                entry.last_error = error
                self._metrics.failed += 1
            self._dead[entry.id] = None
            self._waiters.notify(entry.id)
            self._unclaim(claim)
        await trio.lowlevel.cancel_shielded_checkpoint()
        return entry is not None

    async def drop(self, claim: Claim, reason: str) -> bool:
        """End the attempt and drop the job."""
        await trio.lowlevel.checkpoint_if_cancelled()
        entry = self._live(claim)
        if entry is not None:
            now = self.now()
            entry.move(JobState.DROPPED, now)
            entry.attempts += 1
            entry.reason = reason
            self._metrics.dropped += 1
            self._finish(entry, now)
            self._unclaim(claim)
        await trio.lowlevel.cancel_shielded_checkpoint()
        return entry is not None

    async def release(self, claims: Sequence[Claim]) -> int:
        """Put unfinished claims back at once; return how many were still held."""
        await trio.lowlevel.checkpoint_if_cancelled()
        now = self.now()
        self._touch(now)
        released = 0
        for claim in claims:
            entry = self._claims.get(claim.token)
            if entry is None:
                continue
            self._claims.pop(claim.token)
            entry.token = None
            self._put_back(entry, now, front=True)
            released += 1
        self._metrics.released += released
        await trio.lowlevel.cancel_shielded_checkpoint()
        return released

    async def mark_schedule(self, name: str, tick: float) -> None:
        """Record schedule *name*'s latest tick stored; see `Backend.mark_schedule`."""
        await trio.lowlevel.checkpoint()
        self._marks[name] = max(tick, self._marks.get(name, tick))

    async def schedule_marks(self) -> dict[str, float]:
        """Each schedule's latest tick stored; see `Backend.schedule_marks`."""
        await trio.lowlevel.checkpoint()
        return dict(self._marks)

    async def sweep(self) -> SweepReport:
        """Schedule unqueued jobs, recover expired claims, evict old finished records."""
        await trio.lowlevel.checkpoint_if_cancelled()
        now = self.now()
        self._touch(now)
        expired = [t for t, e in self._claims.items() if e.lease_until < now]
        lease = self.default_lease
        if now < self._quiet_end + lease:  # see _touch
            for token in list(expired):
                entry = self._claims[token]
                if entry.extended_until != entry.lease_until:  # not given one yet
                    entry.lease_until = entry.extended_until = now + lease
                    expired.remove(token)
        # latest expiry first: each goes to the front, so the earliest ends first in line
        for token in sorted(expired, key=lambda t: self._claims[t].lease_until, reverse=True):
            entry = self._claims.pop(token)
            entry.token = None
            self._put_back(entry, now, front=True)
        self._metrics.recovered += len(expired)
        scheduled, due = self._fill(now)
        evicted = self._evict_old(now)
        await trio.lowlevel.cancel_shielded_checkpoint()
        return SweepReport(scheduled=scheduled, recovered=len(expired), evicted=evicted, due=due)
