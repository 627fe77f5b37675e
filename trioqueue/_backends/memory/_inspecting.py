"""The memory backend's views and dead letters: records, waits, counts."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import trio

from ..._backend_values import checked_page, checked_place, not_waiting_for_due_time
from ..._exceptions import JobNotFound
from ..._records import TERMINAL_STATES, JobRecord, JobState

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, Iterable, Sequence

    from ..._metrics import MetricsSnapshot

from ._base import MemoryBase

__all__ = ["Inspecting"]


class Inspecting(MemoryBase):
    """MemoryBackend methods: records, waits, counts."""

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
            held = (entry.id for entry in self._scheduled)
        elif place == "deferred":  # in the order they came
            held = iter(self._deferred)
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

    async def run_now(self, job_id: str) -> JobRecord:
        """Make a job that waits for its due time due now; see `Backend.run_now`."""
        await trio.lowlevel.checkpoint_if_cancelled()
        entry = self._records.get(job_id)
        if entry is None or entry not in self._scheduled:
            raise not_waiting_for_due_time(job_id)
        now = self.now()
        self._scheduled.hurry(entry, now)  # before every other due job, as on Redis
        self._fill(now)
        record = entry.record(self._wall_offset())
        await trio.lowlevel.cancel_shielded_checkpoint()
        return record

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
        entry.waiting_on = 0
        if entry.unique_key is not None:  # unless a newer job took it meanwhile
            self._unique.setdefault(entry.unique_key, entry.id)
        entry.cancel_requested = False
        entry.life_from = self._last_token
        self._schedule(entry, now)
        self._metrics.dead_requeued += 1
        record = entry.record(self._wall_offset())
        await trio.lowlevel.cancel_shielded_checkpoint()
        return record
