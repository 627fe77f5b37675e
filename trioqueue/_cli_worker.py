"""``trioqueue worker``: a long-running pool on a Redis queue, stopped by signals.

SIGTERM or SIGINT stops claiming, lets running handlers finish within
``--grace`` seconds, then cancels them; every unfinished and prefetched job goes
back on the queue at once. A second SIGINT (or SIGTERM) cuts the grace short:
handlers are cancelled at once, and their jobs still go back.

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

from ._backends._redis_url import CredentialsRefused, redacted
from ._cli_args import UsageError, load_handler, redis_backend
from ._pool import open_worker_pool
from ._retry import RetryPolicy

if TYPE_CHECKING:
    import argparse
    from collections.abc import AsyncIterator, Iterator

    from ._pool import WorkerPool
    from ._pool_config import ShutdownReport

__all__ = ["EXIT_CANCELLED", "run_worker"]

logger = logging.getLogger("trioqueue.worker")

EXIT_CANCELLED: Final = 3
"""The worker's exit status when shutdown had to cancel running handlers."""


class _RefusedCredentialsAreErrors(logging.Filter):
    """Raises the pool's outage lines about refused credentials to ERROR."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        if record.levelno < logging.ERROR and any(isinstance(a, CredentialsRefused) for a in args):
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
    handler = load_handler(args.handler)
    if args.max_delay < args.base_delay:  # refused before anything starts
        raise UsageError(
            f"--max-delay {args.max_delay} is below --base-delay {args.base_delay}: raise "
            "--max-delay or lower --base-delay"
        )
    retry = RetryPolicy(
        max_attempts=args.max_attempts, base_delay=args.base_delay, max_delay=args.max_delay
    )
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
        async with backend, trio.open_nursery() as nursery:
            if args.metrics_port is not None:
                from ._prometheus import serve_metrics  # lazily: only when asked for

                await nursery.start(
                    serve_metrics, backend, args.queue, args.metrics_port, args.metrics_addr
                )
            logger.info(
                "worker on %s queue %s at %s: %d workers, min_idle %ss, grace %ss (pid %d)",
                "simple" if args.simple else "reliable",
                args.queue,
                redacted(args.redis),
                args.workers,
                args.min_idle,
                args.grace,
                os.getpid(),
            )
            async with open_worker_pool(
                backend,
                handler,
                workers=args.workers,
                prefetch=args.prefetch,
                retry=retry,
                handler_timeout=args.handler_timeout,
                lease=args.min_idle,
                sweep_interval=args.sweep_interval,
            ) as pool:
                report = await _serve_until_signalled(pool, args.grace, signals)
            nursery.cancel_scope.cancel()
    logger.info(
        "stopped: %d handlers finished in the grace period, %d cancelled, %d jobs put back, "
        "%d left to the sweeper",
        report.finished,
        report.cancelled,
        report.released,
        report.unreturned,
    )
    return 0 if report.clean else EXIT_CANCELLED


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
