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

    from ..._rate import RateLimits

from ._base import MemoryBase
from ._entry import CANCELLED_WAITING, Entry

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
        while True:
            while not (allowed := self._claimable(now)):
                # until woken, or until the next due time (then it is on the ready queue)
                # or the queue's rate limit allows a start; while paused, until resumed
                # (a resume wakes every claimer)
                due = deadline if self._paused else min(deadline, self._work_due(now))
                self._claimers += 1  # see _unclaim_token
                try:
                    with trio.move_on_at(due) as waited:
                        await self._work.park()
                finally:
                    self._claimers -= 1
                now = self.now()
                self._fill(now)
                idle = not waited.cancelled_caught and not self._held()
                if not self._claimable(now) and (idle or now >= deadline):
                    await trio.lowlevel.checkpoint_if_cancelled()
                    self._touch(now)
                    return []
            self._touch(now)
            claims = self._take(min(max_jobs, allowed), now, lease)
            self._fill(now)
            if claims or now >= deadline:
                break
            # every job it looked at was over its rate key's limit: wait for the next
        await trio.lowlevel.cancel_shielded_checkpoint()
        return claims

    def _claim_now(self, max_jobs: int, lease: float) -> list[Claim]:
        """Claim up to *max_jobs* jobs ready now, without waiting; [] when none is.

        For a pool in this process (``_pool/_inline.py``): `claim` without its
        checkpoints and its wait.
        """
        now = self.now()
        if self._scheduled.next_due() <= now or self._unqueued:
            self._fill(now)  # what came due, what waited for room
        if not (allowed := self._claimable(now)):
            return []
        self._touch(now)
        claims = self._take(min(max_jobs, allowed), now, lease)
        self._fill(now)  # into the room it made; producers waiting for room hear of it
        return claims

    def _waits_untimed(self) -> bool:
        """Whether a claimer with nothing to take may wait without a deadline.

        Only a new job (or a resume, a changed rate limit, a recovery) can then
        give it one: nothing is stored to come due, no queue rate limit holds a
        start back, and the queue is not paused.
        """
        return not self._scheduled and not self._rates.limits_queue and not self._paused

    async def _wait_for_work(self) -> None:
        """Wait until a job may be ready (or `_wake_claimers`); see `_waits_untimed`."""
        await self._work.park()

    def _wake_claimers(self) -> None:
        """Wake every claimer waiting in this process, to look again."""
        self._work.unpark_all()

    def _claimable(self, now: float) -> int:
        """How many ready jobs a claim may take now: none while paused or rate limited."""
        if self._paused or not self._ready:
            return 0
        return self._rates.room(now, len(self._ready))

    def _work_due(self, now: float) -> float:
        """When a claim may find work: the next due time, or the queue limit's next start."""
        due = self._next_due()
        return min(due, self._rates.next_start(now)) if self._ready else due

    def _take(self, most: int, now: float, lease: float) -> list[Claim]:
        """Claim up to *most* ready jobs; those over their rate key's limit wait their turn."""
        claims: list[Claim] = []
        while self._ready and len(claims) < most:
            entry = self._ready.pop()
            if entry.rate_key is not None and not self._key_allows(entry, now):
                continue
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
        self._rates.started(now, len(claims))
        return claims

    def _key_allows(self, entry: Entry, now: float) -> bool:
        """Whether *entry*, just taken off the ready queue, may start under its key's limit.

        If not, it waits in its key's line (`JobState.SCHEDULED`, or still
        `JobState.FAILED_RETRY` for a retry) for the start its key gives it.
        """
        key = entry.rate_key
        wait_until = None if key is None else self._rates.turn(entry.id, key, now)
        if wait_until is None:
            entry.promised = False
            return True
        entry.promised = True
        if entry.state is JobState.RECEIVED:
            entry.move(JobState.SCHEDULED, now)
        self._defer(entry, wait_until)
        return False

    async def set_rate_limits(self, limits: RateLimits) -> None:
        """Limit how fast jobs start; see `Backend.set_rate_limits`."""
        await trio.lowlevel.checkpoint()
        self._rates.set(limits)
        self._work.unpark_all()  # a claimer waiting out the old limit looks again

    async def rate_limits(self) -> RateLimits:
        """The queue's rate limits; see `Backend.rate_limits`."""
        await trio.lowlevel.checkpoint()
        return self._rates.limits

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
        landed = self._cancel_claim_now(claim)
        await trio.lowlevel.cancel_shielded_checkpoint()
        return landed
