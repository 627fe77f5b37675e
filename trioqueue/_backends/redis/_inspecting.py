"""The Redis backend's views: records, waits for jobs to finish, counts and stats."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import trio

from ..._backend_values import checked_page, checked_place
from ..._metrics import Gauges, MetricsSnapshot, shared_snapshot
from ..._payload import PRIORITIES
from ._connection import decode_record, text
from ._queue_info import QueueInfo

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, Sequence

    from ..._records import JobRecord
    from .._waiters import Inbox
from ._base import RedisBase

__all__ = ["Inspecting"]

_LOOK_AGAIN: Final = 5.0  # seconds a wait for jobs to finish hears nothing, then looks again


_WATCH_SLICE: Final = 1000  # jobs a wait marks in one script call at most


class Inspecting(RedisBase):
    """RedisBackend methods: records, waits for jobs to finish, counts and stats."""

    async def status(self, job_id: str) -> JobRecord | None:
        """The record of *job_id*, or None if unknown or evicted."""
        fields = await self._conn.hash(self._keys.job_prefix + job_id)
        return decode_record(job_id, fields) if fields else None

    @trio.as_safe_channel
    async def finished(
        self, job_ids: Sequence[str]
    ) -> AsyncGenerator[tuple[str, JobRecord | None], None]:
        """Each of *job_ids* with its record as it finishes; see `Backend.finished`.

        No polling: the ids are marked on their records as waited for, and a
        marked job puts its id on the queue's events stream when it finishes
        (``<queue>.events``, the newest 10,000 or so kept). One waiter of this
        process at a time reads that stream for all of them (``XREAD BLOCK``, on
        one connection), so waits cost Redis one event per finished job that
        someone waits for, and nothing for the others. A wait that hears nothing
        for 5 seconds looks at its jobs again, in case an event was
        lost (a Redis restart) or trimmed.
        """
        ids = list(dict.fromkeys(job_ids))
        inbox = self._waiters.open(ids)
        try:
            await self._events.ready()  # before any job is marked: no event comes before
            look_at = ids
            while True:
                for pair in await self._look(inbox, look_at):
                    yield pair
                if not inbox.waiting:
                    return
                if await self._events.wait(inbox, _LOOK_AGAIN):
                    look_at = inbox.take()
                else:
                    look_at = list(inbox.waiting)
        finally:
            self._waiters.close(inbox)
            if not self._waiters:
                self._events.idle()

    async def _look(self, inbox: Inbox, job_ids: list[str]) -> list[tuple[str, JobRecord | None]]:
        """Which of *job_ids* are finished (with their records); mark the others."""
        ended: list[tuple[str, JobRecord | None]] = []
        job_ids = [job_id for job_id in job_ids if job_id in inbox.waiting]
        for start in range(0, len(job_ids), _WATCH_SLICE):
            part = job_ids[start : start + _WATCH_SLICE]
            states = [int(n) for n in await self._run("watch", *part)]
            done = [job_id for job_id, n in zip(part, states, strict=True) if n == 1]
            found = await self._conn.hashes([self._keys.job_prefix + job_id for job_id in done])
            records = dict(zip(done, found, strict=True))
            for job_id, state in zip(part, states, strict=True):
                if state == 2:
                    continue  # marked: its event will come
                fields = records.get(job_id)
                # gone since (the retention forgot it): unknown, as one never enqueued
                ended.append((job_id, decode_record(job_id, fields) if fields else None))
                self._waiters.done(inbox, job_id)
        return ended

    async def pending(self) -> int:
        """Jobs accepted and not finished: ready, stored, or claimed."""
        return int(await self._run("pending"))

    async def job_ids(self, place: str, *, limit: int = 100) -> list[str]:
        """The ids of up to *limit* jobs in *place*; see `Backend.job_ids`."""
        checked_place(place, limit)
        return [text(job_id) for job_id in await self._run("job_ids", place, limit)]

    async def dead_letters(self, *, offset: int = 0, limit: int | None = None) -> list[JobRecord]:
        """The dead letters, oldest first; see `Backend.dead_letters`."""
        offset, limit = checked_page(offset, limit)
        # the list's head is its newest: the oldest first are read from its tail
        stop = -1 - offset
        start = 0 if limit is None else stop - limit + 1
        if limit == 0:
            return []
        ids = [text(i) for i in reversed(await self._conn.list_items(self._keys.dead, start, stop))]
        found = await self._conn.hashes([self._keys.job_prefix + job_id for job_id in ids])
        return [
            decode_record(job_id, fields)
            for job_id, fields in zip(ids, found, strict=True)
            if fields
        ]

    async def stats(self) -> MetricsSnapshot:
        """The queue's shared counters and its true gauges, with this process's histograms."""
        counters, gauges, levels = await self._run("stats")
        values = {text(k): int(v) for k, v in zip(counters[::2], counters[1::2], strict=True)}
        depth, unqueued, inflight, retrying, dead, scheduled, deferred = (int(g) for g in gauges)
        self._gauges = Gauges(
            queue_depth=depth,
            backlog=depth + unqueued,
            inflight=inflight,
            retry_waiting=retrying,
            dead=dead,
            scheduled=scheduled,
            deferred=deferred,
            ready_by_priority=dict(zip(PRIORITIES, (int(n) for n in levels), strict=True)),
        )
        return shared_snapshot(values, self._gauges, self._metrics.snapshot())

    async def inspect(self) -> QueueInfo:
        """What the queue holds in Redis now, for operators (``trioqueue stats``).

        Cancellation: a checkpoint; it only reads.
        """
        reply = await self._run("inspect")
        ready, stored, processing, claims, oldest, dead, finished, scheduled, deferred = reply
        return QueueInfo(
            ready=int(ready),
            stored=int(stored),
            processing=int(processing),
            claims=int(claims),
            oldest_claim_age=float(oldest) if oldest else None,
            dead=int(dead),
            finished_kept=int(finished),
            scheduled=int(scheduled),
            deferred=int(deferred),
        )
