"""The memory backend's producer side: adding jobs, idempotent by id."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import trio

from ..._backend_values import AddMode, AddResult, NewJob, Receipt
from ..._exceptions import DependencyNotFound, IdempotencyConflict, MemoryFull, QueueFull
from ..._records import JobState

if TYPE_CHECKING:
    from collections.abc import Sequence

from ._base import MemoryBase
from ._entry import ENDED_HOW, RECORD_BYTES, Entry, due_time, headers_bytes, replaced_by

__all__ = ["Adding"]


class Adding(MemoryBase):
    """MemoryBackend methods: adding jobs, idempotent by id."""

    async def add(self, job: NewJob, mode: AddMode) -> Receipt:
        """Accept *job*; see `Backend.add`. Waits only in `AddMode.WAIT` on a full queue."""
        await trio.lowlevel.checkpoint_if_cancelled()
        if (result := self._add_one(job, mode)) is None:
            result = await self._add_with_room(job, mode)
        await trio.lowlevel.cancel_shielded_checkpoint()
        if isinstance(result, Exception):
            raise result
        return result

    async def add_many(self, jobs: Sequence[NewJob], mode: AddMode) -> list[AddResult]:
        """Accept *jobs* in order; see `Backend.add_many`. Checkpoints once unless it waits."""
        await trio.lowlevel.checkpoint_if_cancelled()
        results: list[AddResult] = []
        for job in jobs:
            if (result := self._add_one(job, mode)) is None:
                result = await self._add_with_room(job, mode)
            results.append(result)
        await trio.lowlevel.cancel_shielded_checkpoint()
        return results

    async def _add_with_room(self, job: NewJob, mode: AddMode) -> AddResult:
        """Add *job*, refused for want of room, once there is room (`AddMode.WAIT`)."""
        while True:
            await self._room.park()  # cancelled here: the jobs before were accepted
            if (result := self._add_one(job, mode)) is not None:
                break
        if not (isinstance(result, Receipt) and not result.deduplicated):
            self._room.unpark()  # this producer takes no room: pass the wakeup on
        return result

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
        replaced = None if job.unique_key is None else self._key_holder(job)
        if replaced is not None and not (
            job.debounce and replaced.debounce and replaced.state is JobState.SCHEDULED
        ):
            self._metrics.deduplicated += 1
            return self._receipt(replaced, deduplicated=True)
        due = None if job.delay is None and job.at is None else due_time(job, now)
        waits_for: list[Entry] = []
        ended = None
        if job.after:
            parents = [self._records.get(parent) for parent in job.after]
            for parent_id, parent in zip(job.after, parents, strict=True):
                if parent is None:
                    return DependencyNotFound(job.id, parent_id)
            waits_for = [p for p in parents if p is not None and p.state is not JobState.COMPLETED]
            ended = next((p for p in waits_for if p.state in ENDED_HOW), None)
        if waits_for:
            due = math.inf  # it takes no room while it waits, as a delayed job
        if due is None and len(self._ready) >= self._capacity and mode is not AddMode.SUBMIT:
            return QueueFull(self._capacity) if mode is AddMode.NOWAIT else None
        size = len(job.encoded) + RECORD_BYTES
        if job.headers or job.after or job.unique_key or job.rate_key:
            size += headers_bytes(job.headers) + sum(len(parent) for parent in job.after)
            size += len(job.unique_key or "") + len(job.rate_key or "")
        if self._max_bytes is not None and size > self._max_bytes:
            return MemoryFull(self._capacity, self._max_bytes, size)  # it never fits
        if not self._room_for(size):  # evicts finished records for it first
            assert self._max_bytes is not None  # no budget, always room
            if mode is AddMode.WAIT:
                return None  # room comes as jobs finish
            return MemoryFull(self._capacity, self._max_bytes, size)
        if replaced is not None:  # once nothing can refuse the newer job: it waits instead
            self._unschedule(replaced)
            self._cancel_now(replaced, now, replaced_by(job.id))
        entry = Entry(
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
            headers=dict(job.headers or {}),
            after=job.after,
            unique_key=job.unique_key,
            debounce=job.debounce,
            rate_key=job.rate_key,
        )
        self._records[job.id] = entry
        if job.unique_key is not None:
            self._unique[job.unique_key] = job.id
        self._bytes += size
        self._metrics.enqueued += 1
        if waits_for:
            entry.state = JobState.DEFERRED
            if ended is not None:  # it never runs
                self._dead_at_once(entry, ended.id, ENDED_HOW[ended.state], now)
            else:
                entry.waiting_on = len(waits_for)
                self._deferred[job.id] = entry
                for parent in waits_for:
                    parent.followers[job.id] = None
        elif due is None:
            self._schedule(entry, now)
        else:
            entry.state = JobState.SCHEDULED
            self._defer(entry, due)
        return self._receipt(entry, deduplicated=False)

    def _key_holder(self, job: NewJob) -> Entry | None:
        """The job waiting or running that holds *job*'s unique_key, if any."""
        if job.unique_key is None or (holder_id := self._unique.get(job.unique_key)) is None:
            return None
        return self._records.get(holder_id)

    @staticmethod
    def _receipt(entry: Entry, *, deduplicated: bool) -> Receipt:
        return Receipt(
            id=entry.id,
            deduplicated=deduplicated,
            queued=entry.queued,
            state=entry.state,
        )
