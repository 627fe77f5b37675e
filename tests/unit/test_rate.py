"""The rate-limit arithmetic both backends share (GCRA), and how a limit is written."""

from __future__ import annotations

import heapq
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trioqueue import RateLimit, RateLimits
from trioqueue._rate import KeyLine, charge, parse_rate, room

limits = st.builds(
    RateLimit,
    starts=st.integers(1, 20),
    per=st.sampled_from([0.1, 0.5, 1.0, 2.5, 60.0]),
    burst=st.integers(1, 20),
)


def most_in_a_window(starts: list[float], limit: RateLimit) -> int:
    """The most of *starts* that any half-open window of ``limit.per`` seconds holds.

    The arithmetic forgives float error (`RateLimit.slack`, microseconds): a start
    may come that much early, so the window is that much (and a little) shorter.
    """
    starts = sorted(starts)
    window = limit.per - limit.slack - 1e-6
    most = 0
    for i, first in enumerate(starts):
        inside = [t for t in starts[i:] if t < first + window]
        most = max(most, len(inside))
    return most


# Trio's clock starts near 0; Redis's is seconds since the epoch, where floats are
# about 2.4e-7 apart: the arithmetic must hold at both
bases = st.sampled_from([0.0, 1.7e9])


@settings(max_examples=300, deadline=None)
@given(
    limit=limits,
    base=bases,
    asks=st.lists(st.tuples(st.floats(0, 3), st.integers(1, 30)), min_size=1, max_size=40),
)
def test_the_queue_limit_never_lets_more_through_than_it_says(limit, base, asks):
    # claims come at random times, each asking for up to n jobs
    tat, now, started = -float("inf"), base, []
    for gap, wanted in asks:
        now += gap * limit.interval
        taken = min(wanted, room(tat, now, limit))
        started += [now] * taken
        if taken:
            tat = charge(tat, now, limit, taken)
    assert most_in_a_window(started, limit) <= limit.most_in_any_window


@settings(max_examples=300, deadline=None)
@given(
    limit=limits,
    base=bases,
    arrivals=st.lists(st.floats(0, 2), min_size=1, max_size=40),
    lateness=st.lists(st.floats(0, 3), min_size=1, max_size=40),
)
def test_a_keys_line_keeps_its_limit_and_its_order_however_late_jobs_wake(
    limit, base, arrivals, lateness
):
    # jobs of one key arrive at random; one over the limit waits in the key's line
    # for the turn it is given, and wakes to it late by a random amount (a busy
    # queue, a slow claim); one that wakes before its turn looks again
    events: list[tuple[float, int]] = []
    now = base
    for n, gap in enumerate(arrivals):
        now += gap * limit.interval
        heapq.heappush(events, (now, n))
    line, started, order, tries = KeyLine(), [], [], 0
    while events:
        at, n = heapq.heappop(events)
        wait_until = line.turn(str(n), at, limit)
        tries += 1
        if wait_until is None:
            started.append(at)
            order.append(n)
        else:
            assert wait_until > at
            late = lateness[tries % len(lateness)] * limit.interval
            heapq.heappush(events, (wait_until + late, n))
        assert tries < 100 * len(arrivals), "a job never got its turn"
    assert len(started) == len(arrivals)
    assert most_in_a_window(started, limit) <= limit.most_in_any_window
    assert not line.waiting
    if limit.burst == 1:
        # a job that woke late to its turn kept its place: the key's jobs started in
        # the order they came to the key's limit (under a burst a job may start
        # beside those ahead of it, while the limit has room for them all)
        came = sorted(range(len(arrivals)), key=lambda n: (sum(arrivals[: n + 1]), n))
        assert order == came


@settings(max_examples=300, deadline=None)
@given(limit=limits, base=bases, offset=st.floats(0, 1000))
def test_a_burst_is_whole_and_a_wait_is_never_now_at_any_clock(limit, base, offset):
    now = base + offset
    # a quiet limit lets its whole burst start at once, one claim at a time
    tat = -float("inf")
    for _ in range(limit.burst):
        assert room(tat, now, limit) >= 1
        tat = charge(tat, now, limit)
    assert room(tat, now, limit) == 0
    # and the next start it gives is later than now, when it is allowed
    line = KeyLine(started=tat)
    due = line.turn("next", now, limit)
    assert due is not None
    assert due > now
    assert line.turn("next", due, limit) is None


def test_a_flood_of_one_key_is_spread_out_once():
    # 100 jobs at once, 10 per second, no burst: each is given its own turn, the
    # first at once, then one every 0.1 s; on time, none is turned away twice
    limit, line, dues = RateLimit(10), KeyLine(), []
    for n in range(100):
        due = line.turn(str(n), 0.0, limit)
        dues.append(0.0 if due is None else due)
    assert dues == pytest.approx([n / 10 for n in range(100)])
    assert len(line.waiting) == 99
    for n, due in enumerate(dues[1:], start=1):
        assert line.turn(str(n), due, limit) is None
    assert not line.waiting


def test_a_newcomer_waits_behind_the_line_and_a_cancelled_one_gives_its_turn():
    limit, line = RateLimit(1, per=60.0), KeyLine()
    assert line.turn("first", 0.0, limit) is None  # starts
    second = line.turn("second", 0.0, limit)
    third = line.turn("third", 0.0, limit)
    assert (second, third) == (60.0, 120.0)
    line.leave("third")  # cancelled
    fourth = line.turn("fourth", 1.0, limit)
    assert fourth == 120.0  # the third's turn, not a fourth minute
    # the second wakes late: it takes the next start, and the fourth, on time for
    # the turn it was given, waits behind it for the start after
    assert line.turn("fourth", 120.0, limit) == 120.0 + 60.0
    assert line.turn("second", 130.0, limit) is None
    assert line.turn("fourth", 180.0, limit) == 190.0
    assert line.turn("fourth", 190.0, limit) is None
    assert not line.waiting


def test_a_burst_lets_that_many_start_at_once():
    assert room(-float("inf"), 5.0, RateLimit(10, burst=4)) == 4
    assert room(-float("inf"), 5.0, RateLimit(10)) == 1
    assert room(charge(-float("inf"), 5.0, RateLimit(10), 1), 5.0, RateLimit(10)) == 0
    assert KeyLine(2.0).forgettable(2.0)
    assert not KeyLine(2.0).forgettable(1.5)
    assert not KeyLine(2.0, {"waiting": 1}).forgettable(5.0)


@pytest.mark.parametrize(
    ("text", "limit"),
    [
        ("10/s", RateLimit(10, 1.0)),
        ("10/1s", RateLimit(10, 1.0)),
        ("100/1m", RateLimit(100, 60.0)),
        ("5/2.5s", RateLimit(5, 2.5)),
        ("5/2.5", RateLimit(5, 2.5)),
        ("3/h", RateLimit(3, 3600.0)),
        ("10/s burst 5", RateLimit(10, 1.0, 5)),
    ],
)
def test_a_limit_is_written_as_starts_per_window(text, limit):
    assert parse_rate(text) == limit
    assert parse_rate(limit.describe()) == limit
    assert RateLimit.from_stored(limit.stored()) == limit


@pytest.mark.parametrize(
    "text",
    [
        "", "10", "ten/s", "10/", "10/xs", "0/s", "10/0s", "10/s 5", "10/s burst 0", "-1/s",
        "10/s burst ²", "²/s", "1/1e20s", "1/infs", "2000000000/s",
    ],
)  # fmt: skip
def test_a_limit_written_wrongly_is_refused_with_the_form(text):
    with pytest.raises(ValueError, match="STARTS/PER"):
        parse_rate(text)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"starts": 0},
        {"starts": 1.5},
        {"starts": True},
        {"starts": 1, "per": 0},
        {"starts": 1, "per": float("nan")},
        {"starts": 1, "burst": 0},
    ],
)
def test_a_bad_limit_says_what_to_give(kwargs):
    with pytest.raises(ValueError, match="give"):
        RateLimit(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "said"),
    [
        ({"starts": 1, "per": 1e20}, r"at most 31,622,400 \(366 days\)"),
        ({"starts": 1, "per": 366 * 86_400 + 1}, "at most 31,622,400"),
        ({"starts": 10**400}, "from 1 to 1,000,000,000"),
        ({"starts": 1, "burst": 10**10}, "from 1 to 1,000,000,000"),
    ],
)
def test_a_limit_the_backends_cannot_hold_is_refused_with_the_range(kwargs, said):
    with pytest.raises(ValueError, match=said):
        RateLimit(**kwargs)


def test_the_largest_limits_are_taken_and_their_arithmetic_is_finite():
    widest = RateLimit(1, per=366 * 86_400.0)
    busiest = RateLimit(1_000_000_000, per=1e-3, burst=1_000_000_000)
    for limit in (widest, busiest, RateLimit(1_000_000_000, 366 * 86_400.0, 1_000_000_000)):
        assert math.isfinite(limit.interval)
        assert math.isfinite(limit.tolerance)
        assert RateLimit.from_stored(limit.stored()) == limit
    assert parse_rate("1/8784h") == widest


def test_limits_describe_themselves():
    assert RateLimits().describe() == "none"
    assert RateLimits(RateLimit(10), RateLimit(2, 60.0, 2)).describe() == (
        "queue 10/1s, per key 2/60s burst 2"
    )
    assert RateLimit.from_stored(b"bad") is None
    assert RateLimit(4, 2.0, 3).most_in_any_window == 6
