"""The worker pool: a fetcher, N workers, retry sleepers and upkeep, in one nursery.

```
backend ─claim─▶ fetcher ─▶ memory channel (fixed buffer) ─▶ worker x N ─▶ outcome
                                                                 └─ retry ─▶ sleeper ─▶ requeue
```

Every claim the pool holds is in its `Books` (``_pool_books.py``) from the moment
it is claimed until its outcome reaches the backend, through the shielded calls of
its `Reporter` (``_pool_outcomes.py``). Whatever is still held when the pool stops
(prefetched, cancelled, sleeping before a retry) is released back to the backend
in one shielded call, so stopping never loses a job. The backend knows when each
sleeping retry is due (`Backend.retry_later`), so a released one waits out the
rest of its backoff there.

Every task reports its calls to one `OutageTracker` (``_outage.py``): an outage
of the backend is logged once per step of one shared backoff, and its end once.
"""

from __future__ import annotations

import collections
import inspect
import logging
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from collections.abc import Set as AbstractSet
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, final

import attrs
import trio

from ._current import running_on
from ._exceptions import ConfigurationError, IdempotencyConflict, UnknownTask
from ._maintenance import renew_leases, sweep_periodically
from ._outage import OutageTracker
from ._outcome import Ack, Cancel, RetryAfter, decide
from ._payload import MAX_PAYLOAD, encode_result, reply_id
from ._pool_books import Books
from ._pool_config import PoolConfig, ShutdownReport, check_number
from ._pool_fetch import Fetcher
from ._pool_outcomes import Reporter
from ._records import Job
from ._retry import RetryPolicy

if TYPE_CHECKING:
    from ._backend import Backend, Claim
    from ._metrics import Metrics
    from ._queue import Queue

__all__ = ["Handler", "WorkerPool", "dispatch", "is_handler", "open_worker_pool"]

logger = logging.getLogger("trioqueue.pool")

Handler = Callable[[Job], Awaitable[object]]
"""An async function run once per attempt; returning completes the job.

With ``reply_to``, a return value other than None is published as a new job.
"""


@final
class WorkerPool:
    """A running pool of workers; made by `open_worker_pool`, not directly."""

    def __init__(
        self,
        backend: Backend,
        handler: Handler,
        config: PoolConfig,
        rng: random.Random,
        reply_to: Queue | None = None,
        outage: OutageTracker | None = None,
    ) -> None:
        self._backend = backend
        self._outage = OutageTracker(backend.metrics) if outage is None else outage
        self._handler = handler
        self._reply_to = reply_to
        self._config = config
        self._rng = rng
        self._books = Books()
        self._reporter = Reporter(backend, config, self._books, self._outage)
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
            self._fetcher.scope.cancel()
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
        while True:
            with trio.CancelScope() as scope:
                async for claim in self._fetcher.jobs:
                    try:
                        while claim.suspect and self._running and not self._stopping:
                            await self._running_changed.park()  # it runs alone: let others end
                        await self._take(claim, scope)
                    finally:
                        self._fetcher.place_freed()
                return  # the fetcher is done
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
        # the job's own options, stored by its producer, come before the pool's
        limit = self._config.handler_timeout if job.handler_timeout is None else job.handler_timeout
        value: object = None
        try:
            if limit is None:
                value = await self._run_handler(job)
            else:
                with trio.move_on_after(limit) as timer:
                    value = await self._run_handler(job)
                if timer.cancelled_caught:
                    error = TimeoutError(f"the handler ran longer than handler_timeout={limit}s")
            ended = True
        except Exception as exc:
            error = exc
            ended = True
        finally:
            del self._running[claim.token]
            self._ended.append((trio.current_time(), job.id))
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
        metrics.handler_time.observe(trio.current_time() - started)
        policy = self._config.retry
        if job.max_attempts is not None:
            policy = attrs.evolve(policy, max_attempts=job.max_attempts)
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

    async def _run_handler(self, job: Job) -> object:
        """One attempt: the handler, then its reply (if any) published before the ack.

        Returns what the handler returned.
        """
        result = await self._handler(job)
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
                nursery.start_soon(self._fetcher.run)
                for _ in range(self._config.workers):
                    nursery.start_soon(self._work)
                task_status.started()
        finally:
            try:
                await self._reporter.release_held()
            finally:
                self._stopped.set()


def dispatch(handlers: Mapping[str, Handler]) -> Handler:
    """One handler that runs each job with the handler its task names (`Job.task`).

    A job with no task, or a task this pool does not know, fails its attempt with
    `UnknownTask`, and is retried like any failure: during a rolling deploy
    another worker may know the task, and otherwise the job ends as a dead letter
    that names it, to requeue once a worker has the handler.

    Raises:
        TypeError: A handler is not an async function, or a name is not a str.
        ConfigurationError: *handlers* is empty.
    """
    if not handlers:
        raise ConfigurationError(
            "open_worker_pool: give at least one handler, as {'task name': handler}"
        )
    table = dict(handlers)
    for name, handler in table.items():
        if not isinstance(name, str):
            raise TypeError(f"open_worker_pool: task names are strs, not {name!r}")
        _check_handler(handler)
    known = ", ".join(sorted(table))

    async def run(job: Job) -> object:
        if job.task is None:
            raise UnknownTask(
                f"job {job.id} has no task name, and this worker runs jobs by task (it has "
                f"{known}): enqueue it with task= one of those"
            )
        chosen = table.get(job.task)
        if chosen is None:
            raise UnknownTask(
                f"job {job.id} names task {job.task!r}, which this worker has no handler for "
                f"(it has {known}); enqueue it with one of those names, or deploy a worker "
                "with that handler and requeue the dead letter"
            )
        return await chosen(job)

    return run


def is_handler(target: object) -> bool:
    """Whether *target* is an async function (or an object with an async ``__call__``)."""
    return inspect.iscoroutinefunction(target) or inspect.iscoroutinefunction(
        getattr(target, "__call__", None)  # noqa: B004 - an instance with async __call__
    )


def _check_handler(handler: object) -> None:
    """Refuse a handler that is not an async function (or an object with an async __call__)."""
    if is_handler(handler):
        return
    name = getattr(handler, "__name__", type(handler).__name__)
    name = "handler" if name == "<lambda>" else name
    raise TypeError(
        f"open_worker_pool(handler={name}): the handler must be an async function; define it "
        f"as `async def {name}(job): ...` (a plain def would run, then fail every attempt)"
    )


def _unwrap(group: BaseExceptionGroup[BaseException]) -> BaseException:
    while isinstance(group, BaseExceptionGroup) and len(group.exceptions) == 1:
        group = group.exceptions[0]  # type: ignore[assignment]
    return group


@asynccontextmanager
async def open_worker_pool(
    backend: Backend,
    handler: Handler | Mapping[str, Handler],
    *,
    workers: int = 4,
    retry: RetryPolicy | None = None,
    handler_timeout: float | None = None,
    prefetch: int = 0,
    batch_size: int = 32,
    lease: float | None = None,
    sweep_interval: float = 1.0,
    poll_interval: float = 1.0,
    io_timeout: float = 5.0,
    seed: int | None = None,
    reply_to: Queue | None = None,
    give_up_after: float | None = None,
    max_result: int = MAX_PAYLOAD,
) -> AsyncIterator[WorkerPool]:
    """Run a pool of *workers* tasks calling *handler* on the jobs of *backend*.

    The body of the ``async with`` is the producer: leaving it marks the
    producer finished and waits until every pending job is done (completed,
    dead-lettered or dropped). To stop early, call `WorkerPool.shutdown`; if
    the body raises or is cancelled, running handlers are cancelled and every
    unfinished job is put back in the backend before the exception propagates.

    A handler outcome is: return → completed; `Drop` → dropped; `Retry` or any
    other exception → retried after a backoff in a sleeper task of its own, or
    dead-lettered when attempts are exhausted. What a handler returns is kept
    on the job's record as JSON (`JobRecord.result`, `Queue.result`) as long as
    the record; None is not stored.

    When the backend cannot be reached (`BackendUnavailable`), the pool's tasks
    share one backoff: every 0.25 s for the first four seconds (a restart or a
    cluster's failover is often over by then), then doubling from 0.5 s to 15 s,
    each less up to a fifth at random. The ``trioqueue.pool`` logger gets one
    WARNING when it begins and one per doubled step, and one INFO line when a
    call succeeds again, naming how long the outage lasted; the sweeper skips
    its periods meanwhile. Every failed call counts in ``metrics.backend_errors``.
    `WorkerPool.wait_backend_reached` returns after the first successful call.

    Args:
        backend: Where the jobs are, e.g. a `MemoryBackend`.
        handler: ``async def handler(job: Job) -> object``; or several by task
            name, ``{"send_email": send_email, "resize": resize}``: each job runs
            with the one its task names (``enqueue(..., task="resize")``; see
            `dispatch` for a job whose task the pool does not know).
        workers: Handlers running at most at once.
        retry: Attempts and backoff; `RetryPolicy()` by default.
        handler_timeout: Seconds an attempt may run before it is cancelled and
            counted as a failure (retried like any other); None for no limit.
        prefetch: Claimed jobs buffered for the workers beyond the one in hand.
        batch_size: Most jobs claimed in one call to the backend.
        lease: Seconds a claim holds without renewal; the pool renews its
            claims every third of it, and the sweeper puts expired ones back.
            None takes the backend's default (its ``min_idle`` on Redis).
        sweep_interval: Seconds between sweeps (scheduling stored jobs,
            recovering expired claims, evicting old records).
        poll_interval: Longest wait for work in one claim call.
        io_timeout: Longest time a shielded outcome or release may take.
        seed: Seeds the backoff jitter, for reproducible runs.
        reply_to: A queue for the handler's results: a return value other
            than None is enqueued there (waiting for room) before the job
            completes, under `reply_id` of the job's id, so a job that runs
            twice publishes once. A failure to publish fails the attempt.
        give_up_after: Seconds the backend may stay unreachable, without one
            call succeeding, before the pool gives up: its last try is made when
            they have passed, and if that fails too, the pool stops as if
            cancelled (putting back what it can within *io_timeout*) and raises
            `BackendUnavailable`. None (the default) retries for ever. A
            long-running worker under a supervisor may prefer to exit and be
            restarted, or to page someone, after a while.
        max_result: The most bytes a handler's return value may take as JSON
            (1 MiB by default). A larger one, or one that is not JSON, is not
            stored: the job completes all the same (its work is done; running it
            again would repeat that), a WARNING says why, and `Queue.result`
            raises `ResultNotStored` with the reason.

    Raises:
        BackendUnavailable: The backend stayed unreachable for *give_up_after*
            seconds; its message says for how long, and its ``detail`` is the
            cause of the last failure.
        ConfigurationError: A setting is out of range; the message names it.
        TypeError: *handler* is not an async function.
    """
    if isinstance(handler, Mapping):
        handler = dispatch(handler)
    _check_handler(handler)
    config = PoolConfig(
        workers=workers,
        retry=RetryPolicy() if retry is None else retry,
        handler_timeout=handler_timeout,
        prefetch=prefetch,
        batch_size=batch_size,
        lease=backend.default_lease if lease is None else lease,
        sweep_interval=sweep_interval,
        poll_interval=poll_interval,
        io_timeout=io_timeout,
        max_result=max_result,
    )
    check_number("give_up_after", give_up_after, minimum=0, allow_none=True)
    # a generator of its own: outages leave the retry jitter of a seeded run as it was
    outage = OutageTracker(backend.metrics, random.Random(seed), give_up_after)
    pool = WorkerPool(backend, handler, config, random.Random(seed), reply_to, outage)
    body_error: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            pool._upkeep = nursery
            await nursery.start(pool._run)
            nursery.start_soon(
                renew_leases,
                backend,
                pool._books,
                config.lease,
                outage,
                pool._running_jobs,
            )
            nursery.start_soon(
                sweep_periodically,
                backend,
                config.sweep_interval,
                outage,
                pool._books,
                config.lease,
            )
            if give_up_after is not None:
                nursery.start_soon(outage.enforce_limit)
            try:
                yield pool
            except BaseException as exc:
                body_error = exc
                pool._stopping = True
                nursery.cancel_scope.cancel()
            else:
                pool.mark_producer_finished()
                await pool.wait_stopped()
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        pool_error = _unwrap(group)
        if body_error is None or isinstance(body_error, trio.Cancelled):
            raise pool_error from None  # the body was only cancelled because the pool failed
        if type(body_error) is type(pool_error) and str(body_error) == str(pool_error):
            raise body_error from None  # one cause seen twice (a queue set up otherwise)
        raise BaseExceptionGroup(
            "the worker pool failed while its body was failing", [body_error, pool_error]
        ) from None
    if body_error is not None:
        raise body_error
