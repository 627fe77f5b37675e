"""The sharded backend's worker side: claims across shards, each outcome to its claim's shard."""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from ..._backend_values import CancelResult, Claim, Renewal, SweepReport
from ..._exceptions import BackendUnavailable

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..._records import ErrorInfo
from ._shards import ShardsBase

__all__ = ["ShardedWork"]


class ShardedWork(ShardsBase):
    """`ShardedBackend` methods: claims across the shards, outcomes to their shards."""

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

    async def set_progress(self, claim: Claim, progress: bytes) -> bool:
        """Keep *progress* on the job's record, on its shard; see `Backend.set_progress`."""
        shard, own = self._unwrap(claim)
        return await shard.set_progress(own, progress)

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
