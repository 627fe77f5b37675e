"""One logical queue spread over several Redis queues (shards), for Redis Cluster.

A queue's keys share one hash slot, so one queue lives on one cluster node.
`ShardedBackend` spreads a logical queue ``thumbnails`` over K queues
``{thumbnails:0}`` … ``{thumbnails:K-1}``, whose slots fall on different nodes:

- a job goes to the shard its id picks (CRC-32 of the id, modulo K), so
  idempotency by id stays exact: the same id always meets its own record;
- a claim looks at every shard, starting from the next one each call, so no
  shard starves; with none ready it waits on all of them at once;
- outcomes go back to the shard that made the claim (its token says which);
- stats, pending jobs and dead letters add up across shards.

Each shard is a whole `RedisBackend` queue, with its own capacity, its own FIFO
order and its own priority levels: there is no order across shards. A claim
takes each shard's highest level first, but may take a lower job from one shard
before a higher job of another that it looks at later.
"""

from __future__ import annotations

import math
import zlib
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, Final, Self, final

import attrs
import trio

from ..._backend_values import (
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
)
from ..._exceptions import BackendUnavailable, ConfigurationError
from ..._metrics import SHARED_COUNTER_NAMES, Gauges, Metrics, MetricsSnapshot, shared_snapshot
from ..._payload import PRIORITIES
from ..._records import JobRecord
from ._backend import RedisBackend
from ._queue_info import QueueInfo

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, Sequence

    from trio.abc import SendChannel

    from ..._records import ErrorInfo
    from ._queue_settings import QueueSettings

_Finished = tuple[str, JobRecord | None]  # a finished job's id and record

__all__ = ["ShardedBackend", "shard_names"]

_MOST_SHARDS: Final = 1024


def shard_names(queue: str, shards: int) -> list[str]:
    """The shard queues of logical queue *queue*: ``{queue:0}`` … ``{queue:K-1}``.

    Braces in *queue* are dropped first: each shard carries a hash tag of its own.
    """
    bare = queue.replace("{", "").replace("}", "")
    return ["{" + f"{bare}:{i}" + "}" for i in range(shards)]


def _shard_of(job_id: str, shards: int) -> int:
    return zlib.crc32(job_id.encode()) % shards


@final
class ShardedBackend:
    """One logical queue spread over several `RedisBackend` queues (see the module).

    Make one with `ShardedBackend.on_redis`, and use it as an async context
    manager, like a `RedisBackend`; `Queue` and `open_worker_pool` take it as any
    backend. Every process that names the same queue and shard count shares it.

    Cancellation: as the `Backend` protocol says, shard by shard; a claim
    gathered from several shards reaches the caller whole.

    Args:
        shards: The shard queues, in order (the order picks each id's shard: keep
            it the same in every process).

    Raises:
        ConfigurationError: No shard, or shards that disagree on their lease.
    """

    def __init__(self, shards: Sequence[RedisBackend]) -> None:
        if not shards:
            raise ConfigurationError("ShardedBackend([]): give at least one shard")
        leases = {shard.default_lease for shard in shards}
        if len(leases) > 1:
            raise ConfigurationError(
                f"ShardedBackend: the shards' min_idle differ ({sorted(leases)}); give them one"
            )
        self._shards = tuple(shards)
        self._turn = 0  # the shard a claim looks at first
        self._gauges = Gauges()
        self._metrics = Metrics(lambda: self._gauges)
        self._stack = AsyncExitStack()
        for shard in self._shards:
            # one process-local view: the pool records its histograms here, and every
            # shard counts its local events into the same metrics
            shard._metrics = self._metrics

    @classmethod
    def on_redis(
        cls,
        url: str,
        *,
        queue: str,
        shards: int,
        capacity: int | None = None,
        **options: Any,
    ) -> ShardedBackend:
        """A logical queue *queue* over *shards* Redis queues, ``{queue:0}`` … ``{queue:K-1}``.

        Args:
            url: As for `RedisBackend`; on a cluster, ``…?cluster=yes``.
            queue: The logical queue's name (without a hash tag: each shard gets
                its own).
            shards: How many shard queues (1 to 1024). Use the same number in
                every process: it decides which shard holds each id.
            capacity: The most jobs waiting in all shards together; each shard
                gets an equal part (rounded up). None: each shard's own.
            options: Every other `RedisBackend` option, given to each shard.

        Raises:
            ConfigurationError: A bad shard count or option; the message says what.
        """
        if (
            isinstance(shards, bool)
            or not isinstance(shards, int)
            or not (1 <= shards <= _MOST_SHARDS)
        ):
            raise ConfigurationError(
                f"ShardedBackend.on_redis(shards={shards!r}): use a whole number from 1 to "
                f"{_MOST_SHARDS}, the same in every process using the queue"
            )
        if "stream" in options:
            raise ConfigurationError(
                "ShardedBackend.on_redis(stream=...): a stream source is not sharded; shard "
                "the stream yourself, one stream source per key"
            )
        if capacity is not None:
            capacity = checked_capacity("ShardedBackend.on_redis", capacity)
        each = None if capacity is None else math.ceil(capacity / shards)
        return cls(
            [
                RedisBackend(url, queue=name, capacity=each, **options)
                for name in shard_names(queue, shards)
            ]
        )

    def __repr__(self) -> str:
        names = ", ".join(shard.keys.ready for shard in self._shards)
        return f"<trioqueue.ShardedBackend shards=[{names}]>"

    async def __aenter__(self) -> Self:
        """Open every shard's client, and check the shard count stored with the queue.

        Raises:
            ConfigurationError: The queue was made with another shard count.
        """
        async with AsyncExitStack() as stack:
            for shard in self._shards:
                await stack.enter_async_context(shard)
            await self._agree_on_count()
            self._stack = stack.pop_all()
        return self

    async def _agree_on_count(self) -> None:
        """Store the shard count in the first shard's settings, or check it against them.

        The count decides which shard holds each id: a process with another one
        would store ids a second time on other shards and strand their jobs. The
        first process to open the queue stores its count (``HSETNX``, so two that
        start together agree on one); every later one must give the same.
        """
        first = self._shards[0]
        given = len(self._shards)
        await first.command("HSETNX", first.keys.config, "shards", given)
        stored = await first.command("HGET", first.keys.config, "shards")
        if isinstance(stored, bytes):
            stored = stored.decode()
        if str(stored) != str(given):
            raise ConfigurationError(
                f"the sharded queue whose first shard is {first.keys.ready!r} is spread over "
                f"{stored} shards; this "
                f"process asked for {given}. Give shards={stored} (--shards {stored}) as every "
                "process using it does: the count decides which shard holds each id. To "
                "change it, drain the queue and delete its keys first"
            )

    async def __aexit__(self, *exc_info: object) -> None:
        await self._stack.aclose()

    # --- what the shards share ----------------------------------------------------------

    @property
    def shards(self) -> tuple[RedisBackend, ...]:
        """The shard queues, in order."""
        return self._shards

    @property
    def capacity(self) -> int:
        """The most jobs waiting in all shards together (each shard holds its part)."""
        return sum(shard.capacity for shard in self._shards)

    @property
    def metrics(self) -> Metrics:
        """Counters and histograms of this process, over every shard."""
        return self._metrics

    @property
    def default_lease(self) -> float:
        """The shards' *min_idle*."""
        return self._shards[0].default_lease

    @property
    def redelivers(self) -> bool:
        """Whether the shards are reliable (at-least-once)."""
        return self._shards[0].redelivers

    @property
    def settings(self) -> QueueSettings:
        """The first shard's settings (`configure` keeps them alike), with the total capacity."""
        return self._total(self._shards[0].settings)

    def _total(self, settings: QueueSettings) -> QueueSettings:
        return attrs.evolve(settings, capacity=settings.capacity * len(self._shards))

    def now(self) -> float:
        """The shards' clock."""
        return self._shards[0].now()

    def shard_for(self, job_id: str) -> RedisBackend:
        """The shard that holds (or would hold) job *job_id*."""
        return self._shards[_shard_of(job_id, len(self._shards))]

    # --- producer side --------------------------------------------------------------------

    async def add(self, job: NewJob, mode: AddMode) -> Receipt:
        """Accept *job* on its shard; see `Backend.add`."""
        return await self.shard_for(job.id).add(job, mode)

    async def add_many(self, jobs: Sequence[NewJob], mode: AddMode) -> list[AddResult]:
        """Accept *jobs*, each on its shard, the shards side by side; one result per job.

        Cancellation: a checkpoint; unlike one queue's, a cancelled call may have
        accepted any of the jobs, not only those before the one it waited on:
        enqueue them all again with the same ids to finish (the accepted ones are
        deduplicated).
        """
        await trio.lowlevel.checkpoint()  # a checkpoint, even when no shard is called
        groups: dict[int, list[int]] = {}
        for index, job in enumerate(jobs):
            groups.setdefault(_shard_of(job.id, len(self._shards)), []).append(index)
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
            groups.setdefault(_shard_of(job_id, len(self._shards)), []).append(job_id)
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

    # --- worker side ------------------------------------------------------------------------

    def _wrap(self, shard: int, claims: list[Claim]) -> list[Claim]:
        return [attrs.evolve(claim, token=f"{shard}/{claim.token}") for claim in claims]

    def _unwrap(self, claim: Claim) -> tuple[RedisBackend, Claim]:
        shard, _, token = claim.token.partition("/")
        return self._shards[int(shard)], attrs.evolve(claim, token=token)

    def _by_shard(self, claims: Sequence[Claim]) -> dict[int, list[Claim]]:
        groups: dict[int, list[Claim]] = {}
        for claim in claims:
            shard, _, token = claim.token.partition("/")
            groups.setdefault(int(shard), []).append(attrs.evolve(claim, token=token))
        return groups

    async def claim(self, max_jobs: int, *, lease: float, block: float) -> list[Claim]:
        """Claim from every shard, starting at the next one each call; see `Backend.claim`.

        With none ready anywhere, waits on all the shards at once (each shard's
        own cancellable wait), takes what the first one to find a job claimed,
        and gives back at once (uncounted) what others claimed meanwhile. A
        shard that cannot be reached is passed over while others have jobs;
        when none has, its error is raised (the pool backs off).
        """
        count = len(self._shards)
        order = [(self._turn + k) % count for k in range(count)]
        self._turn = (self._turn + 1) % count
        claims: list[Claim] = []
        failure: BackendUnavailable | None = None
        # cancellable before the first shard is asked, not after: a claim made on one
        # shard must reach the caller whatever the next one says
        await trio.lowlevel.checkpoint_if_cancelled()
        with trio.CancelScope(shield=True):
            for shard in order:
                try:
                    got = await self._shards[shard].claim(
                        max_jobs - len(claims), lease=lease, block=0
                    )
                except BackendUnavailable as exc:
                    failure = failure or exc
                    continue
                if got and got[0].suspect:
                    # a suspect comes alone: give back what the other shards gave
                    await self.release(claims)
                    return self._wrap(shard, got)
                claims += self._wrap(shard, got)
                if len(claims) >= max_jobs:
                    return claims
        if claims or block <= 0:
            return claims
        if failure is not None:
            raise failure
        return await self._wait_on_all(order, max_jobs, lease, block)

    async def _wait_on_all(
        self, order: list[int], max_jobs: int, lease: float, block: float
    ) -> list[Claim]:
        found: list[tuple[int, list[Claim]]] = []
        errors: list[Exception] = []

        async def wait(shard: int, done: trio.CancelScope) -> None:
            try:
                got = await self._shards[shard].claim(max_jobs, lease=lease, block=block)
            except Exception as exc:
                errors.append(exc)
                done.cancel()
                return
            if got:
                found.append((shard, got))
                done.cancel()

        try:
            async with trio.open_nursery() as nursery:
                for shard in order:
                    nursery.start_soon(wait, shard, nursery.cancel_scope)
        except BaseException:
            # cancelled from outside: what was claimed meanwhile goes back
            with trio.CancelScope(shield=True):
                for shard, got in found:
                    await self._shards[shard].release(got)
            raise
        if not found:
            if errors:
                raise errors[0]
            return []
        (first, taken), *others = found
        with trio.CancelScope(shield=True):  # what was taken must reach the caller
            for shard, got in others:
                await self._shards[shard].release(got)
        return self._wrap(first, taken)

    async def renew(self, claims: Sequence[Claim], *, lease: float) -> Renewal:
        """Extend the leases of the claims still held, shard by shard; see `Backend.renew`.

        Cancellation: a checkpoint; a cancelled call keeps the leases it renewed on
        the shards before the cancellation.
        """
        await trio.lowlevel.checkpoint()  # a checkpoint, even when no shard is called
        lost: set[str] = set()
        cancel: set[str] = set()
        for shard, group in self._by_shard(claims).items():
            found = await self._shards[shard].renew(group, lease=lease)
            lost.update(f"{shard}/{token}" for token in found.lost)
            cancel.update(f"{shard}/{token}" for token in found.cancel)
        return Renewal(lost=frozenset(lost), cancel=frozenset(cancel))

    async def cancel(self, job_id: str) -> CancelResult:
        """Cancel job *job_id* on its shard; see `Backend.cancel`."""
        return await self.shard_for(job_id).cancel(job_id)

    async def cancel_claim(self, claim: Claim) -> bool:
        """End a claim whose job was cancelled, on its shard; False if it is stale."""
        shard, own = self._unwrap(claim)
        return await shard.cancel_claim(own)

    async def ack(
        self, claim: Claim, result: bytes | None = None, *, result_error: str | None = None
    ) -> bool:
        """Complete the job on its shard, keeping *result*; False if the claim is stale."""
        shard, own = self._unwrap(claim)
        return await shard.ack(own, result, result_error=result_error)

    async def retry_later(
        self, claim: Claim, error: ErrorInfo | None, *, delay: float = 0.0
    ) -> bool:
        """End an attempt that will be retried; see `Backend.retry_later`."""
        shard, own = self._unwrap(claim)
        return await shard.retry_later(own, error, delay=delay)

    async def requeue(self, claim: Claim) -> bool:
        """Put a job waiting to retry back on its shard."""
        shard, own = self._unwrap(claim)
        return await shard.requeue(own)

    async def dead_letter(self, claim: Claim, error: ErrorInfo | None, reason: str) -> bool:
        """End the last attempt and keep the job as a dead letter of its shard."""
        shard, own = self._unwrap(claim)
        return await shard.dead_letter(own, error, reason)

    async def drop(self, claim: Claim, reason: str) -> bool:
        """End the attempt and drop the job."""
        shard, own = self._unwrap(claim)
        return await shard.drop(own, reason)

    async def release(self, claims: Sequence[Claim]) -> int:
        """Put unfinished claims back on their shards at once; how many were still held.

        Cancellation: a checkpoint; it works shard by shard, so a cancelled call
        keeps the claims put back before the cancellation (the others stay claimed
        until given back again or their leases run out). A pool releases shielded.
        """
        await trio.lowlevel.checkpoint()  # a checkpoint, even when no shard is called
        return sum(
            [
                await self._shards[shard].release(group)
                for shard, group in self._by_shard(claims).items()
            ]
        )

    async def sweep(self) -> SweepReport:
        """Sweep every shard; the reports added up.

        Cancellation: a checkpoint; shard by shard, each in slices, so a cancelled
        sweep keeps what it did before the cancellation.
        """
        reports = [await shard.sweep() for shard in self._shards]
        return SweepReport(
            scheduled=sum(r.scheduled for r in reports),
            recovered=sum(r.recovered for r in reports),
            evicted=sum(r.evicted for r in reports),
            due=sum(r.due for r in reports),
        )
