"""Counters, gauges and latency histograms; synchronous updates, no I/O.

Counters only ever increase. Gauges are not stored here: they are read from the
backend, which counts what it holds, so a gauge always equals the true count.
"""

from __future__ import annotations

import bisect
import itertools
import math
from typing import TYPE_CHECKING, Final

import attrs

from ._payload import PRIORITIES

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

__all__ = [
    "COUNTER_NAMES",
    "SHARED_COUNTER_NAMES",
    "Gauges",
    "Histogram",
    "HistogramSnapshot",
    "Metrics",
    "MetricsSnapshot",
    "shared_snapshot",
]

SHARED_COUNTER_NAMES: Final = (
    "enqueued",
    "processed",
    "succeeded",
    "failed",
    "retries",
    "dead_lettered",
    "dropped",
    "cancelled",
    "deduplicated",
    "conflicts",
    "recovered",
    "released",
    "dead_requeued",
    "stale",
    "resent",
    "expired",
)
"""Counters every user of a queue adds to (a shared backend keeps them in one place)."""

COUNTER_NAMES: Final = (*SHARED_COUNTER_NAMES, "backend_errors")
"""Every counter of a `MetricsSnapshot`; ``backend_errors`` is per process."""

_MIN_VALUE: Final = 1e-6  # one microsecond: anything shorter shares the first bucket
_GROWTH: Final = 1.02  # each bucket is 2 % wider than the last: percentiles within 2 %
_LOG_GROWTH: Final = math.log(_GROWTH)


@attrs.frozen
class HistogramSnapshot:
    """Percentiles of a latency distribution, in seconds (0.0 when empty)."""

    count: int
    """How many values were observed."""
    mean: float
    """The arithmetic mean."""
    p50: float
    """The median."""
    p90: float
    """The 90th percentile."""
    p99: float
    """The 99th percentile."""
    max: float
    """The largest value observed."""


@attrs.define(eq=False)
class Histogram:
    """A log-bucketed histogram: bounded memory, percentiles within 2 %.

    Values are seconds. A reported percentile is the upper edge of the bucket
    holding it, never above the largest value observed.
    """

    _buckets: dict[int, int] = attrs.field(factory=dict, init=False)
    _count: int = attrs.field(default=0, init=False)
    _sum: float = attrs.field(default=0.0, init=False)
    _max: float = attrs.field(default=0.0, init=False)

    def observe(self, value: float) -> None:
        """Record one value (negative values count as zero)."""
        value = max(value, 0.0)
        index = 0 if value <= _MIN_VALUE else 1 + int(math.log(value / _MIN_VALUE) / _LOG_GROWTH)
        self._buckets[index] = self._buckets.get(index, 0) + 1
        self._count += 1
        self._sum += value
        self._max = max(self._max, value)

    @property
    def count(self) -> int:
        """How many values were observed."""
        return self._count

    @property
    def total(self) -> float:
        """The sum of the values observed, in seconds (negative ones counted as zero)."""
        return self._sum

    def cumulative_counts(self, bounds: Sequence[float]) -> list[int]:
        """How many observations were at most each of *bounds*, as Prometheus buckets count.

        Counted from the 2 %-wide log buckets: an observation counts toward a
        bound when its whole bucket lies at or below the bound. So every value
        counted is at most the bound, and every value more than 2 % below it is
        counted, but a value in the 2 % just below a bound may be counted only at
        the next one (a latency reads at most 2 % long, as in `percentile`). At a
        bound that is a bucket edge (a microsecond times a power of 1.02) the
        count is exact, up to floating-point rounding. Values up to a microsecond
        share the first bucket, which counts at bounds of a microsecond or more.
        The result never exceeds `count` and, for ascending *bounds*, never
        decreases. Costs one sort of the buckets in use (about a thousand from a
        microsecond to ten minutes), whatever the number of observations.

        Args:
            bounds: Upper bounds in seconds, in any order.

        Returns:
            One count per bound, in the order of *bounds*.
        """
        indexes = sorted(self._buckets)
        edges = [_MIN_VALUE * _GROWTH**index for index in indexes]
        below = [0, *itertools.accumulate(self._buckets[index] for index in indexes)]
        return [below[bisect.bisect_right(edges, bound)] for bound in bounds]

    def percentile(self, fraction: float) -> float:
        """The value below which *fraction* (0 to 1) of the observations fall."""
        if self._count == 0:
            return 0.0
        rank = max(1, math.ceil(fraction * self._count))
        seen = 0
        for index in sorted(self._buckets):
            seen += self._buckets[index]
            if seen >= rank:
                edge = _MIN_VALUE * _GROWTH**index
                return min(edge, self._max)
        return self._max  # pragma: no cover - rank never exceeds the count

    def snapshot(self) -> HistogramSnapshot:
        """Return the current percentiles."""
        mean = self._sum / self._count if self._count else 0.0
        return HistogramSnapshot(
            count=self._count,
            mean=mean,
            p50=self.percentile(0.50),
            p90=self.percentile(0.90),
            p99=self.percentile(0.99),
            max=self._max,
        )


def _none_by_level() -> dict[int, int]:
    """No ready job at any priority level, highest first."""
    return dict.fromkeys(PRIORITIES, 0)


@attrs.frozen
class Gauges:
    """What a backend holds right now."""

    queue_depth: int = 0
    """Jobs on the ready queue, waiting for a worker."""
    backlog: int = 0
    """Jobs accepted and waiting for a worker: the ready queue plus jobs stored
    by `Queue.submit` (or put back) while it was full, which have ``queued = False``."""
    inflight: int = 0
    """Jobs claimed by worker pools: running, or prefetched and about to run."""
    retry_waiting: int = 0
    """Jobs a pool holds while it sleeps out their backoff before the next attempt."""
    dead: int = 0
    """Dead letters held."""
    scheduled: int = 0
    """Jobs stored until their due time: delayed jobs (``enqueue(..., delay=...)``),
    and retries given back mid-backoff by a pool that stopped or crashed. Not on the
    ready queue, not counted against its capacity."""
    deferred: int = 0
    """Jobs waiting for the jobs they run after (``enqueue(..., after=[...])``); not
    on the ready queue, not counted against its capacity."""
    ready_by_priority: Mapping[int, int] = attrs.field(factory=_none_by_level, hash=False)
    """Jobs on the ready queue by priority level, every level of `PRIORITIES` in
    its order (highest first); they add up to *queue_depth*."""

    @property
    def held(self) -> int:
        """Jobs the backend holds that are not finished."""
        return self.backlog + self.inflight + self.retry_waiting + self.scheduled + self.deferred


@attrs.frozen
class MetricsSnapshot:
    """Every counter, gauge and latency distribution at one moment."""

    enqueued: int
    """Jobs accepted (deduplicated and conflicting enqueues excluded)."""
    processed: int
    """Handler attempts that ended (cancelled attempts excluded)."""
    succeeded: int
    """Jobs completed."""
    failed: int
    """Attempts that raised an exception (other than `Drop` and `Retry`) or timed out."""
    retries: int
    """Retries scheduled, after failures and `Retry`."""
    dead_lettered: int
    """Jobs moved to the dead letters."""
    dropped: int
    """Jobs dropped by `Drop`."""
    cancelled: int
    """Jobs ended by `Queue.cancel`."""
    deduplicated: int
    """Enqueues that found the same id and payload and returned the existing job."""
    conflicts: int
    """Enqueues refused for the same id with another payload."""
    recovered: int
    """Claims whose lease ran out, put back by the sweeper."""
    released: int
    """Unfinished jobs put back by a pool shutting down."""
    dead_requeued: int
    """Dead letters put back on the queue with fresh attempts."""
    stale: int
    """Outcomes ignored because their claim had been recovered and re-claimed."""
    resent: int
    """Outcomes sent again after their reply was lost (an outage), found recorded already."""
    expired: int
    """Jobs a queue with ``key_ttl`` forgot: its record expired or vanished before it ran."""
    backend_errors: int
    """Calls a pool made to an unreachable backend, and retried (this process only)."""
    gauges: Gauges
    """What the backend holds now."""
    queue_wait: HistogramSnapshot
    """Seconds from ready to handler start."""
    handler_time: HistogramSnapshot
    """Seconds a handler attempt ran."""
    end_to_end: HistogramSnapshot
    """Seconds from acceptance to completion, retries included."""

    @property
    def finished(self) -> int:
        """Jobs that left the system: succeeded, dead-lettered, dropped, cancelled or expired."""
        return self.succeeded + self.dead_lettered + self.dropped + self.cancelled + self.expired

    @property
    def conserved(self) -> bool:
        """Whether every accepted job is accounted for.

        ``enqueued + dead_requeued == succeeded + dead_lettered + dropped +
        cancelled + expired + held``, where requeued dead letters count as
        accepted again.
        """
        return self.enqueued + self.dead_requeued == self.finished + self.gauges.held

    def report(self) -> str:
        """Every counter, the gauges, latency percentiles and the conservation check, as text.

        This is what ``print(snapshot)`` shows, and what ``trioqueue demo`` prints.
        """
        g = self.gauges
        lines = [
            "counters: " + ", ".join(f"{name}={getattr(self, name)}" for name in COUNTER_NAMES),
            f"gauges:   queue_depth={g.queue_depth}, backlog={g.backlog}, "
            f"inflight={g.inflight}, retry_waiting={g.retry_waiting}, "
            f"scheduled={g.scheduled}, deferred={g.deferred}, dead={g.dead}",
        ]
        for name in ("queue_wait", "handler_time", "end_to_end"):
            h: HistogramSnapshot = getattr(self, name)
            lines.append(
                f"{name + ':':<13} p50={h.p50 * 1000:.2f}ms p90={h.p90 * 1000:.2f}ms "
                f"p99={h.p99 * 1000:.2f}ms max={h.max * 1000:.2f}ms (n={h.count})"
            )
        verdict = "holds" if self.conserved else "BROKEN"
        lines.append(
            f"conservation {verdict}: enqueued {self.enqueued} + requeued {self.dead_requeued} = "
            f"succeeded {self.succeeded} + dead-lettered {self.dead_lettered} + dropped "
            f"{self.dropped} + cancelled {self.cancelled} + expired {self.expired} + "
            f"held {g.held}"
        )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


@attrs.define(eq=False)
class Metrics:
    """Live counters and histograms of one backend; take a `snapshot` to read them.

    Backends and pools add to the counters and call ``observe`` on the
    histograms directly; nothing here does I/O or checkpoints.
    """

    _gauges: Callable[[], Gauges]
    enqueued: int = attrs.field(default=0, init=False)
    processed: int = attrs.field(default=0, init=False)
    succeeded: int = attrs.field(default=0, init=False)
    failed: int = attrs.field(default=0, init=False)
    retries: int = attrs.field(default=0, init=False)
    dead_lettered: int = attrs.field(default=0, init=False)
    dropped: int = attrs.field(default=0, init=False)
    cancelled: int = attrs.field(default=0, init=False)
    deduplicated: int = attrs.field(default=0, init=False)
    conflicts: int = attrs.field(default=0, init=False)
    recovered: int = attrs.field(default=0, init=False)
    released: int = attrs.field(default=0, init=False)
    dead_requeued: int = attrs.field(default=0, init=False)
    stale: int = attrs.field(default=0, init=False)
    resent: int = attrs.field(default=0, init=False)
    expired: int = attrs.field(default=0, init=False)
    backend_errors: int = attrs.field(default=0, init=False)
    queue_wait: Histogram = attrs.field(factory=Histogram, init=False)
    handler_time: Histogram = attrs.field(factory=Histogram, init=False)
    end_to_end: Histogram = attrs.field(factory=Histogram, init=False)

    def snapshot(self) -> MetricsSnapshot:
        """Return every counter, gauge and percentile as one frozen value."""
        return MetricsSnapshot(
            enqueued=self.enqueued,
            processed=self.processed,
            succeeded=self.succeeded,
            failed=self.failed,
            retries=self.retries,
            dead_lettered=self.dead_lettered,
            dropped=self.dropped,
            cancelled=self.cancelled,
            deduplicated=self.deduplicated,
            conflicts=self.conflicts,
            recovered=self.recovered,
            released=self.released,
            dead_requeued=self.dead_requeued,
            stale=self.stale,
            resent=self.resent,
            expired=self.expired,
            backend_errors=self.backend_errors,
            gauges=self._gauges(),
            queue_wait=self.queue_wait.snapshot(),
            handler_time=self.handler_time.snapshot(),
            end_to_end=self.end_to_end.snapshot(),
        )


def shared_snapshot(
    counters: Mapping[str, int], gauges: Gauges, local: MetricsSnapshot
) -> MetricsSnapshot:
    """A shared queue's snapshot: its *counters* and *gauges*, with *local*'s histograms.

    A counter missing from *counters* is 0; backend errors are this process's own.
    """
    return MetricsSnapshot(
        **{name: counters.get(name, 0) for name in SHARED_COUNTER_NAMES},
        backend_errors=local.backend_errors,
        gauges=gauges,
        queue_wait=local.queue_wait,
        handler_time=local.handler_time,
        end_to_end=local.end_to_end,
    )
