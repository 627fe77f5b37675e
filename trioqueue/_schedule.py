"""Schedules: when each tick of a cron expression or an interval falls, and its job.

A tick is a moment (seconds since the epoch); its job's id is the schedule's name
and the tick in UTC, so every process that runs the same schedule enqueues the
same job for the same tick and the queue deduplicates them.
"""

from __future__ import annotations

import datetime
import enum
import itertools
import math
import zoneinfo
from typing import TYPE_CHECKING, Any

import attrs

from ._exceptions import ConfigurationError
from ._payload import MAX_ID_LENGTH, canonical_json
from ._util import MAX_DELAY

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["MissedTicks", "Schedule", "iso_utc"]

_UTC = datetime.UTC
# the longest name that leaves room in a job id for "@" and the tick's UTC time
_MAX_NAME = MAX_ID_LENGTH - len("@2026-01-01T00:00:00Z")


class MissedTicks(enum.Enum):
    """What a scheduler does with ticks that fell while no scheduler ran.

    The next tick is always stored in the queue ahead of time, as a delayed job,
    so it runs even when every scheduler is down at that moment; the ticks after
    it, until a scheduler runs again, are the missed ones.
    """

    SKIP = "skip"
    """Run none of them: the schedule goes on from the next tick."""
    LATEST = "latest"
    """Run the latest one once, at once (a report that should exist, whenever)."""
    ALL = "all"
    """Run each, oldest first, at once, but at most the schedule's *catch_up* of them (the
    latest ones)."""


def _check_name(instance: Schedule, attribute: attrs.Attribute[str], name: str) -> None:
    if not isinstance(name, str) or not name or len(name) > _MAX_NAME or name != name.strip():
        raise ConfigurationError(
            f"Schedule(name={name!r}): give a name of 1 to {_MAX_NAME} characters with no "
            "space at either end; it names every tick's job"
        )
    if "@" in name:
        raise ConfigurationError(
            f"Schedule(name={name!r}): a name may not contain '@', which separates the "
            "name from the tick in each job's id"
        )


def _check_zone(instance: Schedule, attribute: attrs.Attribute[str], zone: str) -> None:
    try:
        zoneinfo.ZoneInfo(zone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, TypeError):
        raise ConfigurationError(
            f"Schedule(timezone={zone!r}): not a time zone this machine knows; give an IANA "
            "name such as 'Europe/Riga' or 'UTC' (pip install tzdata where the system has none)"
        ) from None


def _policy(value: MissedTicks | str) -> MissedTicks:
    try:
        return MissedTicks(value)
    except ValueError:
        choices = ", ".join(repr(m.value) for m in MissedTicks)
        raise ConfigurationError(
            f"Schedule(missed={value!r}): give a MissedTicks, or one of {choices}"
        ) from None


def _check_catch_up(instance: Schedule, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(
            f"Schedule(catch_up={value!r}): give the most missed ticks to run, an int >= 1"
        )


@attrs.frozen
class Schedule:
    """A job enqueued on a cron expression or at a fixed interval.

    Give exactly one of *cron* and *every*. Each tick becomes one job whose id is
    ``"<name>@<tick in UTC, ISO 8601>"`` (``"nightly@2026-12-03T03:00:00Z"``), so
    any number of schedulers may run the same schedule: the queue keeps one job
    per tick. Its payload is *payload* when given, else ``{"schedule": name,
    "tick": "<the same ISO time>"}``.

    Args:
        name: Names the schedule and its jobs' ids; no ``@``.
        cron: A five-field cron expression (minute, hour, day of month, month,
            day of week), read by cronsim, in *timezone*. A time the clocks skip
            (spring forward) runs at the next valid moment; one they repeat runs once.
        every: An interval of whole seconds (at least one): ticks fall on the
            multiples of it since the epoch (1970-01-01 UTC), so every process
            agrees on them without talking.
        timezone: The IANA zone *cron* is read in.
        payload: Any JSON value for every tick's job.
        missed: What to do with ticks missed while no scheduler ran.
        catch_up: With `MissedTicks.ALL`, the most missed ticks run.

    Raises:
        ConfigurationError: Both or neither of *cron* and *every*, an expression
            cronsim cannot read, an unknown zone, a bad name or interval, or a
            payload that is no JSON value (or nests too deep).
    """

    name: str = attrs.field(validator=_check_name)
    cron: str | None = None
    every: datetime.timedelta | None = None
    timezone: str = attrs.field(default="UTC", validator=_check_zone)
    payload: Any = None
    missed: MissedTicks = attrs.field(default=MissedTicks.SKIP, converter=_policy)
    catch_up: int = attrs.field(default=100, validator=_check_catch_up)

    def __attrs_post_init__(self) -> None:
        where = f"Schedule({self.name!r})"
        if (self.cron is None) == (self.every is None):
            raise ConfigurationError(
                f"{where}: give cron='…' (e.g. '0 3 * * *') or every=timedelta(…), one of them"
            )
        if self.cron is not None:
            from cronsim import CronSim, CronSimError  # here: 12 ms a command would not need

            if not isinstance(self.cron, str):
                raise ConfigurationError(f"{where}: cron= takes a string such as '*/5 * * * *'")
            try:
                CronSim(self.cron, datetime.datetime.now(_UTC))
            except CronSimError as error:
                raise ConfigurationError(
                    f"{where}: cron={self.cron!r} is not a cron expression ({error}); give "
                    "five fields: minute hour day-of-month month day-of-week"
                ) from None
        else:
            every = self.every
            if not isinstance(every, datetime.timedelta):
                raise ConfigurationError(
                    f"{where}: every= takes a datetime.timedelta, not {type(every).__name__}"
                )
            seconds = every.total_seconds()
            if seconds < 1 or seconds != int(seconds) or seconds > MAX_DELAY:
                raise ConfigurationError(
                    f"{where}: every={every!r}: give a whole number of seconds, at least one "
                    "and at most 100 years"
                )
        if self.payload is not None:
            try:  # here, not at the first tick: a worker must not stop on it later
                canonical_json(self.payload, "its payload")
            except (TypeError, ValueError) as error:
                raise ConfigurationError(f"{where}: {error}") from None

    @property
    def description(self) -> str:
        """The schedule as a person reads it: ``cron '0 3 * * *' (UTC)``, ``every 60 s``."""
        if self.cron is not None:
            return f"cron {self.cron!r} ({self.timezone})"
        assert self.every is not None
        return f"every {self.every.total_seconds():g} s"

    def next_tick(self, after: float) -> float:
        """The first tick strictly after *after* (seconds since the epoch)."""
        return next(self._forward(after))

    def ticks_between(self, after: float, upto: float, limit: int) -> list[float]:
        """The latest *limit* ticks in (*after*, *upto*], oldest first."""
        found: list[float] = []
        for tick in self._backward(upto):
            if tick <= after or len(found) == limit:
                break
            found.append(tick)
        found.reverse()
        return found

    def job_id(self, tick: float) -> str:
        """The id of the job of the tick at *tick*."""
        return f"{self.name}@{iso_utc(tick)}"

    def job_payload(self, tick: float) -> Any:
        """The payload of the job of the tick at *tick*."""
        if self.payload is not None:
            return self.payload
        return {"schedule": self.name, "tick": iso_utc(tick)}

    def _forward(self, after: float) -> Iterator[float]:
        if self.every is not None:
            step = int(self.every.total_seconds())
            first = (math.floor(after) // step + 1) * step
            return itertools.count(first, step)
        from cronsim import CronSim

        zone = zoneinfo.ZoneInfo(self.timezone)
        start = datetime.datetime.fromtimestamp(after, zone)
        assert self.cron is not None
        return (moment.timestamp() for moment in CronSim(self.cron, start))

    def _backward(self, upto: float) -> Iterator[float]:
        """Ticks at or before *upto*, latest first."""
        if self.every is not None:
            step = int(self.every.total_seconds())
            return itertools.count(math.floor(upto) // step * step, -step)
        from cronsim import CronSim

        zone = zoneinfo.ZoneInfo(self.timezone)
        # cronsim walks back from strictly before its start, to the minute: start a
        # second later and drop what falls after upto
        start = datetime.datetime.fromtimestamp(upto + 1, zone)
        assert self.cron is not None
        ticks = (moment.timestamp() for moment in CronSim(self.cron, start, reverse=True))
        return (tick for tick in ticks if tick <= upto)


def iso_utc(tick: float) -> str:
    """*tick* in UTC, ISO 8601 to the second: ``2026-12-03T03:00:00Z``."""
    moment = datetime.datetime.fromtimestamp(tick, _UTC)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")
