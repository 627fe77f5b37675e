"""The pool's fetcher: claims jobs into free places and hands them to the workers.

One task claims for the whole pool, and only into a free place (a worker, or a
prefetch slot): the memory channel's fixed buffer and the places together are the
pool's backpressure. It stops once the producer is finished and nothing is pending
anywhere (the drain), or when the pool's shutdown cancels it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, final

import trio

from .._backend_values import Claim
from .._exceptions import BackendUnavailable

if TYPE_CHECKING:
    from .._backend import Backend
    from ._books import Books
    from ._config import PoolConfig
    from ._outage import OutageTracker

__all__ = ["Fetcher"]


@final
class Fetcher:
    """Claims for one pool; each worker takes one with `next` and calls `done` after it.

    Args:
        backend: The pool's backend.
        config: The pool's settings (workers, prefetch, batch size, lease, poll).
        books: The pool's claims: each claim is held there from the moment it came.
        outage: Hears of every call, and gives the backoff through an outage.
    """

    def __init__(
        self, backend: Backend, config: PoolConfig, books: Books, outage: OutageTracker
    ) -> None:
        self._backend = backend
        self._config = config
        self._books = books
        self._outage = outage
        # a place per worker and per prefetched job: claims go only into one
        self._places = trio.Semaphore(config.workers + config.prefetch)
        self._send, self.jobs = trio.open_memory_channel[Claim](config.prefetch)
        self.scope = trio.CancelScope()
        """Cancelled by a shutdown: the fetcher stops claiming."""
        self._claim_wait: trio.CancelScope | None = None
        self.producer_finished = False
        """Set by `mark_producer_finished`: from then on the fetcher stops once drained."""

    def mark_producer_finished(self) -> None:
        """No more jobs will come for this pool: look for the drain at once."""
        self.producer_finished = True
        if self._claim_wait is not None:
            self._claim_wait.cancel()

    def emptied(self) -> None:
        """The pool holds nothing now: a finished producer may mean it is drained."""
        if self.producer_finished and self._claim_wait is not None:
            self._claim_wait.cancel()

    def stop(self) -> None:
        """A shutdown: claim nothing more (the workers' `next` then ends)."""
        self.scope.cancel()

    def done(self) -> None:
        """A worker is done with a claim (run, given back, or passed over): a place is free."""
        self._places.release()

    async def next(self) -> Claim | None:
        """The next claim for a worker; None once the fetcher has stopped."""
        try:
            return await self.jobs.receive()
        except trio.EndOfChannel:
            return None

    async def run(self) -> None:
        """Claim until drained or cancelled; through an outage, back off with the pool."""
        async with self._send:
            with self.scope:
                while True:
                    try:
                        if not await self._fetch_once():
                            return
                    except BackendUnavailable as exc:
                        # the pool's one backoff: the tracker logs its steps
                        await trio.sleep_until(self._outage.failed(exc))

    async def _drained(self) -> bool:
        """Whether the producer is finished and nothing is pending, here or anywhere."""
        if not self.producer_finished or self._books.held:
            return False
        started = trio.current_time()
        pending = await self._backend.pending()
        self._outage.succeeded(started)
        return pending == 0

    async def _fetch_once(self) -> bool:
        """Claim a batch into free places and hand it to the workers; False once drained."""
        config = self._config
        if await self._drained():
            return False
        taken = 0  # places this call holds
        claims: list[Claim] = []
        try:
            await self._places.acquire()  # a worker or a prefetch place is free
            taken = 1
            # while the workers still have more than half the prefetch to run, gather
            # places first: one claim then carries more jobs (and their outcomes share
            # round trips), and it starts while jobs are still buffered, so no worker
            # waits for its round trip; each place freed wakes this to look again
            low_water = config.prefetch // 2
            while (
                taken < config.batch_size
                and self._send.statistics().current_buffer_used > low_water
            ):
                await self._places.acquire()
                taken += 1
            if await self._drained():
                return False
            # only this task takes places, so the free ones stay free until taken below
            want = min(config.batch_size, taken + self._places.value)
            # mark_producer_finished() and the last outcome cancel this wait, so the
            # drain check runs at once; jobs other pools hold are checked every poll
            started = trio.current_time()
            with trio.CancelScope() as self._claim_wait:
                claims = await self._backend.claim(
                    want, lease=config.lease, block=config.poll_interval
                )
                self._outage.succeeded(started)  # not when cancelled: that says nothing
            self._claim_wait = None
            # from when the call began: a pause while the reply was on its way (the
            # process stopped, the loop blocked) is part of the lease, which the
            # backend started when it made the claim
            self._books.take(claims, started + config.lease)
        finally:
            for _ in range(taken - len(claims)):
                self._places.release()
        for _ in range(len(claims) - taken):
            self._places.acquire_nowait()  # free since `want` was read: cannot block
        for claim in claims:
            try:
                self._send.send_nowait(claim)  # claim() checkpointed: no yield per job
            except trio.WouldBlock:
                await self._send.send(claim)
        for claim in claims:
            # a job that may be killing its workers runs alone: it takes nothing down with it
            while claim.suspect and claim.token in self._books.held:
                await self._books.settled.park()
        return True
