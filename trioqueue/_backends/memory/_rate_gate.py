"""The rate limits of a queue in one process: its starts, and each rate key's line."""

from __future__ import annotations

import math
from typing import Final

from ..._rate import KeyLine, RateLimits, charge, room, start_at

__all__ = ["RateGate"]

_FORGET_KEYS_AT: Final = 1024  # key lines kept before a turn drops the forgettable ones


class RateGate:
    """How many starts the queue's limit allows, and when each rate key's job may start.

    The queue's limit is a GCRA over every start (``_rate.py``); each rate key
    has a `KeyLine` while its limit holds a job back. A changed limit starts
    afresh, as on Redis: the times kept under the old one go.
    """

    def __init__(self) -> None:
        self._limits = RateLimits()
        self._tat = -math.inf  # the queue limit's theoretical arrival time
        self._lines: dict[str, KeyLine] = {}  # each rate key's, while it limits
        self._forget_at = _FORGET_KEYS_AT

    @property
    def limits(self) -> RateLimits:
        """The limits in force."""
        return self._limits

    @property
    def limits_queue(self) -> bool:
        """Whether a limit on every start of the queue is set."""
        return self._limits.queue is not None

    def set(self, limits: RateLimits) -> None:
        """Put *limits* in force; times kept under a limit that changed are dropped."""
        if limits.queue != self._limits.queue:
            self._tat = -math.inf
        if limits.per_key != self._limits.per_key:
            self._lines.clear()
        self._limits = limits

    def room(self, now: float, ready: int) -> int:
        """How many of *ready* jobs may start at *now* under the queue's limit."""
        limit = self._limits.queue
        return ready if limit is None else room(self._tat, now, limit)

    def next_start(self, now: float) -> float:
        """When the queue's limit allows its next start; infinity when it has none."""
        limit = self._limits.queue
        return math.inf if limit is None else start_at(self._tat, now, limit)

    def started(self, now: float, count: int) -> None:
        """*count* jobs started at *now*: they count against the queue's limit."""
        limit = self._limits.queue
        if count and limit is not None:
            self._tat = charge(self._tat, now, limit, count)

    def turn(self, job_id: str, key: str, now: float) -> float | None:
        """When job *job_id* of rate key *key* may start: None for at *now* (it starts).

        A later time is promised to it: it waits in its key's line until then (or
        `leave` takes it out).
        """
        limit = self._limits.per_key
        if limit is None:
            return None
        line = self._lines.get(key)
        if line is None:
            line = self._lines[key] = KeyLine()
        wait_until = line.turn(job_id, now, limit)
        if len(self._lines) >= self._forget_at:
            self._lines = {k: kept for k, kept in self._lines.items() if not kept.forgettable(now)}
            self._forget_at = max(_FORGET_KEYS_AT, 2 * len(self._lines))
        return wait_until

    def leave(self, job_id: str, key: str) -> None:
        """Job *job_id*, promised a start by *key*, will not take it: the jobs behind move up."""
        if (line := self._lines.get(key)) is not None:
            line.leave(job_id)
