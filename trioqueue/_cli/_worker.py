"""``trioqueue worker``: a long-running pool on a Redis queue, stopped by signals.

SIGTERM or SIGINT stops claiming, lets running handlers finish within
``--grace`` seconds, then cancels them; every unfinished and prefetched job goes
back on the queue at once. A second SIGINT (or SIGTERM) cuts the grace short:
handlers are cancelled at once, and their jobs still go back.

Start-up is told as it happens: ``connecting to URL: … queue NAME`` first,
and ``worker on … ready`` only once a call to Redis has succeeded. While Redis
cannot be reached (at start or later) the worker logs one WARNING per step of
its backoff, ``… could not be reached since 12:31:04 (cause); next try in 3.2
s``, and one INFO line when Redis answers again. With ``--give-up-after
SECONDS``, an outage that long ends the worker: one ERROR line, exit status 1,
for a supervisor to restart it.

Redis refusing the credentials (a password changed under the worker) is an
outage like any other: the pool keeps retrying, and logs those lines as errors,
since waiting will not mend them: someone must.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from typing import TYPE_CHECKING, Final

import trio

from .._backends.redis._url import CredentialsRefused, redacted
from .._cron_file import load_schedules
from .._exceptions import BackendUnavailable, ConfigurationError
from .._pool._lifecycle import open_worker_pool
from .._queue import Queue
from .._retry import RetryPolicy
from .._scheduler import open_scheduler
from ._loading import checked_handlers, is_runnable, load_handler, load_lifespan
from ._redis_args import redis_backend
from ._types import UsageError

if TYPE_CHECKING:
    import argparse
    from collections.abc import AsyncIterator, Callable, Iterator
    from contextlib import AbstractAsyncContextManager

    from .._backends.redis._backend import RedisBackend
    from .._backends.redis._sharded import ShardedBackend
    from .._pool._config import ShutdownReport
    from .._pool._handlers import Handlers
    from .._pool._worker_pool import WorkerPool
    from .._schedule import Schedule

__all__ = ["EXIT_CANCELLED", "EXIT_GAVE_UP", "run_worker"]

logger = logging.getLogger("trioqueue.worker")

EXIT_CANCELLED: Final = 3
"""The worker's exit status when shutdown had to cancel running handlers."""

EXIT_GAVE_UP: Final = 1
"""The worker's exit status when Redis stayed unreachable for ``--give-up-after`` seconds."""


class _RefusedCredentialsAreErrors(logging.Filter):
    """Raises the pool's outage lines about refused credentials to ERROR."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        # the outage tracker passes its error as `backend_error` (see _outage.py)
        errors = (*args, getattr(record, "backend_error", None))
        refused = any(isinstance(each, CredentialsRefused) for each in errors)
        if record.levelno < logging.ERROR and refused:
            record.levelno, record.levelname = logging.ERROR, logging.getLevelName(logging.ERROR)
        return True


@contextlib.contextmanager
def _refused_credentials_as_errors() -> Iterator[None]:
    loggers = [logging.getLogger(name) for name in ("trioqueue.pool", "trioqueue.metrics")]
    errors = _RefusedCredentialsAreErrors()
    for each in loggers:
        each.addFilter(errors)
    try:
        yield
    finally:
        for each in loggers:
            each.removeFilter(errors)


async def run_worker(args: argparse.Namespace) -> int:
    """Run the worker the arguments describe until a signal; return the exit status."""
    if args.lifespan:
        lifespan = load_lifespan(args.handler)  # entered once Redis is set up, below
    else:
        handler = load_handler(args.handler)

        @contextlib.asynccontextmanager
        async def lifespan() -> AsyncIterator[Handlers]:
            yield handler

    if args.max_delay < args.base_delay:  # refused before anything starts
        raise UsageError(
            f"--max-delay {args.max_delay} is below --base-delay {args.base_delay}: raise "
            "--max-delay or lower --base-delay"
        )
    retry = RetryPolicy(
        max_attempts=args.max_attempts, base_delay=args.base_delay, max_delay=args.max_delay
    )
    try:
        schedules = [] if args.cron is None else load_schedules(args.cron)
    except ConfigurationError as error:
        raise UsageError(str(error)) from None
    if args.metrics_port is not None:
        try:
            import prometheus_client  # noqa: F401 - here, to refuse before starting
        except ImportError:
            raise UsageError(
                "--metrics-port needs prometheus-client: pip install 'trioqueue[cli]' "
                "(in a checkout: pip install '.[cli]')"
            ) from None
    backend = redis_backend(args)
    # from the start: a signal while connecting still stops the worker the clean way
    with (
        _refused_credentials_as_errors(),
        trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals,
    ):
        # opening reaches no server: the pool's first call does, so its outage lines and
        # the give-up limit cover a Redis that is down from the start too
        async with backend, _handler_from(lifespan, args.handler) as handler:
            try:
                report = await _serve(backend, handler, retry, schedules, args, signals)
            except BackendUnavailable as exc:
                if args.give_up_after is None:
                    raise  # not ours to explain: the pool retries for ever
                logger.error(
                    "Redis at %s could not be reached for %.1f s (%s); giving up "
                    "(--give-up-after %g): exiting with status %d, for a supervisor to "
                    "restart the worker",
                    exc.where,
                    args.give_up_after,
                    getattr(exc, "detail", exc),
                    args.give_up_after,
                    EXIT_GAVE_UP,
                    extra={"backend_error": exc},
                )
                return EXIT_GAVE_UP
    logger.info(
        "stopped: %d handlers finished in the grace period, %d cancelled, %d jobs put back, "
        "%d left to the sweeper",
        report.finished,
        report.cancelled,
        report.released,
        report.unreturned,
    )
    return 0 if report.clean else EXIT_CANCELLED


@contextlib.asynccontextmanager
async def _handler_from(
    lifespan: Callable[[], AbstractAsyncContextManager[object]], spec: str
) -> AsyncIterator[Handlers]:
    """Enter *lifespan* and check that it yields what a pool runs; leave it when done."""
    async with lifespan() as handler:
        if not is_runnable(handler):
            raise UsageError(
                f"the lifespan {spec} yielded {handler!r}, not a handler: yield the async "
                "function that runs each job (or its tasks)"
            )
        yield checked_handlers(handler, f"what the lifespan {spec} yielded")


async def _serve(
    backend: RedisBackend | ShardedBackend,
    handler: Handlers,
    retry: RetryPolicy,
    schedules: list[Schedule],
    args: argparse.Namespace,
    signals: AsyncIterator[int],
) -> ShutdownReport:
    """Run the pool (the metrics server, the schedules) until a signal; the shutdown's report.

    Raises:
        BackendUnavailable: Redis stayed unreachable for ``--give-up-after`` seconds.
    """
    gave_up: BackendUnavailable | None = None
    async with trio.open_nursery() as nursery:
        if args.metrics_port is not None:
            from .._prometheus import serve_metrics  # lazily: only when asked for

            await nursery.start(
                serve_metrics, backend, args.queue, args.metrics_port, args.metrics_addr
            )
        # after the metrics port is bound: a port refused is a one-line usage error
        logger.info(
            "connecting to %s: queue %s (pid %d)", redacted(args.redis), args.queue, os.getpid()
        )
        try:
            async with open_worker_pool(
                backend,
                handler,
                workers=args.workers,
                prefetch=args.prefetch,
                retry=retry,
                handler_timeout=args.handler_timeout,
                lease=args.min_idle,
                sweep_interval=args.sweep_interval,
                give_up_after=args.give_up_after,
            ) as pool:
                nursery.start_soon(_say_when_ready, pool, backend, args)
                if schedules:
                    nursery.start_soon(_run_schedules, backend, schedules)
                report = await _serve_until_signalled(pool, args.grace, signals)
        except BackendUnavailable as exc:  # the pool gave up (it retries any other outage)
            gave_up = exc
        finally:
            nursery.cancel_scope.cancel()
    if gave_up is not None:
        raise gave_up  # raised here, not in the nursery: no exception group
    return report


async def _run_schedules(backend: RedisBackend | ShardedBackend, schedules: list[Schedule]) -> None:
    """Run *schedules* until cancelled (the worker stops); outages are waited out."""
    async with open_scheduler(Queue(backend), schedules):
        await trio.sleep_forever()


async def _say_when_ready(
    pool: WorkerPool, backend: RedisBackend | ShardedBackend, args: argparse.Namespace
) -> None:
    """Log that the worker is ready once its pool has made a call that succeeded."""
    await pool.wait_backend_reached()
    settings = backend.settings  # the queue's own, read by the pool's first claim
    logger.info(
        "worker on %s queue %s (capacity %d) at %s: %d workers, min_idle %ss, grace %ss "
        "(pid %d): ready",
        "reliable" if settings.reliable else "simple",
        args.queue,
        settings.capacity,
        redacted(args.redis),
        args.workers,
        args.min_idle,
        args.grace,
        os.getpid(),
    )


async def _serve_until_signalled(
    pool: WorkerPool, grace: float, signals: AsyncIterator[int]
) -> ShutdownReport:
    async for signum in signals:
        logger.warning(
            "%s: stopping; running jobs have %ss to finish (send it again to stop now)",
            signal.Signals(signum).name,
            grace,
        )
        break
    async with trio.open_nursery() as nursery:

        async def stop_now_on_a_second_signal() -> None:
            async for signum in signals:
                logger.warning(
                    "%s again: cancelling running jobs and putting them back",
                    signal.Signals(signum).name,
                )
                await pool.shutdown(0)
                return

        nursery.start_soon(stop_now_on_a_second_signal)
        report = await pool.shutdown(grace)
        nursery.cancel_scope.cancel()
    return report
