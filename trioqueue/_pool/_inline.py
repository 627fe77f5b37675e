"""A pool's workers taking jobs straight from a backend in this process.

In a backend of the pool's own process (an `InlineBackend`: a `MemoryBackend`), a
claim is a synchronous call that cannot fail, be cut half-way, or wait on the
network. So no fetcher task claims ahead into a channel for the workers: each
worker claims one job for itself when it is free, and waits in the backend only
when nothing is ready. Outcomes are recorded as synchronously (`Reporter`). What a
job runs through is the same as on any backend: the pool's books hold each claim
from its claim until its outcome, renewals and the sweeper work on them, and a
shutdown releases what is held.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, final

import trio

if TYPE_CHECKING:
    from .._backend_inline import InlineBackend
    from .._backend_values import Claim
    from ._books import Books
    from ._config import PoolConfig
    from ._outage import OutageTracker

__all__ = ["InlineSource"]


@final
class InlineSource:
    """What the pool's workers claim through from a backend in this process.

    As `Fetcher` (``_fetch.py``) is for any backend: `next` gives a worker its
    next claim, or None once the pool is drained or stopping.

    Args:
        backend: The pool's backend, in this process.
        config: The pool's settings (lease, poll interval).
        books: The pool's claims: each claim is held there from the moment it came.
        outage: Told that the backend was reached: it always is.
    """

    def __init__(
        self, backend: InlineBackend, config: PoolConfig, books: Books, outage: OutageTracker
    ) -> None:
        self._backend = backend
        self._lease = config.lease
        self._poll = config.poll_interval
        self._books = books
        self._outage = outage
        outage.succeeded(trio.current_time())
        self._waits: set[trio.CancelScope] = set()  # workers waiting for a job
        self._stopped = False
        self.producer_finished = False
        """Set by `mark_producer_finished`: from then on workers stop once drained."""

    def mark_producer_finished(self) -> None:
        """No more jobs will come for this pool: look for the drain at once."""
        self.producer_finished = True
        self._wake()

    def emptied(self) -> None:
        """The pool holds nothing now: a finished producer may mean it is drained."""
        if self.producer_finished:
            self._wake()

    def stop(self) -> None:
        """A shutdown: claim nothing more."""
        self._stopped = True
        self._wake()

    def done(self) -> None:
        """A worker is done with a claim (nothing to free here: it claims only when free)."""

    def _wake(self) -> None:
        for scope in self._waits:
            scope.cancel()
        self._backend._wake_claimers()  # the workers waiting without a deadline

    def _drained(self) -> bool:
        """Whether the producer is finished and nothing is pending, here or anywhere."""
        return self.producer_finished and not self._books.held and not self._backend._held()

    async def next(self) -> Claim | None:
        """A claim for the calling worker, held in the books; None once drained or stopping."""
        backend, books = self._backend, self._books
        while not self._stopped:
            claims = backend._claim_now(1, self._lease)
            if claims:
                books.take(claims, trio.current_time() + self._lease)
                # a checkpoint per job, as a channel's receive has: a handler that
                # never yields must not keep the producer and the other workers out
                await trio.lowlevel.checkpoint()
                return claims[0]
            if self._drained():
                break
            if not self.producer_finished and backend._waits_untimed():
                # the common wait: no deadline, no scope (each costs as much as a job)
                await backend._wait_for_work()
                continue
            self._outage.succeeded(trio.current_time())
            # mark_producer_finished(), the last outcome and a shutdown end this wait,
            # so the drain check runs at once; other pools' jobs are checked every poll
            with trio.CancelScope() as wait:
                self._waits.add(wait)
                try:
                    claims = await backend.claim(1, lease=self._lease, block=self._poll)
                finally:
                    self._waits.discard(wait)
            if claims:  # a claim made is never cut off: claim() ends with no cancel point
                books.take(claims, trio.current_time() + self._lease)
                return claims[0]
        await trio.lowlevel.checkpoint()
        return None
