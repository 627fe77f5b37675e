"""The sharded backend's producer side and views: adding, records, counts, dead letters."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ..._backend_values import (
    AddMode,
    AddResult,
    NewJob,
    Receipt,
    checked_capacity,
    checked_page,
    checked_place,
)
from ..._exceptions import ConfigurationError
from ..._metrics import SHARED_COUNTER_NAMES, Gauges, MetricsSnapshot, shared_snapshot
from ..._payload import PRIORITIES
from ..._rate import RateLimits
from ..._records import JobRecord
from ._queue_info import QueueInfo

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, Sequence

    from trio.abc import SendChannel

    from ._backend import RedisBackend
    from ._queue_settings import QueueSettings
from ._shards import ShardsBase, shard_of

__all__ = ["ShardedViews"]


_Finished = tuple[str, JobRecord | None]  # a finished job's id and record


class ShardedViews(ShardsBase):
    """`ShardedBackend` methods: adding jobs and looking at them, across the shards."""

    async def add(self, job: NewJob, mode: AddMode) -> Receipt:
        """Accept *job* on its shard; see `Backend.add`."""
        _refuse_linked_jobs([job])
        return await self.shard_for(job.id).add(job, mode)

    async def add_many(self, jobs: Sequence[NewJob], mode: AddMode) -> list[AddResult]:
        """Accept *jobs*, each on its shard, the shards side by side; one result per job.

        Cancellation: a checkpoint; unlike one queue's, a cancelled call may have
        accepted any of the jobs, not only those before the one it waited on:
        enqueue them all again with the same ids to finish (the accepted ones are
        deduplicated).
        """
        await trio.lowlevel.checkpoint()  # a checkpoint, even when no shard is called
        _refuse_linked_jobs(jobs)
        groups: dict[int, list[int]] = {}
        for index, job in enumerate(jobs):
            groups.setdefault(shard_of(job.id, len(self._shards)), []).append(index)
        results: list[AddResult | None] = [None] * len(jobs)
        errors: list[Exception] = []

        async def one(shard: int, indices: list[int]) -> None:
            try:
                done = await self._shards[shard].add_many([jobs[i] for i in indices], mode)
            except Exception as exc:  # raised below, alone: not as an exception group
                errors.append(exc)
                return
            for i, result in zip(indices, done, strict=True):
                results[i] = result

        async with trio.open_nursery() as nursery:
            for shard, indices in groups.items():
                nursery.start_soon(one, shard, indices)
        if errors:
            raise errors[0]
        return [result for result in results if result is not None]

    async def status(self, job_id: str) -> JobRecord | None:
        """The record of *job_id*, from its shard."""
        return await self.shard_for(job_id).status(job_id)

    @trio.as_safe_channel
    async def finished(
        self, job_ids: Sequence[str]
    ) -> AsyncGenerator[tuple[str, JobRecord | None], None]:
        """Each of *job_ids* with its record as it finishes, from its shard's events."""
        groups: dict[int, list[str]] = {}
        for job_id in dict.fromkeys(job_ids):
            groups.setdefault(shard_of(job_id, len(self._shards)), []).append(job_id)
        send, receive = trio.open_memory_channel[_Finished](0)

        async def one(
            shard: RedisBackend, ids: list[str], out: SendChannel[tuple[str, JobRecord | None]]
        ) -> None:
            async with out, shard.finished(ids) as found:
                async for pair in found:
                    await out.send(pair)

        async with trio.open_nursery() as nursery:
            async with send:
                for shard, ids in groups.items():
                    nursery.start_soon(one, self._shards[shard], ids, send.clone())
            async with receive:
                async for pair in receive:
                    yield pair

    async def pending(self) -> int:
        """Jobs accepted and not finished, in all shards."""
        return sum([await shard.pending() for shard in self._shards])

    async def job_ids(self, place: str, *, limit: int = 100) -> list[str]:
        """The ids of up to *limit* jobs in *place*, shard by shard; see `Backend.job_ids`."""
        checked_place(place, limit)
        found: list[str] = []
        for shard in self._shards:
            if len(found) >= limit:
                break
            found += await shard.job_ids(place, limit=limit - len(found))
        return found

    async def dead_letters(self, *, offset: int = 0, limit: int | None = None) -> list[JobRecord]:
        """The dead letters of every shard, oldest first; see `Backend.dead_letters`.

        A page reads up to *offset* + *limit* letters of each shard, and merges them.
        """
        offset, limit = checked_page(offset, limit)
        most = None if limit is None else offset + limit
        found = [
            record for shard in self._shards for record in await shard.dead_letters(limit=most)
        ]
        ordered = sorted(found, key=lambda record: record.updated_at)
        return ordered[offset : None if limit is None else offset + limit]

    async def requeue_dead(self, job_id: str) -> JobRecord:
        """Put a dead letter back on its shard; see `Backend.requeue_dead`."""
        return await self.shard_for(job_id).requeue_dead(job_id)

    async def run_now(self, job_id: str) -> JobRecord:
        """Make a job on its shard due now; see `Backend.run_now`."""
        return await self.shard_for(job_id).run_now(job_id)

    async def mark_schedule(self, name: str, tick: float) -> None:
        """Record schedule *name*'s latest tick stored, on the first shard."""
        await self._shards[0].mark_schedule(name, tick)

    async def schedule_marks(self) -> dict[str, float]:
        """Each schedule's latest tick stored, from the first shard."""
        return await self._shards[0].schedule_marks()

    async def purge_dead(self, job_id: str | None = None) -> int:
        """Forget one dead letter (on its shard), or every shard's; how many.

        Cancellation: a checkpoint; all of them are forgotten shard by shard, in
        slices, so a cancelled call keeps what it forgot before the cancellation.
        """
        if job_id is not None:
            return await self.shard_for(job_id).purge_dead(job_id)
        return sum([await shard.purge_dead() for shard in self._shards])

    async def stats(self) -> MetricsSnapshot:
        """The shards' shared counters and gauges added up, with this process's histograms."""
        snaps = [await shard.stats() for shard in self._shards]
        self._gauges = Gauges(
            **{
                field.name: sum(getattr(snap.gauges, field.name) for snap in snaps)
                for field in attrs.fields(Gauges)
                if field.name != "ready_by_priority"
            },
            ready_by_priority={
                level: sum(snap.gauges.ready_by_priority[level] for snap in snaps)
                for level in PRIORITIES
            },
        )
        counters = {
            name: sum(getattr(snap, name) for snap in snaps) for name in SHARED_COUNTER_NAMES
        }
        return shared_snapshot(counters, self._gauges, self._metrics.snapshot())

    async def inspect(self) -> QueueInfo:
        """What all the shards hold, added up (the oldest claim of any).

        Cancellation: a checkpoint; it only reads.
        """
        infos = [await shard.inspect() for shard in self._shards]
        ages = [info.oldest_claim_age for info in infos if info.oldest_claim_age is not None]
        return QueueInfo(
            ready=sum(info.ready for info in infos),
            stored=sum(info.stored for info in infos),
            processing=sum(info.processing for info in infos),
            claims=sum(info.claims for info in infos),
            oldest_claim_age=max(ages) if ages else None,
            dead=sum(info.dead for info in infos),
            finished_kept=sum(info.finished_kept for info in infos),
            scheduled=sum(info.scheduled for info in infos),
            deferred=sum(info.deferred for info in infos),
        )

    async def stored_settings(self) -> QueueSettings | None:
        """The stored settings of the first shard used (total capacity); None if none was.

        Cancellation: a checkpoint; it only reads.
        """
        for shard in self._shards:
            stored = await shard.stored_settings()
            if stored is not None:
                return self._total(stored)
        return None

    async def pause(self) -> None:
        """Pause every shard, in order; see `Backend.pause`.

        Cancellation: a checkpoint; once the first shard is paused it pauses them all.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        with trio.CancelScope(shield=True):
            for shard in self._shards:
                await shard.pause()

    async def resume(self) -> None:
        """Resume every shard, in order; see `Backend.resume` (cancelled, as `pause`)."""
        await trio.lowlevel.checkpoint_if_cancelled()
        with trio.CancelScope(shield=True):
            for shard in self._shards:
                await shard.resume()

    async def is_paused(self) -> bool:
        """Whether any shard is paused (all are, unless a `pause` or `resume` was cut short)."""
        return any([await shard.is_paused() for shard in self._shards])

    async def set_rate_limits(self, limits: RateLimits) -> None:
        """Refused for limits: no script can keep one limit across the shards' hash slots.

        Removing every limit (``RateLimits()``) is allowed, and removes any a shard has.

        Raises:
            ConfigurationError: A limit is given.
        """
        if limits != RateLimits():
            raise ConfigurationError(
                "a sharded queue cannot keep a rate limit: its shards live in different hash "
                "slots, and each claim script sees one; rate-limit an unsharded queue "
                "(RedisBackend(url, queue=...)), which a Redis Cluster serves as well"
            )
        await trio.lowlevel.checkpoint_if_cancelled()
        with trio.CancelScope(shield=True):
            for shard in self._shards:
                await shard.set_rate_limits(limits)

    async def rate_limits(self) -> RateLimits:
        """The first shard's limits: none, unless a shard was limited by itself."""
        return await self._shards[0].rate_limits()

    async def configure(self, **changes: Any) -> QueueSettings:
        """`RedisBackend.configure` on every shard, in order; the settings, as `settings`.

        A *capacity* is the total, split like `on_redis` splits it. Shards no job
        reached yet are set up first (with this backend's own settings), so that
        all of them change. A shard that refuses a change (a mode change while it
        holds jobs) stops the call there, with the shards before it changed:
        drain the queue and run it again.

        Cancellation: a checkpoint; it works shard by shard, so a cancelled call
        keeps the shards changed before the cancellation: run it again to finish.
        """
        stored = [await shard.stored_settings() is not None for shard in self._shards]
        if any(stored):
            for shard, found in zip(self._shards, stored, strict=True):
                if not found:
                    await shard.sweep()  # its first writing script stores its settings
        capacity = changes.pop("capacity", None)
        if capacity is not None:
            capacity = checked_capacity("ShardedBackend.configure", capacity)
            changes["capacity"] = math.ceil(capacity / len(self._shards))
        changed = [await shard.configure(**changes) for shard in self._shards]
        return self._total(changed[0])


def _refuse_linked_jobs(jobs: Sequence[NewJob]) -> None:
    """Raise ValueError if a job runs after others or has a unique key: shards are blind."""
    if any(job.after for job in jobs):
        raise ValueError(
            "a sharded queue cannot run a job after others: it spreads jobs over "
            "independent queues by id, and each settles its own; use one RedisBackend "
            "for jobs that run after others (on a Redis Cluster, one queue's keys share "
            "a slot)"
        )
    if any(job.unique_key is not None for job in jobs):
        raise ValueError(
            "a sharded queue cannot keep one job per unique_key: it spreads jobs over "
            "independent queues by id, and a key's job may be on any of them; use one "
            "RedisBackend for keyed jobs (on a Redis Cluster, one queue's keys share a slot)"
        )
