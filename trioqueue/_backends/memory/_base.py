"""The memory backend's state and bookkeeping: records, ready levels, schedule, budget."""

from __future__ import annotations

import collections
import math
import time

import trio

from ..._backend_values import Claim, checked_capacity, checked_retention
from ..._exceptions import ConfigurationError
from ..._metrics import Gauges, Metrics
from ..._records import JobState, Retention
from .._waiters import Waiters
from ._due import DueHeap
from ._entry import CANCELLED_HELD, DEFAULT_RETENTION, ENDED_HOW, Entry, after_failed, cost
from ._levels import ReadyLevels
from ._rate_gate import RateGate

__all__ = ["MemoryBase"]


class MemoryBase:
    """MemoryBackend methods: records, ready levels, schedule, budget."""

    def __init__(
        self,
        capacity: int = 1000,
        *,
        retention: Retention | int = DEFAULT_RETENTION,
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
        self._records: dict[str, Entry] = {}
        self._ready = ReadyLevels[Entry](lambda entry: entry.priority)
        self._unqueued: collections.deque[Entry] = collections.deque()
        self._scheduled = DueHeap[Entry]()  # jobs waiting for their due time
        self._claims: dict[str, Entry] = {}
        self._deferred: dict[str, Entry] = {}  # waiting for the jobs they run after, in order
        self._unique: dict[str, str] = {}  # each unique_key held: the id of the job holding it
        self._finished: collections.OrderedDict[str, float] = collections.OrderedDict()
        self._dead: dict[str, None] = {}
        self._last_token = 0  # claim tokens are the numbers after it, never reused
        self._room = trio.lowlevel.ParkingLot()
        self._work = trio.lowlevel.ParkingLot()
        self._claimers = 0  # claim() calls waiting on _work (not a pool's inline workers)
        self._paused = False  # see pause
        self._rates = RateGate()  # see set_rate_limits
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

    def _gauges(self) -> Gauges:
        retrying = sum(1 for e in self._claims.values() if e.state is JobState.FAILED_RETRY)
        return Gauges(
            queue_depth=len(self._ready),
            backlog=len(self._ready) + len(self._unqueued),
            inflight=len(self._claims) - retrying,
            retry_waiting=retrying,
            dead=len(self._dead),
            scheduled=len(self._scheduled),
            deferred=len(self._deferred),
            ready_by_priority=self._ready.depths(),
        )

    def _held(self) -> int:
        waiting = len(self._unqueued) + len(self._scheduled) + len(self._deferred)
        return len(self._ready) + len(self._claims) + waiting

    def _schedule(self, entry: Entry, now: float, *, front: bool = False) -> None:
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

    def _defer(self, entry: Entry, due: float) -> None:
        """Store *entry* until *due* (Trio's clock); wake a claimer if it is now the next due."""
        entry.due = due
        entry.queued = False
        if self._scheduled.push(entry, due):
            self._work.unpark()  # a claimer waiting until a later due time waits anew

    def _unschedule(self, entry: Entry) -> None:
        """Take *entry*, which no claim holds, from where it waits (deferred: `_cancel_now`)."""
        if entry in self._ready:
            self._ready.remove(entry)
        elif entry in self._unqueued:
            self._unqueued.remove(entry)
        elif entry.state is not JobState.DEFERRED:
            self._scheduled.remove(entry)

    def _next_due(self) -> float:
        """When the next stored job is due (Trio's clock); infinity when none is stored."""
        return self._scheduled.next_due()

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
        while len(self._ready) < self._capacity and (taken := self._scheduled.pop_due(now)):
            when, entry = taken
            entry.due = None
            if entry.state is JobState.SCHEDULED:
                entry.move(JobState.RECEIVED, now)
            entry.queued = True
            entry.ready_at = when  # its wait counts from its due time: lateness shows
            self._ready.push(entry)
            due += 1
        if moved + due:
            self._work.unpark(count=moved + due)
        if self._room and (room := self._capacity - len(self._ready)) > 0:
            self._room.unpark(count=room)  # the producers waiting for room
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

    def _live(self, claim: Claim) -> Entry | None:
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
        if self._claimers and not self._held():
            self._work.unpark_all()  # let idle fetchers see that everything is done

    def _finish(self, entry: Entry, now: float) -> None:
        """An attempt finished the job: note it, wake its waiters, apply the retention."""
        self._metrics.processed += 1
        self._retire(entry, now)

    def _cancel_now(self, entry: Entry, now: float, reason: str) -> None:
        """End *entry*, which no claim holds, as cancelled."""
        self._deferred.pop(entry.id, None)
        if entry.promised and entry.rate_key is not None:
            self._rates.leave(entry.id, entry.rate_key)  # the jobs behind it move up
        entry.promised = False
        entry.move(JobState.CANCELLED, now)
        entry.reason = reason
        entry.due = None
        entry.queued = False
        entry.cancel_requested = False
        self._metrics.cancelled += 1
        self._retire(entry, now)
        self._fail_followers(entry, ENDED_HOW[JobState.CANCELLED], now)

    def _cancel_claim_now(self, claim: Claim) -> bool:
        """End *claim*, whose job was cancelled (`cancel_claim`); False if it is stale."""
        entry = self._live(claim)
        if entry is not None:
            self._unclaim(claim)
            self._cancel_now(entry, self.now(), CANCELLED_HELD)
        return entry is not None

    def _release_followers(self, entry: Entry, now: float) -> None:
        """*entry* completed: each job that waited on it and on nothing else is ready now."""
        for follower_id in entry.followers:
            follower = self._records.get(follower_id)
            if not _waits_for(follower, entry.id):
                continue
            assert follower is not None
            follower.waiting_on -= 1
            if follower.waiting_on == 0:
                del self._deferred[follower_id]
                follower.move(JobState.RECEIVED, now)
                self._schedule(follower, now)
        entry.followers.clear()

    def _fail_followers(self, entry: Entry, how: str, now: float) -> None:
        """*entry* ended without completing (*how*): the jobs after it become dead letters.

        So do the jobs after those, and so on down, depth first (a job's followers
        before its next sibling), as on Redis; all at once here.
        """
        doomed = [(follower, entry.id, how) for follower in reversed(entry.followers)]
        entry.followers.clear()
        while doomed:
            follower_id, parent, how = doomed.pop()
            follower = self._records.get(follower_id)
            if not _waits_for(follower, parent):
                continue
            assert follower is not None
            self._deferred.pop(follower_id)
            self._dead_at_once(follower, parent, how, now)
            after = reversed(follower.followers)
            doomed += [(then, follower_id, "never ran either") for then in after]
            follower.followers.clear()

    def _dead_at_once(self, entry: Entry, parent: str, how: str, now: float) -> None:
        """Make *entry*, which never ran, a dead letter because job *parent* ended so (*how*)."""
        entry.move(JobState.FAILED, now)
        entry.waiting_on = 0
        entry.reason = after_failed(parent, how)
        self._metrics.dead_lettered += 1
        self._dead[entry.id] = None
        self._let_key_go(entry)
        self._waiters.notify(entry.id)

    def _let_key_go(self, entry: Entry) -> None:
        """*entry* ended: another job may take its unique_key."""
        if entry.unique_key is not None and self._unique.get(entry.unique_key) == entry.id:
            del self._unique[entry.unique_key]

    def _retire(self, entry: Entry, now: float) -> None:
        """*entry* is finished: wake its waiters, keep its record as the retention allows."""
        self._let_key_go(entry)
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
        self._bytes -= cost(self._records.pop(job_id))

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

    def _put_back(self, entry: Entry, now: float, *, front: bool) -> None:
        """Return a claimed, unfinished job to the queue without counting an attempt.

        *front*: next in line, for a job taken in its turn already (given back by
        a live pool, or recovered from a dead owner). A job whose retry is due
        later (see `retry_later`) is stored until then instead.
        """
        if entry.cancel_requested:
            self._cancel_now(entry, now, CANCELLED_HELD)
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


def _waits_for(follower: Entry | None, parent: str) -> bool:
    """Whether *follower* waits for job *parent*: deferred, and *parent* among its ``after``.

    Not so for one that ended since (cancelled, a dead letter), nor for a newer job
    of its id (purged or forgotten, and enqueued again) that runs after others.
    """
    return follower is not None and follower.state is JobState.DEFERRED and parent in follower.after
