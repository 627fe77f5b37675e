"""The pool's upkeep tasks: lease renewal and the periodic sweep.

Both report every call to the pool's `OutageTracker`, which logs an outage for
the whole pool; neither logs one of its own.
"""

from __future__ import annotations

import logging
import time
from contextlib import aclosing
from typing import TYPE_CHECKING

import trio
from trio_util import periodic

from .._exceptions import BackendUnavailable
from ._heartbeat import Heartbeat

if TYPE_CHECKING:
    from collections.abc import Callable

    from .._backend import Backend
    from ._books import Books
    from ._outage import OutageTracker

__all__ = ["renew", "renew_leases", "sweep_periodically"]

logger = logging.getLogger("trioqueue.pool")

_BLOCKED_AT_LEAST = 0.5  # seconds late a renewal must wake to say the loop was blocked


def _warn_paused(still: float, lease: float) -> None:
    logger.warning(
        "this process stood still for %.1f s (its event loop and a watch thread alike, "
        "using no CPU): it was paused (SIGSTOP, a debugger, a suspended VM or container), "
        "not blocked by a handler. Claims whose %g s lease ran out meanwhile may have "
        "gone to another worker, which runs them again; this pool's outcomes for them "
        "are refused. Pause workers for less than their lease, or stop them first",
        still,
        lease,
    )


def _warn_blocked(late: float, lease: float, jobs: list[str]) -> None:
    logger.warning(
        "the event loop was blocked for %.1f s (a lease renewal woke that late); running "
        "then: %s. A handler that blocks (time.sleep, CPU-bound work, blocking I/O) stops "
        "its pool renewing its leases: past %g s its job is given to another worker and "
        "runs again. Run such work with `await trio.to_thread.run_sync(...)`",
        late,
        ", ".join(jobs) or "no job",
        lease,
    )


async def renew(backend: Backend, books: Books, lease: float) -> None:
    """Renew every claim in *books*, and note there when each now runs out.

    Claims whose jobs were cancelled go to ``books.cancel_requested``.

    The time noted is when the call began (Trio's clock): the backend renewed
    after that, so the lease lasts at least that long (see `Books.extend`).

    Raises:
        BackendUnavailable: The backend could not be reached.
    """
    claims = list(books.held.values())
    started = trio.current_time()
    renewal = await backend.renew(claims, lease=lease)
    books.extend(claims, started + lease, renewal.lost)
    if renewal.cancel:
        books.cancel_requested(renewal.cancel)


async def renew_leases(
    backend: Backend,
    books: Books,
    lease: float,
    outage: OutageTracker,
    running: Callable[[float], list[str]],
) -> None:
    """Renew the leases of the claims in *books* every third of *lease*, forever.

    Renewal goes on through an outage, once a period: its period is long, and a
    claim whose lease runs out while the backend is away is run again elsewhere.
    A renewal that wakes late by more than half its period (at least half a
    second) means the event loop was blocked, most likely by a handler: a
    WARNING names the jobs running then and the fix. ``running(since)`` returns the
    ids of the jobs whose handlers ran at some time since then. When the whole
    process stood still instead (see `Heartbeat`), the WARNING says that.
    """
    heartbeat = Heartbeat(keep=2 * lease / 3 + 60)  # a period, and as long again late
    heartbeat.start()
    try:
        await _renew_forever(backend, books, lease, outage, running, heartbeat)
    finally:
        heartbeat.stop()


async def _renew_forever(
    backend: Backend,
    books: Books,
    lease: float,
    outage: OutageTracker,
    running: Callable[[float], list[str]],
    heartbeat: Heartbeat,
) -> None:
    period = lease / 3
    due = trio.current_time() + period
    while True:
        slept_at, cpu_at = time.monotonic(), time.process_time()
        await trio.sleep_until(due)
        woke = trio.current_time()
        late = woke - due > max(period / 2, _BLOCKED_AT_LEAST)
        jobs = running(due) if late else []
        # a handler that blocked may have finished, its claim with it, when this wakes
        if late and (books.held or jobs):
            still = heartbeat.stood_still(slept_at, time.monotonic())
            if still >= (woke - due) / 2 and time.process_time() - cpu_at < still / 2:
                _warn_paused(still, lease)
            else:
                _warn_blocked(woke - due, lease, jobs)
        if books.held:
            renewing_at, cpu_at = time.monotonic(), time.process_time()
            try:
                await renew(backend, books, lease)
            except BackendUnavailable as exc:
                outage.failed(exc)
            else:
                outage.succeeded(woke)
            # stopped mid-renewal, the process would wake on time for the next one
            # (see below): the renewal's own length tells it instead
            took = time.monotonic() - renewing_at
            if took > max(period / 2, _BLOCKED_AT_LEAST):
                still = heartbeat.stood_still(renewing_at, time.monotonic())
                if still >= took / 2 and time.process_time() - cpu_at < still / 2:
                    _warn_paused(still, lease)
        # from the time due, not from now: the period stays the period; a renewal that
        # took longer than one (an outage) starts the next at once, and is not "late"
        due = max(due + period, trio.current_time())


async def sweep_periodically(
    backend: Backend,
    interval: float,
    outage: OutageTracker,
    books: Books,
    lease: float,
) -> None:
    """Call `Backend.sweep` every *interval* seconds, forever, logging what it did.

    The leases of the claims in *books* are renewed first, in the same period: a
    pool never recovers its own live claims, even when Redis comes back from an
    outage that outlasted them. While the backend is unreachable, periods are
    skipped until the pool's next try is due, so the sweeper backs off with the
    rest of the pool.
    """
    async with aclosing(periodic(interval)) as ticks:
        async for _ in ticks:
            if not outage.may_try():
                continue
            started = trio.current_time()
            try:
                if books.held:
                    renewed_at = trio.current_time()
                    await renew(backend, books, lease)
                    # once more if the loop was blocked meanwhile (a handler's
                    # time.sleep): the sweep must find this pool's claims renewed
                    if books.held and trio.current_time() - renewed_at > lease / 3:
                        await renew(backend, books, lease)
                report = await backend.sweep()
            except BackendUnavailable as exc:
                outage.failed(exc)
                continue
            outage.succeeded(started)
            if report.scheduled or report.recovered:
                logger.info(
                    "sweep: scheduled %d stored jobs, recovered %d expired claims",
                    report.scheduled,
                    report.recovered,
                )
