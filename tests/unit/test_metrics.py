"""Metrics: histogram accuracy, gauges read from the backend, conservation."""

from __future__ import annotations

import math

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from trioqueue._metrics import (
    COUNTER_NAMES,
    Gauges,
    Histogram,
    HistogramSnapshot,
    Metrics,
    MetricsSnapshot,
)

positive = st.floats(min_value=1e-5, max_value=100.0, allow_nan=False, allow_infinity=False)
samples = st.lists(positive, min_size=1, max_size=300)
FRACTIONS = [0.0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1.0]


def exact_percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile: the smallest value with at least *fraction* of values <= it."""
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def filled(values: list[float]) -> Histogram:
    histogram = Histogram()
    for value in values:
        histogram.observe(value)
    return histogram


def assert_close(reported: float, exact: float) -> None:
    assert reported == pytest.approx(exact, rel=0.02, abs=0.0)
    # the reported value is a bucket's upper edge: never (noticeably) below the truth
    assert reported >= exact * (1 - 1e-9)


class TestHistogram:
    @given(values=samples)
    def test_snapshot_percentiles_within_two_percent(self, values):
        snap = filled(values).snapshot()
        assert snap.count == len(values)
        assert_close(snap.p50, exact_percentile(values, 0.50))
        assert_close(snap.p90, exact_percentile(values, 0.90))
        assert_close(snap.p99, exact_percentile(values, 0.99))

    @given(values=samples, fraction=st.sampled_from(FRACTIONS))
    def test_percentile_within_two_percent(self, values, fraction):
        assert_close(filled(values).percentile(fraction), exact_percentile(values, fraction))

    @given(values=samples)
    def test_max_and_mean(self, values):
        snap = filled(values).snapshot()
        assert snap.max == max(values)
        assert snap.mean == pytest.approx(math.fsum(values) / len(values), rel=1e-9)

    @given(values=samples)
    def test_percentiles_never_exceed_max(self, values):
        histogram = filled(values)
        assert all(histogram.percentile(f) <= max(values) for f in FRACTIONS)
        assert histogram.percentile(1.0) == max(values)

    @given(values=samples)
    def test_percentiles_are_monotonic(self, values):
        histogram = filled(values)
        reported = [histogram.percentile(f) for f in FRACTIONS]
        assert reported == sorted(reported)

    def test_empty_gives_zeros(self):
        histogram = Histogram()
        assert histogram.snapshot() == HistogramSnapshot(
            count=0, mean=0.0, p50=0.0, p90=0.0, p99=0.0, max=0.0
        )
        assert histogram.percentile(0.5) == 0.0

    def test_wide_spread(self):
        values = [0.001] * 50 + [10.0] * 49 + [100.0]
        snap = filled(values).snapshot()
        assert_close(snap.p50, 0.001)
        assert_close(snap.p90, 10.0)
        assert_close(snap.p99, 10.0)
        assert snap.max == 100.0

    def test_tiny_and_negative_values(self):
        histogram = filled([-1.0, 0.0, 1e-9])
        snap = histogram.snapshot()
        assert snap.count == 3
        assert snap.max == 1e-9
        assert snap.mean == pytest.approx(1e-9 / 3)
        assert 0.0 <= snap.p99 <= 1e-9

    def test_single_value(self):
        snap = filled([0.25]).snapshot()
        assert (snap.count, snap.mean, snap.max) == (1, 0.25, 0.25)
        assert snap.p50 == snap.p90 == snap.p99 == 0.25

    def test_memory_is_bounded(self):
        histogram = filled([i / 1000 for i in range(1, 100_001)])
        # 1 ms .. 100 s spans ~ log(1e5)/log(1.02) buckets, not 100 000
        assert len(histogram._buckets) < 600
        assert histogram.snapshot().count == 100_000

    @pytest.mark.parametrize("tiny", [0.0, 1e-6])
    def test_values_up_to_a_microsecond_report_one_microsecond(self, tiny):
        histogram = Histogram()
        histogram.observe(tiny)
        histogram.observe(1.0)
        assert histogram.percentile(0.5) == 1e-6


class TestMetrics:
    def test_snapshot_reads_gauges_from_callable(self):
        current = [Gauges(queue_depth=1, backlog=2, inflight=3, retry_waiting=4, dead=5)]
        calls = []

        def gauges() -> Gauges:
            calls.append(None)
            return current[0]

        metrics = Metrics(gauges)
        assert metrics.snapshot().gauges == Gauges(1, 2, 3, 4, 5)
        current[0] = Gauges(queue_depth=7, dead=1)
        assert metrics.snapshot().gauges == Gauges(queue_depth=7, dead=1)
        assert len(calls) == 2

    def test_snapshot_copies_counters_and_histograms(self):
        metrics = Metrics(Gauges)
        counters = [f.name for f in attrs.fields(MetricsSnapshot)]
        counters = [
            name
            for name in counters
            if name not in ("gauges", "queue_wait", "handler_time", "end_to_end")
        ]
        assert len(counters) == 17
        for offset, name in enumerate(counters, start=1):
            setattr(metrics, name, offset * 10)
        metrics.queue_wait.observe(0.5)
        metrics.handler_time.observe(1.0)
        metrics.handler_time.observe(3.0)
        snap = metrics.snapshot()
        for offset, name in enumerate(counters, start=1):
            assert getattr(snap, name) == offset * 10, name
        assert snap.queue_wait.count == 1
        assert snap.handler_time.count == 2
        assert snap.handler_time.max == 3.0
        assert snap.end_to_end == HistogramSnapshot(0, 0.0, 0.0, 0.0, 0.0, 0.0)

    def test_snapshot_is_frozen_and_detached(self):
        metrics = Metrics(Gauges)
        metrics.enqueued = 1
        snap = metrics.snapshot()
        metrics.enqueued = 2
        assert snap.enqueued == 1
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            snap.enqueued = 5  # type: ignore[misc]

    def test_fresh_metrics_are_zero_and_conserved(self):
        snap = Metrics(Gauges).snapshot()
        assert snap.enqueued == snap.processed == snap.stale == 0
        assert snap.finished == 0
        assert snap.conserved


def _snapshot(**fields: object) -> MetricsSnapshot:
    empty = HistogramSnapshot(0, 0.0, 0.0, 0.0, 0.0, 0.0)
    counters = dict.fromkeys(COUNTER_NAMES, 0)
    values: dict[str, object] = {
        **counters,
        "gauges": Gauges(),
        "queue_wait": empty,
        "handler_time": empty,
        "end_to_end": empty,
    }
    values.update(fields)
    return MetricsSnapshot(**values)  # type: ignore[arg-type]


class TestConservation:
    def test_gauges_held(self):
        gauges = Gauges(queue_depth=3, backlog=5, inflight=2, retry_waiting=4, dead=9)
        # queue_depth is part of backlog and dead letters are finished: neither adds
        assert gauges.held == 11

    def test_all_finished(self):
        snap = _snapshot(enqueued=10, succeeded=6, dead_lettered=3, dropped=1)
        assert snap.finished == 10
        assert snap.conserved

    def test_some_held(self):
        snap = _snapshot(
            enqueued=10,
            succeeded=4,
            dead_lettered=1,
            dropped=1,
            gauges=Gauges(queue_depth=1, backlog=2, inflight=1, retry_waiting=1, dead=1),
        )
        assert snap.conserved

    def test_requeued_dead_letters_count_as_accepted(self):
        snap = _snapshot(
            enqueued=5, dead_requeued=2, succeeded=5, dead_lettered=2, gauges=Gauges(backlog=0)
        )
        assert snap.conserved
        assert not _snapshot(enqueued=5, succeeded=5, dead_lettered=2).conserved

    @pytest.mark.parametrize(
        "fields",
        [
            {"enqueued": 3, "succeeded": 2},  # one job lost
            {"enqueued": 3, "succeeded": 4},  # one job counted twice
            {"enqueued": 3, "succeeded": 3, "gauges": Gauges(inflight=1)},
            {"enqueued": 3, "dropped": 2, "gauges": Gauges(queue_depth=1)},  # depth is not held
        ],
    )
    def test_not_conserved(self, fields):
        assert not _snapshot(**fields).conserved

    def test_counters_that_do_not_enter_the_balance(self):
        snap = _snapshot(
            enqueued=2,
            succeeded=2,
            processed=9,
            failed=7,
            retries=7,
            deduplicated=4,
            conflicts=1,
            recovered=3,
            released=2,
            stale=1,
        )
        assert snap.conserved


# --- cumulative counts, for Prometheus histograms --------------------------------------

BOUNDS = st.lists(
    st.floats(min_value=1e-6, max_value=1000.0, allow_nan=False, allow_infinity=False),
    min_size=1,
    max_size=20,
).map(sorted)
SLACK = 1e-9  # floating-point rounding of a bucket's edge


class TestCumulativeCounts:
    @given(values=samples, bounds=BOUNDS)
    def test_within_the_bucket_granularity(self, values, bounds):
        counts = filled(values).cumulative_counts(bounds)
        assert len(counts) == len(bounds)
        for bound, count in zip(bounds, counts, strict=True):
            # never a value above the bound; every value 2 % or more below it
            assert count <= sum(v <= bound * (1 + SLACK) for v in values)
            assert count >= sum(v <= bound / 1.02 * (1 - SLACK) for v in values)

    @given(values=samples, bounds=BOUNDS)
    def test_never_decrease_and_never_exceed_the_count(self, values, bounds):
        counts = filled(values).cumulative_counts(bounds)
        assert counts == sorted(counts)
        assert all(0 <= count <= len(values) for count in counts)

    @given(values=samples)
    def test_a_bound_above_every_value_counts_them_all(self, values):
        histogram = filled(values)
        assert histogram.cumulative_counts([max(values) * 1.03]) == [len(values)]

    def test_exact_at_bucket_edges(self):
        edge = 1e-6 * 1.02**400  # ~ 2.75 ms: an edge of the log buckets
        histogram = filled([0.001, 0.0015, 0.002, edge * 0.999, edge * 1.001, 0.5, 700.0])
        assert histogram.cumulative_counts([edge, 1.0, 600.0]) == [4, 6, 6]

    def test_empty(self):
        assert Histogram().cumulative_counts([0.001, 1.0]) == [0, 0]
        assert Histogram().count == 0
        assert Histogram().total == 0.0

    def test_values_up_to_a_microsecond_count_at_a_microsecond(self):
        assert filled([0.0, -1.0, 1e-6]).cumulative_counts([1e-6, 1e-3]) == [3, 3]

    @given(values=samples)
    def test_count_and_total(self, values):
        histogram = filled(values)
        assert histogram.count == len(values)
        assert histogram.total == pytest.approx(math.fsum(values), rel=1e-9)

    def test_total_counts_negative_values_as_zero(self):
        assert filled([-5.0, 2.0]).total == 2.0
