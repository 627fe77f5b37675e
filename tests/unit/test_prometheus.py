"""The worker's /metrics: per-process counters, queue-wide gauges, latency histograms.

The collector is built from a `Metrics` and a shared snapshot, and its output is
read back with prometheus_client's own parser, as Prometheus would read it.
"""

from __future__ import annotations

import logging
import math
import socket
import urllib.request
from typing import TYPE_CHECKING

import attrs
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from trioqueue._metrics import (
    COUNTER_NAMES,
    SHARED_COUNTER_NAMES,
    Gauges,
    HistogramSnapshot,
    Metrics,
    MetricsSnapshot,
)
from trioqueue._prometheus import BUCKETS, MetricsCollector

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

QUEUE = "{mail}"
PER_PROCESS = {
    "processed": "trioqueue_worker_processed",
    "succeeded": "trioqueue_worker_succeeded",
    "failed": "trioqueue_worker_failed",
    "retries": "trioqueue_worker_retries",
    "dead_lettered": "trioqueue_worker_dead_lettered",
    "dropped": "trioqueue_worker_dropped",
    "cancelled": "trioqueue_worker_cancelled",
    "released": "trioqueue_worker_released",
    "recovered": "trioqueue_worker_recovered",
    "stale": "trioqueue_worker_stale",
    "backend_errors": "trioqueue_worker_backend_errors",
}
QUEUE_GAUGES = {
    "queue_depth": "trioqueue_queue_depth",
    "backlog": "trioqueue_queue_backlog",
    "inflight": "trioqueue_queue_inflight",
    "retry_waiting": "trioqueue_queue_retry_waiting",
    "dead": "trioqueue_queue_dead",
    "scheduled": "trioqueue_queue_scheduled",
    "deferred": "trioqueue_queue_deferred",
}
LATENCIES = {
    "queue_wait": "trioqueue_worker_queue_wait_seconds",
    "handler_time": "trioqueue_worker_handler_seconds",
    "end_to_end": "trioqueue_worker_end_to_end_seconds",
}
EMPTY = HistogramSnapshot(0, 0.0, 0.0, 0.0, 0.0, 0.0)


def shared_snapshot(**fields: int) -> MetricsSnapshot:
    """A snapshot as `RedisBackend.stats` returns it: the queue's totals."""
    counters = {name: fields.get(name, 0) for name in COUNTER_NAMES}
    gauges = Gauges(**{name: fields.get(name, 0) for name in QUEUE_GAUGES})
    return MetricsSnapshot(
        **counters, gauges=gauges, queue_wait=EMPTY, handler_time=EMPTY, end_to_end=EMPTY
    )


def families(collector: MetricsCollector) -> dict[str, Metric]:
    """The families of the exposition text, by name (counters without ``_total``)."""
    registry = CollectorRegistry(auto_describe=True)
    registry.register(collector)
    text = generate_latest(registry).decode()
    return {family.name: family for family in text_string_to_metric_families(text)}


def value(found: dict[str, Metric], name: str, sample: str | None = None) -> float:
    family = found[name]
    wanted = sample or name
    (only,) = [s for s in family.samples if s.name == wanted]
    assert only.labels == {"queue": QUEUE}
    return float(only.value)


class TestPerProcessCounters:
    def test_are_this_process_numbers_not_the_queue_totals(self):
        metrics = Metrics(Gauges)
        for offset, attribute in enumerate(PER_PROCESS, start=1):
            setattr(metrics, attribute, offset)
        collector = MetricsCollector(QUEUE, metrics)
        collector.refresh(shared_snapshot(**dict.fromkeys(SHARED_COUNTER_NAMES, 1000)))
        found = families(collector)
        for offset, (attribute, name) in enumerate(PER_PROCESS.items(), start=1):
            assert found[name].type == "counter", name
            assert value(found, name, name + "_total") == offset, attribute

    def test_start_at_zero(self):
        found = families(MetricsCollector(QUEUE, Metrics(Gauges)))
        for name in PER_PROCESS.values():
            assert value(found, name, name + "_total") == 0

    def test_are_read_at_each_refresh_not_during_the_scrape(self):
        metrics = Metrics(Gauges)
        collector = MetricsCollector(QUEUE, metrics)
        metrics.succeeded = 5
        name = "trioqueue_worker_succeeded"
        assert value(families(collector), name, name + "_total") == 0
        collector.refresh(None)
        assert value(families(collector), name, name + "_total") == 5

    def test_are_served_while_the_queue_cannot_be_read(self):
        metrics = Metrics(Gauges)
        metrics.backend_errors = 3
        collector = MetricsCollector(QUEUE, metrics)
        collector.refresh(shared_snapshot(succeeded=9))
        collector.refresh(None)  # the stats could not be read this time
        found = families(collector)
        name = "trioqueue_worker_backend_errors"
        assert value(found, name, name + "_total") == 3
        # stale queue-wide numbers never pass for current ones
        assert not [n for n in found if n.startswith("trioqueue_queue_")]


class TestQueueWideGauges:
    def test_are_gauges_under_their_own_names(self):
        totals = {name: 100 + offset for offset, name in enumerate(SHARED_COUNTER_NAMES)}
        held = {name: 10 + offset for offset, name in enumerate(QUEUE_GAUGES)}
        collector = MetricsCollector(QUEUE, Metrics(Gauges))
        collector.refresh(shared_snapshot(**totals, **held))
        found = families(collector)
        for name, expected in totals.items():
            family = f"trioqueue_queue_{name}"
            assert found[family].type == "gauge", family
            assert value(found, family) == expected
        for attribute, family in QUEUE_GAUGES.items():
            assert found[family].type == "gauge", family
            assert value(found, family) == held[attribute]

    def test_no_name_is_both_per_process_and_queue_wide(self):
        collector = MetricsCollector(QUEUE, Metrics(Gauges))
        collector.refresh(shared_snapshot())
        found = families(collector)
        for name, family in found.items():
            kind = family.type
            if name.startswith("trioqueue_queue_"):
                assert kind == "gauge", name
            else:
                assert name.startswith("trioqueue_worker_"), name
                assert kind in ("counter", "histogram"), name

    def test_help_says_not_to_sum_them(self):
        collector = MetricsCollector(QUEUE, Metrics(Gauges))
        collector.refresh(shared_snapshot())
        for name, family in families(collector).items():
            help_text = family.documentation
            if name.startswith("trioqueue_queue_"):
                assert "queue-wide" in help_text.lower(), name
                assert "do not sum" in help_text, name
            else:
                assert "this process" in help_text, name


def test_every_metric_says_what_it_means():
    metrics = Metrics(Gauges)
    metrics.handler_time.observe(0.1)
    collector = MetricsCollector(QUEUE, metrics)
    collector.refresh(shared_snapshot())
    found = families(collector)
    expected = {*PER_PROCESS.values(), *QUEUE_GAUGES.values(), *LATENCIES.values()}
    expected |= {f"trioqueue_queue_{name}" for name in SHARED_COUNTER_NAMES}
    expected.add("trioqueue_queue_ready_by_priority")
    assert set(found) == expected
    for name, family in found.items():
        help_text = family.documentation
        assert len(help_text.split()) >= 5, name  # words, not the metric's name again
        assert name not in help_text, name
        if name.endswith("_seconds"):
            assert "seconds" in help_text.lower(), name


# --- latency histograms ----------------------------------------------------------------


def buckets(found: dict[str, Metric], name: str) -> list[tuple[float, float]]:
    family = found[name]
    return [(float(s.labels["le"]), s.value) for s in family.samples if s.name == name + "_bucket"]


def observed(values: list[float]) -> dict[str, Metric]:
    metrics = Metrics(Gauges)
    for each in values:
        metrics.handler_time.observe(each)
        metrics.queue_wait.observe(each / 2)
    collector = MetricsCollector(QUEUE, metrics)
    collector.refresh(None)
    return families(collector)


class TestHistograms:
    def test_are_prometheus_histograms_in_seconds(self):
        found = observed([0.003, 0.2, 0.2, 4.0, 900.0])
        name = "trioqueue_worker_handler_seconds"
        assert found[name].type == "histogram"
        counts = buckets(found, name)
        assert [bound for bound, _ in counts] == [*BUCKETS, math.inf]
        assert dict(counts)[0.005] == 1
        assert dict(counts)[0.25] == 3
        assert dict(counts)[600.0] == 4
        assert dict(counts)[math.inf] == 5
        assert value(found, name, name + "_count") == 5
        assert value(found, name, name + "_sum") == pytest.approx(904.403)

    def test_bounds_run_from_a_millisecond_to_ten_minutes(self):
        assert BUCKETS[0] == 0.001
        assert BUCKETS[-1] == 600.0
        assert list(BUCKETS) == sorted(set(BUCKETS))

    def test_empty_histograms_are_served_with_zero_counts(self):
        found = observed([])
        for name in LATENCIES.values():
            assert all(count == 0 for _, count in buckets(found, name))
            assert value(found, name, name + "_count") == 0
            assert value(found, name, name + "_sum") == 0

    @given(
        values=st.lists(
            st.floats(min_value=0.0, max_value=2000.0, allow_nan=False, allow_infinity=False),
            max_size=200,
        )
    )
    def test_buckets_are_cumulative_and_end_at_the_count(self, values):
        found = observed(values)
        name = "trioqueue_worker_handler_seconds"
        counts = buckets(found, name)
        assert [count for _, count in counts] == sorted(count for _, count in counts)
        assert counts[-1] == (math.inf, len(values))
        assert value(found, name, name + "_count") == len(values)
        assert value(found, name, name + "_sum") == pytest.approx(math.fsum(values), abs=1e-9)
        for bound, count in counts[:-1]:  # within the histogram's 2 % buckets
            assert count <= sum(v <= bound * (1 + 1e-9) for v in values)
            assert count >= sum(v <= bound / 1.02 * (1 - 1e-9) for v in values)


# --- serving ---------------------------------------------------------------------------


class UnreadableQueue:
    """A backend whose queue-wide stats cannot be read (Redis is down), with live metrics."""

    def __init__(self) -> None:
        from trioqueue import MemoryBackend

        self.inner = MemoryBackend()
        self.reads = 0
        self.refreshed = trio.Event()  # set at the second read: the first refresh is done

    @property
    def metrics(self) -> Metrics:
        return self.inner.metrics

    async def stats(self) -> MetricsSnapshot:
        from trioqueue import BackendUnavailable

        self.reads += 1
        if self.reads == 2:
            self.refreshed.set()
        await trio.lowlevel.checkpoint()
        raise BackendUnavailable("redis://db", "connection refused")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def fetch(port: int) -> dict[str, Metric]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    return {family.name: family for family in text_string_to_metric_families(text)}


async def test_this_process_metrics_are_served_while_redis_cannot_be_read(caplog):
    from trioqueue._prometheus import serve_metrics

    caplog.set_level(logging.DEBUG, logger="trioqueue.metrics")
    backend = UnreadableQueue()
    backend.metrics.succeeded = 4
    port = free_port()
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_metrics, backend, QUEUE, port)
        await backend.refreshed.wait()
        found = await trio.to_thread.run_sync(fetch, port)
        nursery.cancel_scope.cancel()
    name = "trioqueue_worker_succeeded"
    assert value(found, name, name + "_total") == 4
    assert not [n for n in found if n.startswith("trioqueue_queue_")]
    # the pool logs an outage, one line per backoff step; this, only at DEBUG
    said = [r for r in caplog.records if "queue-wide metrics not refreshed" in r.message]
    assert said
    assert {r.levelno for r in said} == {logging.DEBUG}


def test_the_ready_jobs_are_a_gauge_per_priority_level():
    collector = MetricsCollector(QUEUE, Metrics(Gauges))
    levels = {2: 3, 1: 0, 0: 5, -1: 0, -2: 1}
    snap = attrs.evolve(
        shared_snapshot(queue_depth=9),
        gauges=Gauges(queue_depth=9, ready_by_priority=levels),
    )
    collector.refresh(snap)
    family = families(collector)["trioqueue_queue_ready_by_priority"]
    assert {s.labels["priority"]: s.value for s in family.samples} == {
        str(level): n for level, n in levels.items()
    }
    assert {s.labels["queue"] for s in family.samples} == {QUEUE}
