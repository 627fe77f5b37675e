"""The memory backend's claims: taking jobs, renewing and cancelling them."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import trio

from ..._backend_values import CancelResult, Claim, Renewal
from ..._exceptions import JobNotFound
from ..._records import TERMINAL_STATES, Job, JobState

if TYPE_CHECKING:
    from collections.abc import Sequence

from ._base import MemoryBase
from ._entry import CANCELLED_HELD, CANCELLED_WAITING

__all__ = ["Claiming"]


class Claiming(MemoryBase):
    """MemoryBackend methods: taking jobs, renewing and cancelling them."""

    async def claim(self, max_jobs: int, *, lease: float, block: float) -> list[Claim]:
        """Claim up to *max_jobs* ready jobs; see `Backend.claim`.

        No job is ever a suspect: the workers of one process cannot die one at a time.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        now = self.now()
        self._fill(now)  # what came due
        deadline = now + block
        while not self._ready or self._paused:
            # until woken, or until the next due time (then it is on the ready queue);
            # while paused, until resumed (a resume wakes every claimer)
            due = deadline if self._paused else min(deadline, self._next_due())
            with trio.move_on_at(due) as waited:
                await self._work.park()
            now = self.now()
            self._fill(now)
            idle = not waited.cancelled_caught and not self._held()
            if (not self._ready or self._paused) and (idle or now >= deadline):
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
                headers=dict(entry.headers),
            )
            claims.append(Claim(job=job, token=token, ready_at=entry.ready_at))
        self._fill(now)
        await trio.lowlevel.cancel_shielded_checkpoint()
        return claims

    async def set_progress(self, claim: Claim, progress: bytes) -> bool:
        """Keep *progress* on the claimed job's record; see `Backend.set_progress`."""
        await trio.lowlevel.checkpoint_if_cancelled()
        entry = self._live(claim)
        if entry is not None:
            self._bytes += len(progress) - len(entry.progress or b"")
            entry.progress = progress
        await trio.lowlevel.cancel_shielded_checkpoint()
        return entry is not None

    async def pause(self) -> None:
        """Claim nothing until `resume`; see `Backend.pause`."""
        await trio.lowlevel.checkpoint()
        self._paused = True

    async def resume(self) -> None:
        """Claim again; see `Backend.resume`."""
        await trio.lowlevel.checkpoint()
        self._paused = False
        self._work.unpark_all()

    async def is_paused(self) -> bool:
        """Whether the queue is paused; see `Backend.is_paused`."""
        await trio.lowlevel.checkpoint()
        return self._paused

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
            self._unschedule(entry)
            self._cancel_now(entry, now, CANCELLED_WAITING)
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
            self._cancel_now(entry, self.now(), CANCELLED_HELD)
        await trio.lowlevel.cancel_shielded_checkpoint()
        return entry is not None
