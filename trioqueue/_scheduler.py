"""The scheduler: each schedule's next tick stored ahead in the queue, as a delayed job.

```
schedule ─▶ tick task ─ submit(id=name@tick, delay=…) ─▶ backend ─(due)─▶ worker pools
                └─ mark_schedule(name, tick): the latest tick stored, for the next start
```

No leader is elected: every process that runs a schedule stores the same job id
for the same tick, and the queue keeps one. The backend remembers the latest
tick stored for each schedule (`Backend.mark_schedule`); a scheduler that starts
after all were down finds the ticks missed since then and handles them by the
schedule's `MissedTicks` policy.
"""

from __future__ import annotations

import datetime
import functools
import logging
import time
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar, final

import trio

from ._exceptions import BackendUnavailable, ConfigurationError, IdempotencyConflict
from ._schedule import MissedTicks, Schedule, iso_utc

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterable

    from ._queue import Queue

__all__ = ["Scheduler", "describe_marks", "open_scheduler"]

logger = logging.getLogger("trioqueue.scheduler")
_T = TypeVar("_T")

# waits between tries while the backend is unreachable: doubling, capped
_OUTAGE_PAUSE = (0.5, 15.0)


@final
class Scheduler:
    """A running scheduler (`open_scheduler`): what it stored, and what comes next."""

    def __init__(self, schedules: list[Schedule], clock: Callable[[], float]) -> None:
        self._schedules = schedules
        self._clock = clock
        self._next: dict[str, float] = {}
        self.stored = 0
        """Tick jobs this scheduler handed to the queue (the queue deduplicates those
        another scheduler stored first)."""
        self.caught_up = 0
        """Missed ticks this scheduler ran when it started (see `MissedTicks`)."""

    def __repr__(self) -> str:
        return f"<Scheduler schedules={[s.name for s in self._schedules]} stored={self.stored}>"

    @property
    def next_ticks(self) -> dict[str, datetime.datetime]:
        """Each schedule's next tick (stored in the queue already), in UTC."""
        return {
            name: datetime.datetime.fromtimestamp(tick, datetime.UTC)
            for name, tick in self._next.items()
        }

    async def _run(
        self, queue: Queue, schedule: Schedule, task_status: trio.TaskStatus[None]
    ) -> None:
        backend = queue.backend
        name = schedule.name
        started = False
        while True:
            # every scheduler's latest tick stored: one that woke late (a blocked loop, a
            # suspended machine) must not offer again a tick another has stored since
            marks = await _patiently(f"schedule {name}: reading its mark", backend.schedule_marks)
            last = marks.get(name)
            now = self._clock()
            if last is not None and last < now:
                await self._catch_up(queue, schedule, last, now)
            tick = schedule.next_tick(now)
            await self._store(queue, schedule, tick)
            await _patiently(
                f"schedule {name}: recording its tick",
                functools.partial(backend.mark_schedule, name, tick),
            )
            self._next[name] = tick
            if not started:
                started = True
                logger.info(
                    "schedule %s (%s): next tick %s", name, schedule.description, iso_utc(tick)
                )
                task_status.started()
            # sleep on Trio's clock until the wall clock says the tick came (it may
            # have been set meanwhile): no event to wait on but time
            while (left := tick - self._clock()) > 0:  # noqa: ASYNC110
                await trio.sleep(left)

    async def _catch_up(self, queue: Queue, schedule: Schedule, last: float, now: float) -> None:
        """Run the ticks in (*last*, *now*] by the schedule's policy."""
        limit = {MissedTicks.SKIP: 0, MissedTicks.LATEST: 1, MissedTicks.ALL: schedule.catch_up}
        missed = schedule.ticks_between(last, now, max(limit[schedule.missed], 1))
        if not missed:
            return  # the last stored tick was the latest one: nothing fell in between
        run = missed[-limit[schedule.missed] :] if limit[schedule.missed] else []
        logger.warning(
            "schedule %s: ticks were missed after %s while no scheduler ran; policy %r "
            "runs %d of them now",
            schedule.name,
            iso_utc(last),
            schedule.missed.value,
            len(run),
        )
        for tick in run:
            await self._store(queue, schedule, tick)
            self.caught_up += 1

    async def _store(self, queue: Queue, schedule: Schedule, tick: float) -> None:
        """Hand the tick's job to the queue: due at the tick, or at once if it is past."""
        delay = max(0.0, tick - self._clock())

        async def submit() -> None:
            # submit: a full ready queue stores the job rather than holding the scheduler
            await queue.submit(
                schedule.job_payload(tick), id=schedule.job_id(tick), delay=delay or None
            )

        try:
            await _patiently(f"schedule {schedule.name}: storing a tick", submit)
        except IdempotencyConflict:
            logger.warning(
                "schedule %s: the job of tick %s was stored with another payload (another "
                "deployment's schedule of the same name?); the stored one stands",
                schedule.name,
                iso_utc(tick),
            )
            return
        self.stored += 1


async def _patiently(what: str, call: Callable[[], Awaitable[_T]]) -> _T:
    """*call*, tried again with a capped doubling pause while the backend is unreachable."""
    pause = _OUTAGE_PAUSE[0]
    while True:
        try:
            return await call()
        except BackendUnavailable as error:
            logger.warning("%s: %s; trying again in %.1f s", what, error, pause)
        await trio.sleep(pause)
        pause = min(pause * 2, _OUTAGE_PAUSE[1])


@asynccontextmanager
async def open_scheduler(
    queue: Queue, schedules: Iterable[Schedule], *, clock: Callable[[], float] = time.time
) -> AsyncIterator[Scheduler]:
    """Run *schedules* on *queue* while the block runs; leaving it stops them.

    On entry, each schedule's missed ticks (see `MissedTicks`) are handed to the
    queue and its next tick is stored, as a delayed job due at that tick; then a
    task per schedule stores each next tick as the last one comes due. Workers
    run the jobs like any other. Run the same schedules in as many processes as
    you like (each worker, say): every tick becomes one job.

    While the backend is unreachable, each call is tried again with a pause that
    doubles up to 15 s, with a WARNING per try. Cancellation (leaving the block)
    stops the tasks at once; what they stored stays stored.

    Args:
        queue: Where the ticks' jobs go; a list queue (a stream source cannot hold
            a job until a due time).
        schedules: The schedules, with distinct names.
        clock: The wall clock, seconds since the epoch; tests pass one built on
            Trio's clock.

    Raises:
        ConfigurationError: Two schedules share a name, or one is not a `Schedule`.
    """
    chosen = list(schedules)
    names = [getattr(s, "name", None) for s in chosen]
    wrong = [s for s in chosen if not isinstance(s, Schedule)]
    if wrong:
        raise ConfigurationError(
            f"open_scheduler: {wrong[0]!r} is not a trioqueue.Schedule; build each with "
            "Schedule(name, cron=...) or Schedule(name, every=...)"
        )
    twice = sorted({n for n in names if names.count(n) > 1}, key=str)
    if twice:
        raise ConfigurationError(
            f"open_scheduler: schedules named {twice} appear more than once; a name must "
            "be unique, as it names the schedule's jobs"
        )
    scheduler = Scheduler(chosen, clock)
    async with trio.open_nursery() as nursery:
        for schedule in chosen:
            await nursery.start(scheduler._run, queue, schedule)
        try:
            yield scheduler
        finally:
            nursery.cancel_scope.cancel()


def describe_marks(marks: dict[str, float], now: float) -> list[dict[str, Any]]:
    """Each schedule's next tick from the backend's marks (`Backend.schedule_marks`).

    The latest tick stored is the next one while a scheduler runs; one in the past
    (*now*, seconds since the epoch) says none has run since.
    """
    return [
        {"name": name, "next_tick": iso_utc(tick), "overdue": tick < now}
        for name, tick in sorted(marks.items())
    ]
