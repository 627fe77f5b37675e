"""How a pool tells its backend what became of its claims, through outages and shutdown.

Every call here is shielded: an outcome that reached the handler's end must reach
the backend, or the claim is given back, or (when even that fails) left to lapse so
the sweeper recovers it. Nothing a pool held is lost by a cancellation.
"""

from __future__ import annotations

import logging
import math
from functools import partial
from typing import TYPE_CHECKING, Final, final

import trio

from .._backend_inline import inline_backend
from .._exceptions import BackendUnavailable
from .._io_deadline import io_deadline
from .._outcome import Ack, Cancel, DeadLetter, Discard, Outcome, RetryAfter

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from .._backend import Backend
    from .._backend_inline import InlineBackend
    from .._backend_values import Claim
    from .._records import ErrorInfo, Job
    from ._books import Books
    from ._config import PoolConfig
    from ._outage import OutageTracker

__all__ = ["INTERRUPTED", "Reporter"]

_LANDED: Final = object()  # a try whose call landed

logger = logging.getLogger("trioqueue.pool")

# first and longest pause of a shielded call (an outcome, a release) that retries through
# an outage within its I/O deadline; the pool's own backoff is the OutageTracker's
_OUTAGE_PAUSE = (0.1, 5.0)
INTERRUPTED = (
    "its handler was interrupted (the pool stopped) and this queue never runs a job twice; "
    "requeue it by hand if it should run again"
)


@final
class Reporter:
    """The pool's shielded calls to its backend: outcomes, requeues, claims given back.

    Args:
        backend: The pool's backend.
        config: The pool's settings (``io_timeout``).
        books: The pool's claims: a claim whose outcome landed is forgotten there.
        outage: Hears of every try, and logs outages for the whole pool.
    """

    def __init__(
        self, backend: Backend, config: PoolConfig, books: Books, outage: OutageTracker
    ) -> None:
        self._backend = backend
        self._config = config
        self._books = books
        self._outage = outage
        self._deadline = math.inf  # set by a shutdown: nothing may outlast it
        self._telling: set[trio.CancelScope] = set()
        # a backend written before `redelivers` existed is at-least-once
        self._redelivers: bool = getattr(backend, "redelivers", True)
        # a backend in this process takes outcomes synchronously: such a call cannot
        # fail or be cut half-way (requeues and claims given back keep the shielded calls)
        self._inline: InlineBackend | None = inline_backend(backend)
        self.released = 0
        """Jobs put back in the backend (given back, or released at the end)."""
        self.unreturned = 0
        """Claims that could be neither settled nor put back in time: the sweeper
        recovers them when their leases run out."""

    @property
    def deadline(self) -> float:
        """When every call must have given up (Trio's clock); infinite until a shutdown."""
        return self._deadline

    def limit(self, deadline: float) -> None:
        """Give every call, running and to come, *deadline* at the latest."""
        self._deadline = min(self._deadline, deadline)
        for scope in self._telling:  # calls waiting out an outage stop waiting then
            scope.deadline = min(scope.deadline, self._deadline)

    async def tell(self, doing: str, call: Callable[[], Awaitable[object]]) -> bool:
        """Make a shielded call, retrying through outages; return whether it landed.

        While the backend is unreachable for the whole pool, the call is retried
        until it lands, however long that takes: the claim stays held and renewed,
        so an outage does not by itself make the job run again. It gives up after
        *io_timeout* when other calls of the pool get through meanwhile (this one
        is refused or stuck, the backend is not down), and by the shutdown's
        deadline. Each try that fails with `BackendUnavailable` is reported to the
        outage tracker, which logs for the whole pool; one that gets no reply
        within *io_timeout* is retried like it, logged at DEBUG only.
        """
        # the first try in one scope: shielded, until io_timeout or the shutdown's deadline
        started = trio.current_time()
        deadline = min(self._deadline, started + self._config.io_timeout)
        problem: object = None
        with trio.CancelScope(shield=True, deadline=deadline) as scope, io_deadline(deadline):
            self._telling.add(scope)
            try:
                if (problem := await self._try(call)) is _LANDED:
                    return True
            finally:
                self._telling.discard(scope)
        return await self._tell_again(doing, call, started, problem)

    async def _try(self, call: Callable[[], Awaitable[object]]) -> object:
        """One try: `_LANDED`, or what `BackendUnavailable` said; the tracker hears of it."""
        started = trio.current_time()
        try:
            await call()
        except BackendUnavailable as exc:
            self._outage.failed(exc)
            return getattr(exc, "detail", exc)
        self._outage.succeeded(started)
        return _LANDED

    async def _tell_again(
        self,
        doing: str,
        call: Callable[[], Awaitable[object]],
        first_failure: float,
        problem: object,
    ) -> bool:
        """The tries after a first that failed (*problem*, or None: no reply in time)."""
        pause = _OUTAGE_PAUSE[0]
        io_timeout = self._config.io_timeout
        with trio.CancelScope(shield=True, deadline=self._deadline) as scope:
            self._telling.add(scope)
            try:
                while True:
                    if problem is None:
                        problem = f"no reply within {io_timeout}s"
                    if trio.current_time() >= first_failure + io_timeout and (
                        self._outage.succeeded_since(first_failure)
                    ):
                        return False  # refused, or stuck, while the backend answers others
                    logger.debug("%s: %s; trying again in %.1f s", doing, problem, pause)
                    await trio.sleep(pause)
                    pause = min(pause * 2, _OUTAGE_PAUSE[1])
                    problem = None
                    # each try gets io_timeout: a call that hangs is a try that failed
                    try_deadline = min(self._deadline, trio.current_time() + io_timeout)
                    with trio.move_on_at(try_deadline), io_deadline(try_deadline):
                        if (problem := await self._try(call)) is _LANDED:
                            return True
            finally:
                self._telling.discard(scope)
        return False

    async def report(self, claim: Claim, outcome: Outcome) -> bool:
        """Tell the backend *outcome*; return whether it landed (else the claim went back).

        A landed outcome settles the claim; the caller forgets it, or keeps it held
        while a retry sleeps (`RetryAfter`).
        """
        log_outcome(claim.job, outcome)
        if self._inline is not None:
            self._inline._settle_now(claim, outcome)  # False (stale): the outcome is moot
            self._books.unsettled.discard(claim.token)
            return True
        backend, job = self._backend, claim.job
        call: Callable[[], Awaitable[bool]]
        match outcome:
            case Ack(None, None):
                call = partial(backend.ack, claim)
            case Ack(result, problem):
                call = partial(backend.ack, claim, result, result_error=problem)
            case Discard(reason):
                call = partial(backend.drop, claim, reason)
            case DeadLetter(reason, error):
                call = partial(backend.dead_letter, claim, error, reason)
            case Cancel():
                call = partial(backend.cancel_claim, claim)
            case RetryAfter(delay, error):
                call = partial(backend.retry_later, claim, error, delay=delay)
        if not await self.tell(f"job {job.id}: reporting its outcome", call):
            logger.warning("job %s: the backend did not take the outcome in time", job.id)
            await self.give_back(claim)
            return False
        self._books.unsettled.discard(claim.token)
        return True

    async def requeue(self, claim: Claim) -> None:
        """Put a job whose retry has slept its backoff back on the queue."""
        requeue = partial(self._backend.requeue, claim)
        if await self.tell(f"job {claim.job.id}: requeueing it", requeue):
            self._books.forget(claim)
        else:
            await self.give_back(claim)

    async def give_back(self, claim: Claim) -> None:
        """Release one claim now; if even that fails, stop renewing it so it is recovered.

        An at-most-once backend never gets back a job whose handler ran without an
        outcome: the pool stops renewing it, and the sweeper keeps it as a dead letter.
        """
        if not self._redelivers and claim.token in self._books.unsettled:
            logger.error(
                "job %s: its outcome was not recorded; this queue never runs a job twice, so "
                "it becomes a dead letter when its lease runs out",
                claim.job.id,
            )
            self.unreturned += 1
            self._books.forget(claim)
            return
        released: list[int] = []

        async def release() -> None:
            released.append(await self._backend.release([claim]))

        if not await self.tell(f"job {claim.job.id}: putting it back", release):
            self.unreturned += 1
        self.released += sum(released)
        self._books.forget(claim)

    async def release_held(self) -> None:
        """Put back everything the pool still holds, in one call (the pool is stopping).

        An at-most-once backend gets the interrupted handlers' jobs as dead letters
        that say so: their handlers may have done their work.
        """
        if not self._books.held:
            return
        held = self._books.clear()
        interrupted = [c for c in held if c.token in self._books.unsettled]
        if self._redelivers:
            interrupted = []  # at-least-once: they run again
        give_back = [c for c in held if c not in interrupted]
        released: list[int] = []

        async def release() -> None:
            if give_back:
                released.append(await self._backend.release(give_back))
            for claim in interrupted:  # at-most-once: its handler may have done its work
                await self._backend.dead_letter(claim, None, INTERRUPTED)
                logger.warning("job %s: %s", claim.job.id, INTERRUPTED)

        if await self.tell("putting unfinished jobs back", release):
            self.released += sum(released)
        else:
            self.unreturned += len(held)
            logger.error(
                "%d jobs could not be put back in time; they are recovered when their "
                "leases run out",
                len(held),
            )


def log_outcome(job: Job, outcome: Outcome) -> None:
    """Log what became of an attempt of *job*: at DEBUG when it completed."""
    match outcome:
        case Ack():
            logger.debug("job %s completed on attempt %d", job.id, job.attempt)
        case Discard(reason):
            logger.debug("job %s dropped on attempt %d: %s", job.id, job.attempt, reason)
        case DeadLetter(reason, error):
            logger.warning(
                "job %s dead-lettered on attempt %d: %s (%s)",
                job.id,
                job.attempt,
                reason,
                _described(error),
            )
            _log_traceback(job.id, error)
        case Cancel():
            logger.info("job %s cancelled (queue.cancel): it ends here", job.id)
        case RetryAfter(delay, error):
            logger.info(
                "job %s attempt %d failed (%s); retrying in %.3fs",
                job.id,
                job.attempt,
                _described(error) if error else "Retry",
                delay,
            )
            _log_traceback(job.id, error)


def _described(error: ErrorInfo | None) -> str:
    """``Type: message`` of an attempt's error, for a log line."""
    return "no error" if error is None else f"{error.type}: {error.message}"


def _log_traceback(job_id: str, error: ErrorInfo | None) -> None:
    """Log where an attempt failed, at DEBUG (``-v`` on the command line)."""
    if error is not None and error.traceback:
        logger.debug("job %s failed here:\n%s", job_id, error.traceback.rstrip())
