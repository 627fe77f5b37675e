"""The producer's controls over a whole queue: pause and resume, rate limits."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._rate import RateLimit, RateLimits

if TYPE_CHECKING:
    from ._backend import Backend

__all__ = ["QueueControls"]


class QueueControls:
    """`Queue` methods that change how the whole queue gives out jobs."""

    _backend: Backend  # set by Queue.__init__

    async def pause(self) -> None:
        """Pause the queue: workers finish the jobs they hold and claim no new ones.

        Producers go on enqueueing; the jobs wait, and nothing is lost. On Redis
        every process using the queue stops claiming at once, and the pause lasts
        until `resume` (from the command line: ``trioqueue queue pause``).

        Always checkpoints. If cancelled, nothing changed (on a sharded queue, the
        shards paused before the cancellation stay paused: call it again).
        """
        await self._backend.pause()

    async def resume(self) -> None:
        """Resume a paused queue: its pools claim again within their *poll_interval*.

        Always checkpoints. If cancelled, nothing changed (sharded: as `pause`).
        """
        await self._backend.resume()

    async def is_paused(self) -> bool:
        """Whether the queue is paused.

        Always checkpoints; it only reads, so a cancelled call changed nothing.
        """
        return await self._backend.is_paused()

    async def set_rate_limits(
        self, *, queue: RateLimit | None = None, per_key: RateLimit | None = None
    ) -> None:
        """Limit how fast the queue's jobs start, replacing its limits (None: no limit).

        *queue* bounds every start, *per_key* the starts of the jobs enqueued with
        one ``rate_key`` (each key on its own: a customer, an upstream account).
        E.g. ``set_rate_limits(queue=RateLimit(100), per_key=RateLimit(2, per=1.0))``:
        at most 100 starts a second in all, and 2 for any one customer. A start is
        a claim: retries count. Workers wait for the start a limit allows rather
        than claim; a job over its key's limit waits (`JobState.SCHEDULED`) for the
        start its key gives it while the jobs of other keys go ahead. Nothing is
        lost or dropped: a limit only delays. On Redis the limits are stored with
        the queue and kept across every process and machine using it, at once
        (from the command line: ``trioqueue queue rate-limit``).

        Always checkpoints. If cancelled, nothing changed.

        Raises:
            ConfigurationError: The queue is sharded: its shards live in different
                hash slots, where no script can keep one limit.
        """
        await self._backend.set_rate_limits(RateLimits(queue=queue, per_key=per_key))

    async def rate_limits(self) -> RateLimits:
        """The queue's rate limits (`set_rate_limits`).

        Always checkpoints; it only reads, so a cancelled call changed nothing.
        """
        return await self._backend.rate_limits()
