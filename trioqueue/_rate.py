"""Rate limits on job starts, and the arithmetic both backends share to keep them.

A limit is kept with the generic cell rate algorithm (GCRA): one number per
limited thing, the *theoretical arrival time* (TAT), stands for every start so
far. Each start moves it on by the limit's interval (``per / starts``); a start
is allowed while the TAT is at most the limit's tolerance ahead of now
(``(burst - 1)`` intervals). Unlike a fixed window, which lets ``2 * starts``
through at a window's edge, it never lets more through in any window of
``per`` seconds than `RateLimit.most_in_any_window` says. The Redis claim
script does the same arithmetic in Lua (``lua/claim.lua``).
"""

from __future__ import annotations

import math
from typing import Final

import attrs

__all__ = [
    "EPSILON",
    "LONGEST_WINDOW",
    "MOST_STARTS",
    "KeyLine",
    "RateLimit",
    "RateLimits",
    "charge",
    "parse_rate",
    "room",
    "start_at",
]

_UNITS: Final = {"s": 1.0, "m": 60.0, "h": 3600.0}
EPSILON: Final = 1e-6
"""Seconds of float error the arithmetic forgives per start of a burst: a start due
now is allowed now, and a quiet limit's whole burst starts at once.

A microsecond, Redis ``TIME``'s unit: floats near today's epoch time are about
2.4e-7 apart, and each start charged at one instant may round by half that."""


MOST_STARTS: Final = 1_000_000_000
"""The largest ``starts`` and ``burst`` a `RateLimit` takes."""
LONGEST_WINDOW: Final = 366 * 86_400.0
"""The longest ``per`` a `RateLimit` takes, in seconds: 366 days."""


def _starts(_: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MOST_STARTS:
        raise ValueError(
            f"RateLimit({attribute.name}={value!r}): give a whole number of starts from 1 "
            f"to {MOST_STARTS:,}"
        )


def _seconds(value: float) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not 0 < value <= LONGEST_WINDOW
    ):
        raise ValueError(
            f"RateLimit(per={value!r}): give the window in seconds, a number > 0 and at most "
            f"{LONGEST_WINDOW:,.0f} (366 days)"
        )
    return float(value)


@attrs.frozen
class RateLimit:
    """At most *starts* job starts every *per* seconds, with bursts of up to *burst*.

    With the default ``burst=1`` the starts are spread out, one every
    ``per / starts`` seconds, and no window of *per* seconds ever holds more
    than *starts* of them: what an upstream service's "N requests per second"
    needs. A larger *burst* lets that many start at once after a quiet spell;
    then a window of *per* seconds may hold up to ``starts + burst - 1``
    (`most_in_any_window`). A start is a claim: a retry counts again, and so
    does a job run again after its worker died. Windows are counted to within
    `slack` (microseconds of float rounding).

    *starts* and *burst* are whole numbers from 1 to 1,000,000,000, *per* is
    more than 0 and at most 366 days (31,622,400 seconds): what both backends'
    arithmetic holds exactly. Anything else raises `ValueError` saying so.
    """

    starts: int = attrs.field(validator=_starts)
    """How many starts the window allows on average."""
    per: float = attrs.field(default=1.0, converter=_seconds)
    """The window, in seconds."""
    burst: int = attrs.field(default=1, validator=_starts)
    """How many may start at once after a quiet spell (1: evenly spread)."""

    @property
    def interval(self) -> float:
        """Seconds each start uses up: ``per / starts``."""
        return self.per / self.starts

    @property
    def tolerance(self) -> float:
        """How far ahead of now the limit's TAT may be for a start to be allowed."""
        return (self.burst - 1) * self.interval

    @property
    def slack(self) -> float:
        """The float error the arithmetic forgives: a microsecond per start of a burst."""
        return EPSILON * self.burst

    @property
    def most_in_any_window(self) -> int:
        """The most starts any window of `per` seconds can hold: ``starts + burst - 1``."""
        return self.starts + self.burst - 1

    def describe(self) -> str:
        """``10/1s`` (``10/1s burst 5`` with a burst), as the command line takes a limit."""
        text = f"{self.starts}/{self.per:g}s"
        return text if self.burst == 1 else f"{text} burst {self.burst}"

    def stored(self) -> str:
        """The limit as the Redis scripts keep it: ``"<starts> <per> <burst>"``."""
        return f"{self.starts} {self.per!r} {self.burst}"

    @classmethod
    def from_stored(cls, value: bytes | str | None) -> RateLimit | None:
        """The limit `stored` wrote; None for none (or a value changed by hand)."""
        if not value:
            return None
        words = (value.decode() if isinstance(value, bytes) else value).split()
        try:
            return cls(int(words[0]), float(words[1]), int(words[2]))
        except (IndexError, ValueError):
            return None


@attrs.frozen
class RateLimits:
    """A queue's rate limits (`Queue.set_rate_limits`); None where there is none."""

    queue: RateLimit | None = None
    """Limits every start from the queue, whatever the job."""
    per_key: RateLimit | None = None
    """Limits the starts of the jobs enqueued with one ``rate_key``, each key on its own."""

    def as_json(self) -> dict[str, str | None]:
        """``{"queue": "10/1s", "per_key": null}``: each limit as `RateLimit.describe` writes it."""
        return {
            "queue": None if self.queue is None else self.queue.describe(),
            "per_key": None if self.per_key is None else self.per_key.describe(),
        }

    def describe(self) -> str:
        """``queue 10/1s, per key 2/1s`` (``none`` for none), as the command line shows them."""
        parts = [
            f"{name} {limit.describe()}"
            for name, limit in (("queue", self.queue), ("per key", self.per_key))
            if limit is not None
        ]
        return ", ".join(parts) or "none"


def parse_rate(text: str) -> RateLimit:
    """A limit written as ``STARTS/PER`` with an optional burst.

    E.g. ``10/s``, ``100/1m``, ``5/2.5s``, ``10/s burst 10`` (units: s, m, h; a
    bare number is seconds).

    Raises:
        ValueError: The text is not such a limit; the message shows the form.
    """
    words = text.split()
    burst = 1
    problem = f"rate limit {text!r}: write STARTS/PER, e.g. '10/s', '100/1m' or '10/s burst 5'"
    if len(words) == 3 and words[1] == "burst" and _whole(words[2]):
        burst = int(words[2])
    elif len(words) != 1:
        raise ValueError(problem)
    starts, _, per = words[0].partition("/")
    if not _whole(starts) or not per:
        raise ValueError(problem)
    unit = _UNITS.get(per[-1])
    number = per[:-1] if unit is not None else per
    try:
        seconds = (float(number) if number else 1.0) * (unit or 1.0)
        return RateLimit(int(starts), seconds, burst)
    except ValueError as exc:
        raise ValueError(f"{problem} ({exc})") from None


def _whole(word: str) -> bool:
    """Whether *word* is a whole number in ASCII digits (``"²"`` is a digit to `str.isdigit`)."""
    return word.isascii() and word.isdigit()


def room(tat: float, now: float, limit: RateLimit) -> int:
    """How many may start at *now* under *limit*, whose theoretical arrival time is *tat*."""
    ahead = max(tat, now) - now
    if ahead > limit.tolerance + limit.slack:
        return 0
    return int((limit.tolerance + limit.slack - ahead) / limit.interval) + 1


def start_at(tat: float, now: float, limit: RateLimit) -> float:
    """The earliest time a start is allowed: *now* if one is allowed now, else later."""
    return now if room(tat, now, limit) else max(tat - limit.tolerance, now + limit.slack)


def charge(tat: float, now: float, limit: RateLimit, starts: int = 1) -> float:
    """The theoretical arrival time after *starts* more starts at *now*."""
    return max(tat, now) + starts * limit.interval


@attrs.define
class KeyLine:
    """What a per-key limit keeps for one key: the starts made, and the line waiting.

    *started* is the theoretical arrival time of the starts made: every start is
    checked against it, so the starts made keep the limit exactly. *waiting*
    holds the jobs that were over the limit, in the order they came, each with
    its ticket. A job starts only when the limit has room for it and for every
    job ahead of it in the line: a key's jobs start in the order they came, a
    newcomer waits behind the line, and a job that wakes late to its turn takes
    the next free start, not a place at the back. The Redis claim script keeps
    the same line in a sorted set (``lua/prelude/2-rates.lua``).
    """

    started: float = -math.inf
    waiting: dict[str, int] = attrs.field(factory=dict)
    tickets: int = 0

    def ahead(self, job_id: str) -> int:
        """How many wait ahead of *job_id* in the line (all of them for one not in it).

        Counted from the tickets: a job that left from the middle (cancelled) still
        counts until the line moves past it, which only makes a wait a little long.
        """
        ticket = self.waiting.get(job_id)
        if ticket is None:
            return len(self.waiting)
        head = next(iter(self.waiting.values()))
        return min(ticket - head, len(self.waiting) - 1)

    def turn(self, job_id: str, now: float, limit: RateLimit) -> float | None:
        """Whether *job_id* may start at *now*.

        None if so (the start is charged and it leaves the line), else when to look
        again (it joins the line if new).
        """
        ahead = self.ahead(job_id)
        if room(self.started, now, limit) > ahead:
            self.started = charge(self.started, now, limit)
            self.waiting.pop(job_id, None)
            return None
        if job_id not in self.waiting:
            self.tickets += 1
            self.waiting[job_id] = self.tickets
        return start_at(max(self.started, now) + ahead * limit.interval, now, limit)

    def leave(self, job_id: str) -> None:
        """*job_id* waits no more (cancelled): the jobs behind it move up."""
        self.waiting.pop(job_id, None)

    def forgettable(self, now: float) -> bool:
        """Whether the key limits nothing now, as a key never seen."""
        return not self.waiting and self.started <= now
