"""The worker pool: a fetcher, N workers, retry sleepers and upkeep, in one nursery.

```
backend ─claim─▶ fetcher ─▶ memory channel (fixed buffer) ─▶ worker x N ─▶ outcome
                                                                 └─ retry ─▶ sleeper ─▶ requeue
```

Every claim the pool holds is in its `Books` (``_books.py``) from the moment
it is claimed until its outcome reaches the backend, through the shielded calls of
its `Reporter` (``_outcomes.py``). Whatever is still held when the pool stops
(prefetched, cancelled, sleeping before a retry) is released back to the backend
in one shielded call, so stopping never loses a job. The backend knows when each
sleeping retry is due (`Backend.retry_later`), so a released one waits out the
rest of its backoff there.

Every task reports its calls to one `OutageTracker` (``_outage.py``): an outage
of the backend is logged once per step of one shared backoff, and its end once.
"""

from __future__ import annotations

import collections
import logging
from typing import TYPE_CHECKING, final

import attrs
import trio

from .._backend_inline import inline_backend
from .._current import running, running_on
from .._exceptions import IdempotencyConflict
from .._outcome import Ack, Cancel, RetryAfter, decide
from .._payload import encode_result, reply_id
from ._books import Books
from ._config import PoolConfig, ShutdownReport, check_number
from ._fetch import Fetcher
from ._inline import InlineSource
from ._outage import OutageTracker
from ._outcomes import Reporter

if TYPE_CHECKING:
    import random
    from collections.abc import Set as AbstractSet

    from .._backend import Backend
    from .._backend_values import Claim
    from .._metrics import Metrics
    from .._queue import Queue
    from .._records import Job
    from ._handlers import Chosen, Tasks

__all__ = ["WorkerPool", "logger"]


logger = logging.getLogger("trioqueue.pool")


@final
class WorkerPool:
    """A running pool of workers; made by `open_worker_pool`, not directly."""

    def __init__(
        self,
        backend: Backend,
        tasks: Tasks,
        config: PoolConfig,
        rng: random.Random,
        reply_to: Queue | None = None,
        outage: OutageTracker | None = None,
    ) -> None:
        self._backend = backend
        self._outage = OutageTracker(backend.metrics) if outage is None else outage
        self._tasks = tasks
        self._threads = trio.CapacityLimiter(config.workers)  # for run_sync tasks
        self._reply_to = reply_to
        self._config = config
        self._rng = rng
        self._books = Books()
        self._reporter = Reporter(backend, config, self._books, self._outage)
        self._fetcher: Fetcher | InlineSource
        if (inline := inline_backend(backend)) is not None:  # no fetcher: see _inline.py
            self._fetcher = InlineSource(inline, config, self._books, self._outage)
        else:
            self._fetcher = Fetcher(backend, config, self._books, self._outage)
        self._books.emptied = self._fetcher.emptied
        self._running: dict[str, trio.CancelScope] = {}
        self._running_changed = trio.lowlevel.ParkingLot()
        # when the last handlers ended, and their jobs: to name a handler that blocked
        self._ended: collections.deque[tuple[float, str]] = collections.deque(maxlen=64)
        self._sleeping: dict[str, trio.CancelScope] = {}  # retries sleeping, by token
        self._to_cancel: set[str] = set()  # claims whose jobs were cancelled (queue.cancel)
        self._books.cancel_requested = self._cancel_requested
        self._stopping = False
        self._stopped = trio.Event()
        self._work_nursery: trio.Nursery | None = None
        self._upkeep: trio.Nursery | None = None  # where the shutdown runs
        self._shutdown_started = False
        self._grace = trio.CancelScope()  # running handlers may finish until its deadline
        self._shutdown_done = trio.Event()
        self._report: ShutdownReport | None = None
        self._finished_in_grace = 0
        self._cancelled = 0

    def __repr__(self) -> str:
        state = "stopped" if self._stopped.is_set() else "stopping" if self._stopping else "running"
        return (
            f"<trioqueue.WorkerPool {state} workers={self._config.workers} "
            f"running={len(self._running)} held={len(self._books.held)} "
            f"retry_waiting={len(self._sleeping)}>"
        )

    @property
    def backend(self) -> Backend:
        """The backend this pool works on."""
        return self._backend

    @property
    def metrics(self) -> Metrics:
        """Metrics of this process; ``await backend.stats()`` gives the shared view."""
        return self._backend.metrics

    @property
    def running(self) -> int:
        """Handlers running now (never more than *workers*)."""
        return len(self._running)

    @property
    def held(self) -> int:
        """Jobs this pool holds: running, prefetched, or waiting to retry."""
        return len(self._books.held)

    def mark_producer_finished(self) -> None:
        """Declare that no more jobs will be enqueued for this pool.

        From then on the pool finishes once nothing is pending: no job ready,
        stored, claimed or waiting to retry. Before it, an empty queue only
        means the producer has not caught up, and the pool keeps waiting.
        Does not checkpoint; may be called more than once.
        """
        self._fetcher.mark_producer_finished()

    async def wait_backend_reached(self) -> None:
        """Wait until a call of this pool to its backend has succeeded.

        Returns at once from then on. A backend that is down when the pool
        opens keeps this waiting (through the pool's retries) until it is back:
        the moment to say a worker is ready. Cancelling the wait leaves the pool
        as it is.
        """
        await self._outage.wait_reached()

    async def wait_stopped(self) -> None:
        """Wait until the pool has stopped: drained, or shut down.

        Cancelling the wait leaves the pool as it is.
        """
        await self._stopped.wait()

    async def shutdown(self, grace: float) -> ShutdownReport:
        """Stop taking jobs, give running handlers *grace* seconds, then cancel them.

        Prefetched jobs are not started, retry sleepers stop at once, and every
        unfinished job (cancelled, prefetched, waiting to retry) is put back in
        the backend, where a later pool finishes it; a job waiting to retry is
        stored until its backoff ends, never run early. A cancelled handler's
        attempt is neither failed nor counted. Returns by *grace* + *io_timeout*
        at the latest, the time the backend gets to take the last outcomes and
        the jobs put back; jobs it could not take in time are recovered by the
        sweeper when their leases run out. Concurrent and later calls return
        the first call's report; one with a shorter *grace* (a second Ctrl-C:
        ``shutdown(0)``) cuts the grace period short.

        Raises:
            ConfigurationError: *grace* is negative or not a number.
        """
        check_number("grace", grace, minimum=0, where="WorkerPool.shutdown")
        now = trio.current_time()
        first = not self._shutdown_started
        if first:
            self._shutdown_started = True
        else:
            self._grace.deadline = min(self._grace.deadline, now + grace)
        self._reporter.limit(now + grace + self._config.io_timeout)
        if first:
            self._stopping = True
            self._fetcher.stop()
            for scope in self._sleeping.values():
                scope.cancel()
            self._grace.deadline = now + grace
            # the shutdown runs in the pool, not in this call: a caller that is
            # cancelled stops waiting for it, and a later call gets its report
            if self._upkeep is None or self._stopped.is_set():
                await self._stop_after_grace()
            else:
                self._upkeep.start_soon(self._stop_after_grace)
        await self._shutdown_done.wait()
        assert self._report is not None
        return self._report

    async def _stop_after_grace(self) -> None:
        try:
            with self._grace:
                while self._running:
                    await self._running_changed.park()
            for scope in self._running.values():
                scope.cancel()
            with trio.move_on_at(self._reporter.deadline):
                await self._stopped.wait()
        finally:  # even if the pool itself is cancelled: no caller waits for ever
            self._report = ShutdownReport(
                finished=self._finished_in_grace,
                cancelled=self._cancelled + len(self._running),  # + any ignoring their cancel
                released=self._reporter.released,
                # + what is still held when the deadline cut the wait short
                unreturned=self._reporter.unreturned + len(self._books.held),
            )
            self._shutdown_done.set()
        logger.info(
            "shutdown: %d handlers finished in the grace period, %d cancelled, %d jobs put back",
            self._report.finished,
            self._report.cancelled,
            self._report.released,
        )

    # --- tasks -----------------------------------------------------------------------

    async def _work(self) -> None:
        # one scope per worker, not per attempt (entering a scope costs as much as a no-op
        # job): shutdown cancels it once the grace is over, which ends this worker; a
        # cancelled job (queue.cancel) cancels it too, and the worker goes on in a new one
        running_on(self._backend)  # this task's own context: current_backend() in handlers
        source = self._fetcher
        while True:
            with trio.CancelScope() as scope:
                while (claim := await source.next()) is not None:
                    try:
                        while claim.suspect and self._running and not self._stopping:
                            await self._running_changed.park()  # it runs alone: let others end
                        await self._take(claim, scope)
                    finally:
                        source.done()
                return  # drained, or stopping
            if self._stopping:
                return

    async def _take(self, claim: Claim, scope: trio.CancelScope) -> None:
        """Run *claim* in the worker's *scope*, unless it must not run now."""
        if self._stopping:
            return  # the claim stays held, and is released at the end
        if claim.token in self._to_cancel:
            await self._end_cancelled(claim)  # cancelled before it started
        elif self._books.lapsed(claim):
            await self._lapsed(claim)
        else:
            await self._attempt(claim, scope)

    def _cancel_requested(self, tokens: AbstractSet[str]) -> None:
        """Stop the claims whose jobs were cancelled: a running handler, a sleeping retry.

        A prefetched one is ended when a worker takes it. The handler's worker scope
        is cancelled (`_work` then goes on in a new one), and the attempt is recorded
        as cancelled, not failed: it is not retried.
        """
        for token in tokens:
            if token not in self._books.held or self._stopping:
                continue
            self._to_cancel.add(token)
            if token in self._running:
                self._running[token].cancel()
            elif token in self._sleeping:
                self._sleeping[token].cancel()

    async def _end_cancelled(self, claim: Claim) -> None:
        """Tell the backend that *claim*'s job, cancelled, ends here (shielded calls only)."""
        self._to_cancel.discard(claim.token)
        if await self._reporter.report(claim, Cancel()):
            self._books.forget(claim)

    def _running_jobs(self, since: float) -> list[str]:
        """The ids of the jobs whose handlers ran at some time from *since* until now."""
        ended = [job_id for at, job_id in self._ended if at >= since]
        held = self._books.held
        return ended + [held[t].job.id for t in self._running if t in held]

    async def _lapsed(self, claim: Claim) -> None:
        """Give back, without running it, a claim whose lease ran out before it started.

        Its lease ran out while it waited here (the process was paused, or its
        event loop blocked): the backend may have given the job to another
        worker already, so running it would run it twice. It is counted as
        ``stale`` and given back (a no-op when it was recovered meanwhile).
        """
        self._backend.metrics.stale += 1
        logger.warning(
            "job %s: its lease ran out before it started (this process was paused, or its "
            "event loop blocked); not starting it, it goes back to the queue",
            claim.job.id,
        )
        await self._reporter.give_back(claim)

    async def _attempt(self, claim: Claim, scope: trio.CancelScope) -> None:
        """Run one attempt in the worker's *scope*, then report its outcome."""
        backend, job = self._backend, claim.job
        metrics = backend.metrics
        metrics.queue_wait.observe(backend.now() - claim.ready_at)
        error: Exception | None = None
        self._running[claim.token] = scope
        self._books.unsettled.add(claim.token)
        started = trio.current_time()
        ended = False
        running(claim)  # for report_progress, in the handler and the tasks it starts
        chosen = self._tasks.choose(job, self._config.handler_timeout)
        limit = chosen.handler_timeout
        value: object = None
        try:
            if limit is None:
                value = await self._run_handler(chosen, job)
            else:
                with trio.move_on_after(limit) as timer:
                    value = await self._run_handler(chosen, job)
                if timer.cancelled_caught:
                    error = TimeoutError(f"the handler ran longer than handler_timeout={limit}s")
            ended = True
        except Exception as exc:
            error = exc
            ended = True
        finally:
            del self._running[claim.token]
            ended_at = trio.current_time()
            self._ended.append((ended_at, job.id))
            if self._running_changed:
                self._running_changed.unpark_all()
            if not ended and scope.cancel_called:
                # Cancelled goes on up to the worker's scope; the shielded report may wait
                if claim.token in self._to_cancel and not self._stopping:
                    await self._end_cancelled(claim)
                else:
                    self._cancelled += 1
        if scope.cancel_called and error is not None:
            if claim.token in self._to_cancel and not self._stopping:
                await self._end_cancelled(claim)  # the handler raised on its cancellation
                return
            self._cancelled += 1
            return  # cancelled by shutdown: not an attempt; released at the end
        self._to_cancel.discard(claim.token)  # it ended before it heard: as it ended
        if self._stopping:
            self._finished_in_grace += 1
        metrics.handler_time.observe(ended_at - started)
        policy = self._config.retry
        if chosen.max_attempts is not None:
            policy = attrs.evolve(policy, max_attempts=chosen.max_attempts)
        outcome = decide(error, job.attempt, policy, self._rng)
        if isinstance(outcome, Ack) and value is not None:
            outcome = self._stored(job, value)
        if not await self._reporter.report(claim, outcome):
            return  # given back
        if not isinstance(outcome, RetryAfter):
            self._books.forget(claim)
        elif not self._stopping:  # else it stays held, and is released at the end
            assert self._work_nursery is not None
            sleeper = trio.CancelScope()  # registered now, so a shutdown can cancel it
            self._sleeping[claim.token] = sleeper
            self._work_nursery.start_soon(self._sleep_then_requeue, claim, outcome.delay, sleeper)

    def _stored(self, job: Job, value: object) -> Ack:
        """The outcome of an attempt that returned *value*: its result, or why it is not kept."""
        result, problem = encode_result(value, self._config.max_result)
        if problem is not None:
            logger.warning("job %s completed; its result is not stored: %s", job.id, problem)
        return Ack(result=result, result_error=problem)

    async def _run_handler(self, chosen: Chosen, job: Job) -> object:
        """One attempt: the handler, then its reply (if any) published before the ack.

        Returns what the handler returned.
        """
        result = await chosen.run(job, self._threads)
        if result is None or self._reply_to is None:
            return result
        try:
            # a job that runs again publishes under the same id: deduplicated
            await self._reply_to.enqueue(result, id=reply_id(job.id))
        except IdempotencyConflict:
            logger.warning(
                "job %s: an earlier run published a different reply; that one stands", job.id
            )
        return result

    async def _sleep_then_requeue(
        self, claim: Claim, delay: float, scope: trio.CancelScope
    ) -> None:
        try:
            with scope:
                await trio.sleep(delay)
        finally:
            del self._sleeping[claim.token]
        if scope.cancel_called:
            if claim.token in self._to_cancel and not self._stopping:
                await self._end_cancelled(claim)
            return  # else a shutdown: released at the end
        await self._reporter.requeue(claim)  # a job cancelled since ends there instead

    async def _run(self, task_status: trio.TaskStatus[None]) -> None:
        try:
            async with trio.open_nursery() as nursery:
                self._work_nursery = nursery
                if isinstance(self._fetcher, Fetcher):
                    nursery.start_soon(self._fetcher.run)
                for _ in range(self._config.workers):
                    nursery.start_soon(self._work)
                task_status.started()
        finally:
            try:
                await self._reporter.release_held()
            finally:
                self._stopped.set()
