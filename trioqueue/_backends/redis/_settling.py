"""The Redis backend's outcomes: settling, releasing and cancelling claimed jobs."""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from ..._backend_values import CancelResult, Claim
from ..._exceptions import JobNotFound
from ..._records import ErrorInfo
from ._connection import text

if TYPE_CHECKING:
    from collections.abc import Sequence

from ._base import RedisBase

__all__ = ["Settling"]


class Settling(RedisBase):
    """RedisBackend methods: settling, releasing and cancelling claimed jobs."""

    async def cancel(self, job_id: str) -> CancelResult:
        """Cancel job *job_id*, at once or through its pool; see `Backend.cancel`.

        A waiting job leaves the ready list with ``LREM``, which reads the list: a
        cancel costs time in the length of the queue, about a millisecond per
        100,000 jobs waiting.
        """
        answer = text(await self._run("cancel", job_id))
        if answer == "unknown":
            raise JobNotFound(job_id)
        return CancelResult(answer)

    async def cancel_claim(self, claim: Claim) -> bool:
        """End a claim whose job was cancelled; False if the claim is stale."""
        return await self._settle(claim, "cancel")

    async def _settle(
        self, claim: Claim, kind: str, error: ErrorInfo | None = None, reason: str | bytes = ""
    ) -> bool:
        age = await self._outcomes.submit(
            (
                claim.job.id,
                claim.token,
                kind,
                error.type if error else "",
                error.message if error else "",
                reason,
                error.traceback if error else "",
            )
        )
        local = self._metrics
        if not age:
            local.stale += 1
            return False
        if kind == "cancel":
            local.cancelled += 1
        elif kind != "requeue":
            local.processed += 1
            local.failed += error is not None and error.type != ""
        if kind == "ack":
            local.succeeded += 1
            local.end_to_end.observe(float(age))
        elif kind == "retry":
            local.retries += 1
        elif kind == "dead":
            local.dead_lettered += 1
        elif kind == "drop":
            local.dropped += 1
        return True

    async def set_progress(self, claim: Claim, progress: bytes) -> bool:
        """Keep *progress* on the claimed job's record; see `Backend.set_progress`."""
        return bool(await self._run("progress", claim.job.id, claim.token, progress))

    async def ack(
        self, claim: Claim, result: bytes | None = None, *, result_error: str | None = None
    ) -> bool:
        """Complete the job, keeping *result* on its record; False if the claim is stale."""
        if result is None and result_error is None:
            return await self._settle(claim, "ack")
        # settle.lua takes the result in the reason slot, why it is missing in the message's
        missing = None if result_error is None else ErrorInfo("", result_error)
        return await self._settle(claim, "ack", missing, "" if result is None else result)

    async def retry_later(
        self, claim: Claim, error: ErrorInfo | None, *, delay: float = 0.0
    ) -> bool:
        """End an attempt that will be retried; the claim keeps the job.

        The next attempt is due *delay* seconds from now on the server's clock (see
        `Backend.retry_later`).
        """
        # the outcome's reason slot carries the delay: a retry has no reason
        return await self._settle(claim, "retry", error, repr(float(delay)))

    async def requeue(self, claim: Claim) -> bool:
        """Put a job waiting to retry back on the queue."""
        return await self._settle(claim, "requeue")

    async def dead_letter(self, claim: Claim, error: ErrorInfo | None, reason: str) -> bool:
        """End the last attempt and keep the job as a dead letter."""
        return await self._settle(claim, "dead", error, reason)

    async def drop(self, claim: Claim, reason: str) -> bool:
        """End the attempt and drop the job."""
        return await self._settle(claim, "drop", None, reason)

    async def release(self, claims: Sequence[Claim]) -> int:
        """Put unfinished claims back at once; return how many were still held."""
        pairs = [part for claim in claims for part in (claim.job.id, claim.token)]
        if not pairs:
            await trio.lowlevel.checkpoint()  # a checkpoint, as every call is
            return 0
        released = int(await self._run("release", *pairs))
        self._metrics.released += released
        return released
