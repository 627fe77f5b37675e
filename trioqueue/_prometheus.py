"""The worker's metrics in the Prometheus text format, served by prometheus_client.

Two kinds of numbers, under two name prefixes, so they cannot be mistaken:

* ``trioqueue_worker_*``: what this process did (counters ending in ``_total``,
  and latency histograms in seconds). Each process starts them at 0, so summing
  them across the workers of a queue gives the queue's total work.
* ``trioqueue_queue_*``: the queue as Redis holds it (gauges): its running
  totals and what it holds now. Every worker of the queue reports the same
  numbers, so take ``max()`` of them or scrape one worker; never sum them.

A Trio task refreshes a snapshot of both every second (the queue's figures
with one read of Redis, this process's from its `Metrics`, without I/O);
scrapes, which prometheus_client answers from a thread of its own, read that
snapshot and never wait on Redis nor touch the live counters.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

import attrs
import trio
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import start_http_server
from prometheus_client.registry import Collector, CollectorRegistry

from ._cli._types import UsageError
from ._exceptions import BackendUnavailable

if TYPE_CHECKING:
    from collections.abc import Iterator

    from prometheus_client.metrics_core import Metric

    from ._backend import Backend
    from ._metrics import Histogram, Metrics, MetricsSnapshot

__all__ = [
    "BUCKETS",
    "LATENCY_HELP",
    "PROCESS_COUNTER_HELP",
    "QUEUE_GAUGE_HELP",
    "QUEUE_TOTAL_HELP",
    "MetricsCollector",
    "serve_metrics",
]

logger = logging.getLogger("trioqueue.metrics")

BUCKETS: Final = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
)  # fmt: skip
"""The upper bounds, in seconds, of every latency histogram's buckets: 1 ms to 10 min.

Counted from the 2 %-wide buckets of `Histogram`: a value within 2 % below a
bound may be counted at the next bound (see `Histogram.cumulative_counts`).
"""

_THIS_PROCESS: Final = (
    " Counted by this process only, from 0 when it starts: sum() across the workers "
    "for the queue's total."
)
_QUEUE_WIDE: Final = (
    " Queue-wide; the same in every worker process: use max() or one scrape target, do not sum."
)

PROCESS_COUNTER_HELP: Final = {
    "processed": "Job attempts this process ended and recorded: succeeded, failed, dropped or "
    "dead-lettered (attempts cancelled by a shutdown are not counted).",
    "succeeded": "Jobs this process completed.",
    "failed": "Attempts in this process whose handler raised an exception (other than Drop "
    "and Retry) or ran past its timeout.",
    "retries": "Retries this process scheduled, after a failed attempt or Retry.",
    "dead_lettered": "Jobs this process moved to the dead letters.",
    "dropped": "Jobs this process dropped because their handler raised Drop.",
    "cancelled": "Jobs cancelled (queue.cancel) while this process held them, and ended here.",
    "released": "Unfinished jobs this process gave back to the queue, when shutting down or "
    "when it could not record their outcome.",
    "recovered": "Claims of crashed or hung workers whose lease ran out, put back on "
    "the queue by this process's sweeper.",
    "stale": "Outcomes of this process the queue refused because the job's lease had run out "
    "and the job had been put back for another attempt.",
    "backend_errors": "Calls this process made to an unreachable Redis, and retried.",
}
"""Each per-process counter (an attribute of `Metrics`, exported as
``trioqueue_worker_<name>_total``) and what it counts."""

QUEUE_TOTAL_HELP: Final = {
    "enqueued": "Jobs the queue accepted (deduplicated and conflicting enqueues excluded).",
    "processed": "Handler attempts that ended, in every worker (cancelled attempts excluded).",
    "succeeded": "Jobs completed, by every worker.",
    "failed": "Attempts that raised an exception (other than Drop and Retry) or timed out.",
    "retries": "Retries scheduled, after failed attempts and Retry.",
    "dead_lettered": "Jobs moved to the dead letters.",
    "dropped": "Jobs dropped by their handler raising Drop.",
    "cancelled": "Jobs ended by a cancel (queue.cancel, trioqueue cancel) before they finished.",
    "deduplicated": "Enqueues that found a job with the same id and payload, and returned it.",
    "conflicts": "Enqueues refused because a job with the same id had another payload.",
    "recovered": "Claims whose lease ran out (their worker crashed or hung), put back.",
    "released": "Unfinished jobs that workers gave back to the queue.",
    "dead_requeued": "Dead letters put back on the queue with fresh attempts.",
    "stale": "Outcomes refused because the job's lease had run out and it had been put back.",
    "resent": "Outcomes sent again after their reply was lost (an outage), already recorded.",
    "expired": "Jobs a queue with key_ttl forgot: its record expired or vanished before it ran.",
}
"""Each of the queue's running totals (a shared counter of `MetricsSnapshot`,
exported as the gauge ``trioqueue_queue_<name>``) and what it counts."""

READY_BY_PRIORITY_HELP: Final = (
    "Jobs on the ready lists now, by priority level (they add up to trioqueue_queue_depth)."
)
"""What ``trioqueue_queue_ready_by_priority`` (labelled ``priority``, 2 to -2) counts."""

QUEUE_GAUGE_HELP: Final = {
    "trioqueue_queue_depth": ("queue_depth", "Jobs on the ready list now, waiting for a worker."),
    "trioqueue_queue_backlog": (
        "backlog",
        "Jobs waiting for a worker now: the ready list plus jobs stored while it was full.",
    ),
    "trioqueue_queue_inflight": (
        "inflight",
        "Jobs claimed by workers now: running, or prefetched and about to run.",
    ),
    "trioqueue_queue_retry_waiting": (
        "retry_waiting",
        "Claimed jobs waiting out a retry backoff now.",
    ),
    "trioqueue_queue_dead": ("dead", "Dead letters held now."),
    "trioqueue_queue_scheduled": (
        "scheduled",
        "Jobs stored until their due time now (delayed jobs): not yet on the ready list.",
    ),
    "trioqueue_queue_deferred": (
        "deferred",
        "Jobs waiting now for the jobs they run after: not yet on the ready list.",
    ),
}
"""Each gauge of what the queue holds: metric name → (`Gauges` attribute, meaning)."""

LATENCY_HELP: Final = {
    "trioqueue_worker_queue_wait_seconds": (
        "queue_wait",
        "Seconds a job waited, ready on the queue, before this process started an attempt.",
    ),
    "trioqueue_worker_handler_seconds": (
        "handler_time",
        "Seconds each handler attempt ran in this process.",
    ),
    "trioqueue_worker_end_to_end_seconds": (
        "end_to_end",
        "Seconds from a job's acceptance to its completion by this process, retries included.",
    ),
}
"""Each latency histogram: metric name → (`Metrics` attribute, meaning)."""

_LATENCY_NOTE: Final = " Observed by this process only: sum the buckets across the workers."
_BOUND_LABELS: Final = tuple(repr(bound) for bound in BUCKETS)  # the `le` labels: 0.001 … 600.0
_REFRESH: Final = 1.0  # seconds between two snapshots (and reads of the queue's stats)


@attrs.frozen
class _Latency:
    """One latency histogram at one moment, in Prometheus' terms."""

    cumulative: tuple[int, ...]  # observations at most each of BUCKETS
    count: int
    total: float

    @classmethod
    def of(cls, histogram: Histogram) -> _Latency:
        return cls(tuple(histogram.cumulative_counts(BUCKETS)), histogram.count, histogram.total)


@attrs.frozen
class _State:
    """What a scrape shows: this process's numbers, and the queue's when they could be read."""

    counters: tuple[int, ...]  # in the order of PROCESS_COUNTER_HELP
    latencies: tuple[_Latency, ...]  # in the order of LATENCY_HELP
    queue: MetricsSnapshot | None


class MetricsCollector(Collector):
    """The prometheus_client collector of a worker process's /metrics.

    It serves the snapshot the last `refresh` took: call `refresh` from the
    thread that updates *metrics* (the Trio thread); `collect` (a scrape, from
    any thread) only reads that frozen snapshot, so it is cheap, does no I/O,
    and never sees the live counters change under it.

    Args:
        queue: The queue's name, the ``queue`` label of every metric.
        metrics: This process's counters and histograms (``backend.metrics``).
    """

    def __init__(self, queue: str, metrics: Metrics) -> None:
        self._queue = queue
        self._metrics = metrics
        self._state = self._taken(None)

    def _taken(self, queue: MetricsSnapshot | None) -> _State:
        metrics = self._metrics
        return _State(
            counters=tuple(getattr(metrics, name) for name in PROCESS_COUNTER_HELP),
            latencies=tuple(
                _Latency.of(getattr(metrics, attribute)) for attribute, _ in LATENCY_HELP.values()
            ),
            queue=queue,
        )

    def refresh(self, queue: MetricsSnapshot | None) -> None:
        """Take this process's numbers now, and the queue's from *queue*.

        Args:
            queue: What ``backend.stats()`` returned (its shared counters and
                gauges are used), or None when it could not be read: the
                ``trioqueue_queue_*`` gauges are then left out of the scrapes
                until the next refresh, rather than served stale.
        """
        self._state = self._taken(queue)  # one assignment: a scrape sees all or nothing

    def collect(self) -> Iterator[Metric]:
        """Yield every metric of the last snapshot (what a scrape calls)."""
        state, label = self._state, [self._queue]
        for (name, help_text), value in zip(
            PROCESS_COUNTER_HELP.items(), state.counters, strict=True
        ):
            counter = CounterMetricFamily(
                f"trioqueue_worker_{name}", help_text + _THIS_PROCESS, labels=["queue"]
            )
            counter.add_metric(label, value)
            yield counter
        for (name, (_, help_text)), latency in zip(
            LATENCY_HELP.items(), state.latencies, strict=True
        ):
            histogram = HistogramMetricFamily(name, help_text + _LATENCY_NOTE, labels=["queue"])
            buckets = [
                *zip(_BOUND_LABELS, latency.cumulative, strict=True),
                ("+Inf", latency.count),
            ]
            histogram.add_metric(label, buckets, sum_value=latency.total)
            yield histogram
        snap = state.queue
        if snap is None:
            return
        for name, help_text in QUEUE_TOTAL_HELP.items():
            gauge = GaugeMetricFamily(
                f"trioqueue_queue_{name}",
                f"{help_text} A running total, kept in Redis.{_QUEUE_WIDE}",
                labels=["queue"],
            )
            gauge.add_metric(label, getattr(snap, name))
            yield gauge
        for name, (attribute, help_text) in QUEUE_GAUGE_HELP.items():
            gauge = GaugeMetricFamily(name, help_text + _QUEUE_WIDE, labels=["queue"])
            gauge.add_metric(label, getattr(snap.gauges, attribute))
            yield gauge
        gauge = GaugeMetricFamily(
            "trioqueue_queue_ready_by_priority",
            READY_BY_PRIORITY_HELP + _QUEUE_WIDE,
            labels=["queue", "priority"],
        )
        for level, count in snap.gauges.ready_by_priority.items():
            gauge.add_metric([*label, str(level)], count)
        yield gauge


async def serve_metrics(
    backend: Backend,
    queue: str,
    port: int,
    addr: str = "127.0.0.1",
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``/metrics`` on *addr*, *port* until cancelled, refreshing the numbers every second.

    Started (``nursery.start``) once the port is bound. The default address is
    the loopback one, for this host only; give ``0.0.0.0``, ``::`` or an
    interface's address to let other hosts scrape it. This process's metrics
    are served from the start; the queue-wide ones while Redis can be read.

    Raises:
        UsageError: The address and port cannot be bound (in use, not allowed,
            or not an address of this host).
    """
    collector = MetricsCollector(queue, backend.metrics)
    registry = CollectorRegistry(auto_describe=True)
    registry.register(collector)
    try:
        server, thread = start_http_server(port, addr=addr, registry=registry)
    except OSError as exc:
        raise UsageError(
            f"--metrics-port {port}: cannot serve metrics there on {addr} "
            f"({exc.strerror or exc}); choose a free port, and for --metrics-addr an "
            "address of this host"
        ) from None
    host = f"[{addr}]" if ":" in addr else addr
    logger.info("metrics on http://%s:%d/metrics", host, port)
    task_status.started()
    try:
        while True:
            shared: MetricsSnapshot | None = None
            try:
                shared = await backend.stats()
            except BackendUnavailable as exc:
                # the pool logs the outage, one line per backoff step: not once a second here
                logger.debug("queue-wide metrics not refreshed: %s", exc)
            collector.refresh(shared)
            await trio.sleep(_REFRESH)
    finally:
        with trio.CancelScope(shield=True):  # stop serving even when cancelled
            await trio.to_thread.run_sync(server.shutdown)
        server.server_close()
        thread.join()
