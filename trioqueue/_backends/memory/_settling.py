"""The memory backend's outcomes: settling and releasing claims, schedule marks, the sweep."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import trio

from ..._backend_values import Claim, SweepReport
from ..._outcome import Ack, Cancel, DeadLetter, Discard, Outcome, RetryAfter
from ..._records import ErrorInfo, JobState

if TYPE_CHECKING:
    from collections.abc import Sequence

from ._base import MemoryBase
from ._entry import CANCELLED_HELD, CLAIMED, ENDED_HOW

__all__ = ["Settling"]


class Settling(MemoryBase):
    """MemoryBackend methods: settling and releasing claims, schedule marks, the sweep."""

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
        landed = self._ack_now(claim, result, result_error)
        await trio.lowlevel.cancel_shielded_checkpoint()
        return landed

    async def retry_later(
        self, claim: Claim, error: ErrorInfo | None, *, delay: float = 0.0
    ) -> bool:
        """End an attempt that will be retried; the claim keeps the job.

        The next attempt is due *delay* seconds from now (see `Backend.retry_later`).
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        landed = self._retry_now(claim, error, delay)
        await trio.lowlevel.cancel_shielded_checkpoint()
        return landed

    async def requeue(self, claim: Claim) -> bool:
        """Put a job waiting to retry back on the queue (a cancelled one ends instead)."""
        await trio.lowlevel.checkpoint_if_cancelled()
        entry = self._live(claim)
        if entry is not None:
            entry.due = None
            if entry.cancel_requested:
                self._cancel_now(entry, self.now(), CANCELLED_HELD)
            else:
                self._schedule(entry, self.now())
            self._unclaim(claim)
        await trio.lowlevel.cancel_shielded_checkpoint()
        return entry is not None

    async def dead_letter(self, claim: Claim, error: ErrorInfo | None, reason: str) -> bool:
        """End the last attempt and keep the job as a dead letter (a cancelled one ends so)."""
        await trio.lowlevel.checkpoint_if_cancelled()
        landed = self._dead_letter_now(claim, error, reason)
        await trio.lowlevel.cancel_shielded_checkpoint()
        return landed

    async def drop(self, claim: Claim, reason: str) -> bool:
        """End the attempt and drop the job."""
        await trio.lowlevel.checkpoint_if_cancelled()
        landed = self._drop_now(claim, reason)
        await trio.lowlevel.cancel_shielded_checkpoint()
        return landed

    def _settle_now(self, claim: Claim, outcome: Outcome) -> bool:
        """Record *outcome* of *claim* at once, as the call for it would; False if stale.

        For a pool in this process (``_pool/_inline.py``): a synchronous call
        cannot be cut half-way, so it needs no shield, deadline or retry.
        """
        match outcome:
            case Ack(result, result_error):
                return self._ack_now(claim, result, result_error)
            case RetryAfter(delay, error):
                return self._retry_now(claim, error, delay)
            case DeadLetter(reason, error):
                return self._dead_letter_now(claim, error, reason)
            case Discard(reason):
                return self._drop_now(claim, reason)
            case Cancel():
                return self._cancel_claim_now(claim)

    def _ack_now(self, claim: Claim, result: bytes | None, result_error: str | None) -> bool:
        """`ack`'s change (see there)."""
        entry = self._claims.get(claim.token)
        token = claim.token
        now = self.now()
        if entry is None:
            entry = self._records.get(claim.job.id)
            if (
                entry is None
                or entry.token is None
                or entry.state not in CLAIMED
                or int(claim.token) <= entry.life_from
            ):
                entry = self._live(claim)  # stale: counted as such
            else:
                token = entry.token  # another run's claim: it ends here
                if entry.state is JobState.FAILED_RETRY:
                    entry.move(JobState.PROCESSING, now)
                    entry.due = None  # its backoff ends with it
        if entry is None:
            return False
        self._touch(now)
        entry.move(JobState.COMPLETED, now)
        entry.attempts += 1
        if result is not None or entry.result is not None:
            self._bytes += len(result or b"") - len(entry.result or b"")
        entry.result, entry.result_error = result, result_error
        self._metrics.succeeded += 1
        self._metrics.end_to_end.observe(now - entry.created_at)
        self._finish(entry, now)
        if entry.followers:
            self._release_followers(entry, now)
        self._unclaim_token(token)
        return True

    def _retry_now(self, claim: Claim, error: ErrorInfo | None, delay: float) -> bool:
        """`retry_later`'s change (see there)."""
        entry = self._live(claim)
        if entry is None:
            return False
        now = self.now()
        entry.move(JobState.FAILED_RETRY, now)
        entry.due = now + delay
        entry.attempts += 1
        self._metrics.processed += 1
        self._metrics.retries += 1
        if error is not None:
            entry.last_error = attrs.evolve(error, attempt=entry.attempts)
            self._metrics.failed += 1
        return True

    def _dead_letter_now(self, claim: Claim, error: ErrorInfo | None, reason: str) -> bool:
        """`dead_letter`'s change (see there)."""
        entry = self._live(claim)
        if entry is not None and entry.cancel_requested:
            self._unclaim(claim)
            self._cancel_now(entry, self.now(), CANCELLED_HELD)
        elif entry is not None:
            entry.move(JobState.FAILED, self.now())
            entry.attempts += 1
            entry.reason = reason
            self._metrics.processed += 1
            self._metrics.dead_lettered += 1
            if error is not None:
                entry.last_error = attrs.evolve(error, attempt=entry.attempts)
                self._metrics.failed += 1
            self._dead[entry.id] = None
            self._let_key_go(entry)
            self._waiters.notify(entry.id)
            self._fail_followers(entry, ENDED_HOW[JobState.FAILED], self.now())
            self._unclaim(claim)
        return entry is not None

    def _drop_now(self, claim: Claim, reason: str) -> bool:
        """`drop`'s change (see there)."""
        entry = self._live(claim)
        if entry is not None:
            now = self.now()
            entry.move(JobState.DROPPED, now)
            entry.attempts += 1
            entry.reason = reason
            self._metrics.dropped += 1
            self._finish(entry, now)
            self._fail_followers(entry, ENDED_HOW[JobState.DROPPED], now)
            self._unclaim(claim)
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
