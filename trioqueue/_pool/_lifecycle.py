"""`open_worker_pool`: a pool's life as an async context manager, from its checks to its drain."""

from __future__ import annotations

import random
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import trio

from .._payload import MAX_PAYLOAD
from .._retry import RetryPolicy
from ._config import PoolConfig, check_number
from ._maintenance import renew_leases, sweep_periodically
from ._outage import OutageTracker

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

    from .._backend import Backend
    from .._queue import Queue
from ._handlers import Handlers, Middleware, Tasks
from ._worker_pool import WorkerPool

__all__ = ["open_worker_pool"]


def _unwrap(group: BaseExceptionGroup[BaseException]) -> BaseException:
    while isinstance(group, BaseExceptionGroup) and len(group.exceptions) == 1:
        group = group.exceptions[0]  # type: ignore[assignment]
    return group


@asynccontextmanager
async def open_worker_pool(
    backend: Backend,
    handler: Handlers,
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
    middleware: Sequence[Middleware] = (),
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
            `dispatch` for a job whose task the pool does not know). A `Task`, a
            list of them, or a table holding them, also gives each task its own
            defaults (attempts, timeout) and may run a blocking function in a
            thread.
        workers: Handlers running at most at once.
        retry: Attempts and backoff; `RetryPolicy()` by default.
        handler_timeout: Seconds an attempt may run before it is cancelled and
            counted as a failure (retried like any other); None for no limit.
        prefetch: Claimed jobs buffered for the workers beyond the one in hand.
            A pool on a `MemoryBackend` (in its own process) buffers none, and
            ignores this and *batch_size*: each worker takes its next job from
            the backend when it is free, with no round trip to save.
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
        middleware: Async functions around each attempt, outermost first:
            ``async def middleware(job, call_next): ... return await
            call_next(job)``. Each sees the job and what the handler returned or
            raised, within the attempt's timeout; for tracing
            (`trioqueue.otel.trace_attempts`), timing or logging context. What one
            returns is the attempt's result, and what it raises fails the attempt.

    Raises:
        BackendUnavailable: The backend stayed unreachable for *give_up_after*
            seconds; its message says for how long, and its ``detail`` is the
            cause of the last failure.
        ConfigurationError: A setting is out of range; the message names it.
        TypeError: *handler* is not an async function (nor a `Task`).
    """
    tasks = Tasks(handler, middleware)
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
    pool = WorkerPool(backend, tasks, config, random.Random(seed), reply_to, outage)
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
