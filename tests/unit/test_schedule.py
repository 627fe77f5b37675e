"""Schedule: its ticks (cron in a zone, intervals), its jobs' ids, and bad input."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trioqueue import ConfigurationError, MissedTicks, Schedule


def at(text: str) -> float:
    return datetime.datetime.fromisoformat(text).timestamp()


def iso(tick: float) -> str:
    return datetime.datetime.fromtimestamp(tick, datetime.UTC).isoformat()


class TestCron:
    def test_a_daily_time_in_a_zone_follows_its_summer_time(self):
        """09:00 in Riga is 07:00 UTC in winter and 06:00 UTC from 29 March 2026."""
        daily = Schedule("morning", cron="0 9 * * *", timezone="Europe/Riga")
        tick, ticks = at("2026-03-27T00:00:00+00:00"), []
        for _ in range(3):
            tick = daily.next_tick(tick)
            ticks.append(iso(tick))
        assert ticks == [
            "2026-03-27T07:00:00+00:00",
            "2026-03-28T07:00:00+00:00",
            "2026-03-29T06:00:00+00:00",
        ]

    def test_a_time_the_clocks_skip_runs_at_the_next_valid_moment_and_a_repeated_one_once(self):
        skipped = Schedule("s", cron="30 2 * * *", timezone="America/New_York")
        # 2026-03-08 02:30 does not exist in New York: 03:00 EDT (07:00 UTC) instead
        assert iso(skipped.next_tick(at("2026-03-08T00:00:00-05:00"))) == (
            "2026-03-08T07:00:00+00:00"
        )
        repeated = Schedule("r", cron="30 1 * * *", timezone="America/New_York")
        first = repeated.next_tick(at("2026-11-01T00:00:00-04:00"))
        assert iso(first) == "2026-11-01T05:30:00+00:00"  # 01:30 EDT, the first of two
        assert iso(repeated.next_tick(first)) == "2026-11-02T06:30:00+00:00"  # next day

    def test_ticks_between_are_the_latest_ones_oldest_first(self):
        hourly = Schedule("h", cron="0 * * * *")
        start = at("2026-12-03T00:00:00+00:00")
        found = hourly.ticks_between(start, start + 5 * 3600, limit=3)
        assert [iso(t) for t in found] == [
            "2026-12-03T03:00:00+00:00",
            "2026-12-03T04:00:00+00:00",
            "2026-12-03T05:00:00+00:00",
        ]
        assert hourly.ticks_between(start, start + 3599, limit=10) == []  # (after, upto]

    def test_the_description_names_the_expression_and_zone(self):
        assert Schedule("m", cron="0 9 * * 1-5", timezone="Europe/Riga").description == (
            "cron '0 9 * * 1-5' (Europe/Riga)"
        )


class TestEvery:
    @given(
        seconds=st.integers(1, 7 * 86_400),
        after=st.floats(1.0e9, 3.0e9, allow_nan=False),
    )
    def test_ticks_fall_on_multiples_of_the_interval_strictly_after(self, seconds, after):
        schedule = Schedule("e", every=datetime.timedelta(seconds=seconds))
        tick = schedule.next_tick(after)
        assert tick % seconds == 0
        assert after < tick <= after + seconds

    @given(
        seconds=st.integers(1, 3600),
        after=st.integers(10**9, 2 * 10**9),
        span=st.integers(0, 100_000),
        limit=st.integers(1, 50),
    )
    def test_ticks_between_agree_with_walking_forward(self, seconds, after, span, limit):
        schedule = Schedule("e", every=datetime.timedelta(seconds=seconds))
        walked, tick = [], float(after)
        while (tick := schedule.next_tick(tick)) <= after + span:
            walked.append(tick)
        assert schedule.ticks_between(after, after + span, limit) == walked[-limit:]

    def test_jobs_are_named_by_schedule_and_tick(self):
        schedule = Schedule("sync", every=datetime.timedelta(minutes=5))
        tick = at("2026-12-03T10:05:00+00:00")
        assert schedule.job_id(tick) == "sync@2026-12-03T10:05:00Z"
        assert schedule.job_payload(tick) == {"schedule": "sync", "tick": "2026-12-03T10:05:00Z"}
        given_payload = Schedule("sync", every=datetime.timedelta(minutes=5), payload={"a": 1})
        assert given_payload.job_payload(tick) == {"a": 1}
        assert schedule.description == "every 300 s"


def _deep(levels: int) -> list[object]:
    """A list nested *levels* deep."""
    value: list[object] = []
    for _ in range(levels - 1):
        value = [value]
    return value


class TestBadInput:
    @pytest.mark.parametrize(
        ("options", "words"),
        [
            ({}, "one of them"),
            ({"cron": "* * * * *", "every": datetime.timedelta(minutes=1)}, "one of them"),
            ({"cron": "61 * * * *"}, "not a cron expression"),
            ({"cron": 5}, "takes a string"),
            ({"every": 60}, "takes a datetime.timedelta"),
            ({"every": datetime.timedelta(seconds=1.5)}, "whole number of seconds"),
            ({"every": datetime.timedelta(0)}, "at least one"),
            ({"cron": "* * * * *", "timezone": "Mars/Olympus"}, "not a time zone"),
            ({"cron": "* * * * *", "catch_up": 0}, "catch_up=0"),
            ({"cron": "* * * * *", "missed": "sometimes"}, "sometimes"),
            ({"every": datetime.timedelta(1), "payload": {1, 2}}, "its payload must be JSON"),
            ({"every": datetime.timedelta(1), "payload": _deep(101)}, "nests"),
        ],
    )
    def test_is_refused_with_the_fix(self, options, words):
        with pytest.raises((ConfigurationError, ValueError), match=words):
            Schedule("s", **options)

    @pytest.mark.parametrize("name", ["", " padded", "a@b", "x" * 300])
    def test_a_bad_name_is_refused(self, name):
        with pytest.raises(ConfigurationError, match="Schedule\\(name="):
            Schedule(name, cron="* * * * *")

    def test_the_policy_may_be_given_by_its_value(self):
        assert Schedule("s", cron="* * * * *", missed="all").missed is MissedTicks.ALL
