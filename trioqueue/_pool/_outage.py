"""One pool's view of whether its backend is reachable: a shared backoff and its log lines.

Every task of a pool (the fetcher, lease renewal, the sweeper, the calls that
report outcomes) tells one `OutageTracker` about each failed and each
successful call. The tracker keeps one backoff for all of them, so an outage
gives one log line when it begins and one per step of the doubling, for the whole
pool::

    WARNING the backend at redis://host:6379/0 could not be reached since 12:31:04
            (Connection refused); next try in 3.2 s
    INFO    the backend at redis://host:6379/0 is reachable again after 61.4 s

The first `STEADY_TRIES` pauses are `FIRST_PAUSE` (a quarter of a second) each, as
a restarting server or a Redis Cluster's failover is often over within four seconds;
then they double, from half a second up to `LONGEST_PAUSE`. Each is less up to a
fifth at random, so workers that lost the same server do not all come back in step.
"""

from __future__ import annotations

import logging
import math
import random
import time
from typing import TYPE_CHECKING, Final, NoReturn, final

import attrs
import trio

from .._exceptions import BackendRefused, BackendUnavailable

if TYPE_CHECKING:
    from collections.abc import Callable

    from .._metrics import Metrics

__all__ = ["FIRST_PAUSE", "LONGEST_PAUSE", "STEADY_TRIES", "OutageTracker"]

logger = logging.getLogger("trioqueue.pool")

FIRST_PAUSE: Final = 0.25
"""Seconds between the first `STEADY_TRIES` tries; the doubling starts from twice as long."""

STEADY_TRIES: Final = 16
"""Tries `FIRST_PAUSE` apart (four seconds in all) before the pauses start doubling: a
failover of a Redis Cluster takes its node timeout and one to two seconds more
(2.1-2.7 s with a node timeout of 1 s, benchmarks/cluster_faults.py), and work
resumes within `FIRST_PAUSE` of its end, not half a doubled pause later. Only the
first of them is logged: the lines come one per step of the doubling."""

LONGEST_PAUSE: Final = 15.0
"""Most seconds between tries: a worker is back at work at most this long after its
backend is, and logs at most about four lines a minute however long an outage lasts."""


@final
@attrs.define(eq=False)
class OutageTracker:
    """Whether one pool's backend is reachable, and when to try it again.

    Args:
        metrics: Counts every failed call in ``backend_errors``.
        rng: Draws the jitter of each pause.
        give_up_after: Seconds an outage may last; the last try is made when
            they have passed, and if it fails too, `given_up` turns true and
            `enforce_limit` raises. None: no limit.
        first_pause: Seconds between the first `STEADY_TRIES` tries (then it doubles).
        longest_pause: Most seconds between tries.
        wall_clock: The time shown in the log lines (``since 12:31:04``);
            everything else runs on Trio's clock.
    """

    metrics: Metrics
    rng: random.Random = attrs.field(factory=random.Random)
    give_up_after: float | None = None
    first_pause: float = FIRST_PAUSE
    longest_pause: float = LONGEST_PAUSE
    wall_clock: Callable[[], float] = time.time
    _since: float | None = attrs.field(default=None, init=False)
    _since_wall: float = attrs.field(default=0.0, init=False)
    _step: int = attrs.field(default=0, init=False)
    _next_try: float = attrs.field(default=-math.inf, init=False)
    _last: BackendUnavailable | None = attrs.field(default=None, init=False)
    _where: str = attrs.field(default="", init=False)
    _last_success: float = attrs.field(default=-math.inf, init=False)
    _reached: trio.Event = attrs.field(factory=trio.Event, init=False)
    _given_up: trio.Event = attrs.field(factory=trio.Event, init=False)

    @property
    def down_since(self) -> float | None:
        """When the outage began (Trio's clock), or None while the backend is reachable."""
        return self._since

    @property
    def reached(self) -> bool:
        """Whether a call has ever succeeded."""
        return self._reached.is_set()

    @property
    def given_up(self) -> bool:
        """Whether an outage has lasted *give_up_after* seconds, its last try included."""
        return self._given_up.is_set()

    def may_try(self) -> bool:
        """Whether a periodic task should call now: no outage, or its next try is due."""
        return self._since is None or trio.current_time() >= self._next_try

    def failed(self, error: BackendUnavailable) -> float:
        """Note a failed call; return when (on Trio's clock) to try again.

        The first failure of an outage, and the first one after the pause it
        was given, start a step of the backoff and log its line; the others
        (the pool's other tasks meeting the same outage) only wait for it. With
        *give_up_after*, the last pause ends when it has passed, and a failure
        from then on sets `given_up`. Does not checkpoint.
        """
        self.metrics.backend_errors += 1
        now = trio.current_time()
        self._last = error
        self._where = error.where
        if self._since is None:
            self._since, self._since_wall, self._step = now, self.wall_clock(), 0
        elif now >= self._next_try:
            self._step += 1
        else:
            return self._next_try
        assert self._since is not None
        limit = math.inf if self.give_up_after is None else self._since + self.give_up_after
        if now >= limit:
            self._given_up.set()  # its holder says so: no step line with a try to come
            self._next_try = math.inf
            return self._next_try
        doublings = min(max(self._step - STEADY_TRIES + 1, 0), 64)
        nominal = min(self.first_pause * 2**doublings, self.longest_pause)
        pause = max(0.0, min(nominal * (1 - 0.2 * self.rng.random()), limit - now))
        self._next_try = now + pause
        if 0 < self._step < STEADY_TRIES:
            return self._next_try  # the steady tries: their first line said it
        refused = isinstance(error, BackendRefused)
        logger.warning(
            "the backend at %s %s since %s (%s); next try in %.1f s",
            error.where,
            "refused the call" if refused else "could not be reached",
            time.strftime("%H:%M:%S", time.localtime(self._since_wall)),
            getattr(error, "detail", str(error)),
            pause,
            extra={"backend_error": error},
        )
        return self._next_try

    def succeeded(self, started: float = math.inf) -> None:
        """Note a successful call that began at *started* (Trio's clock); does not checkpoint.

        It ends the outage, with one line saying how long it lasted, unless the
        call began before the outage did (its success says nothing of now).
        """
        self._reached.set()
        if math.isfinite(started):
            self._last_success = max(self._last_success, started)
        if self._since is None or started < self._since:
            return
        logger.info(
            "the backend at %s is reachable again after %.1f s",
            self._where,
            trio.current_time() - self._since,
        )
        self._since, self._last, self._next_try = None, None, -math.inf

    def succeeded_since(self, moment: float) -> bool:
        """Whether a call that began after *moment* (Trio's clock) has succeeded."""
        return self._last_success > moment

    async def wait_reached(self) -> None:
        """Wait until a call has succeeded; returns at once from then on."""
        await self._reached.wait()

    def gave_up(self) -> BackendUnavailable:
        """The error that says the outage lasted *give_up_after* seconds, the longest allowed.

        Its `BackendUnavailable.detail` is the last failure's cause; its message
        says how long the outage lasted and what was done about it.
        """
        assert self._since is not None
        assert self._last is not None
        last = self._last
        return BackendUnavailable(
            last.where,
            getattr(last, "detail", str(last)),
            advice=f"the worker pool gave up after {trio.current_time() - self._since:.1f} s "
            f"without one successful call (give_up_after={self.give_up_after:g}) and stopped, "
            "having put back what it could; open a new pool once the backend is back",
        )

    async def enforce_limit(self) -> NoReturn:
        """Raise `gave_up` once `given_up` turns true; wait for ever without *give_up_after*."""
        await self._given_up.wait()
        raise self.gave_up() from self._last
