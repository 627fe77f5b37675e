"""Job records: the state machine, error descriptions and retention limits."""

from __future__ import annotations

import itertools
import json
import math

import pytest

import trioqueue
from trioqueue._records import (
    MAX_ERROR_TEXT,
    MAX_TRACEBACK_TEXT,
    TERMINAL_STATES,
    TRANSITIONS,
    ErrorInfo,
    JobState,
    Retention,
    check_transition,
)

S = JobState

# Written out by hand, independently of TRANSITIONS: a change to the table must fail here.
EXPECTED_LEGAL = {
    (S.RECEIVED, S.PROCESSING),
    (S.PROCESSING, S.COMPLETED),
    (S.PROCESSING, S.FAILED_RETRY),
    (S.PROCESSING, S.FAILED),
    (S.PROCESSING, S.DROPPED),
    (S.PROCESSING, S.RECEIVED),
    (S.FAILED_RETRY, S.PROCESSING),
    (S.FAILED, S.RECEIVED),
    (S.SCHEDULED, S.RECEIVED),
    # rate_key=: over its key's rate limit when claimed, it waits for its turn
    (S.RECEIVED, S.SCHEDULED),
    # after=: its parents completed, or one of them did not
    (S.DEFERRED, S.RECEIVED),
    (S.DEFERRED, S.FAILED),
    # Queue.cancel: a waiting job at once, a held one through its pool
    (S.RECEIVED, S.CANCELLED),
    (S.SCHEDULED, S.CANCELLED),
    (S.PROCESSING, S.CANCELLED),
    (S.FAILED_RETRY, S.CANCELLED),
    (S.DEFERRED, S.CANCELLED),
}

ALL_PAIRS = list(itertools.product(JobState, repeat=2))


class UserError(Exception):
    """An exception class defined outside the standard library."""


class Outer:
    class NestedError(LookupError):
        pass


class TestStateMachine:
    def test_states(self):
        assert {state.value for state in JobState} == {
            "received",
            "scheduled",
            "deferred",
            "processing",
            "completed",
            "failed_retry",
            "failed",
            "dropped",
            "cancelled",
        }

    def test_every_pair_is_covered(self):
        assert len(ALL_PAIRS) == 81
        assert len(EXPECTED_LEGAL) == 17

    def test_table_has_every_state_as_a_source(self):
        assert set(TRANSITIONS) == set(JobState)

    def test_table_matches_expected(self):
        table = {(source, target) for source, targets in TRANSITIONS.items() for target in targets}
        assert table == EXPECTED_LEGAL

    @pytest.mark.parametrize(
        ("source", "target"),
        sorted(EXPECTED_LEGAL),
        ids=[f"{s.value}->{t.value}" for s, t in sorted(EXPECTED_LEGAL)],
    )
    def test_legal_pairs_pass(self, source, target):
        assert check_transition("job-1", source, target) is None

    @pytest.mark.parametrize(
        ("source", "target"),
        [pair for pair in ALL_PAIRS if pair not in EXPECTED_LEGAL],
        ids=[f"{s.value}->{t.value}" for s, t in ALL_PAIRS if (s, t) not in EXPECTED_LEGAL],
    )
    def test_illegal_pairs_raise(self, source, target):
        with pytest.raises(trioqueue.InvalidTransition) as info:
            check_transition("job-7", source, target)
        message = str(info.value)
        assert f"from {source.value} to {target.value}" in message
        assert "'job-7'" in message
        assert (info.value.job_id, info.value.source, info.value.target) == (
            "job-7",
            source.value,
            target.value,
        )
        assert isinstance(info.value, trioqueue.TrioqueueError)
        assert isinstance(info.value, RuntimeError)

    def test_walk_all_pairs(self):
        passed = set()
        for source, target in ALL_PAIRS:
            try:
                check_transition("walk", source, target)
            except trioqueue.InvalidTransition:
                continue
            passed.add((source, target))
        assert passed == EXPECTED_LEGAL

    def test_no_self_transitions(self):
        for state in JobState:
            with pytest.raises(trioqueue.InvalidTransition):
                check_transition("j", state, state)

    def test_terminal_states(self):
        assert set(TERMINAL_STATES) == {S.COMPLETED, S.DROPPED, S.FAILED, S.CANCELLED}
        # completed, dropped and cancelled are final; a dead letter may only be requeued
        assert TRANSITIONS[S.COMPLETED] == frozenset()
        assert TRANSITIONS[S.DROPPED] == frozenset()
        assert TRANSITIONS[S.CANCELLED] == frozenset()
        assert TRANSITIONS[S.FAILED] == {S.RECEIVED}

    def test_every_state_reachable_from_where_a_job_starts(self):
        # a job starts received, scheduled when enqueued with a delay, deferred with after=
        starts = [S.RECEIVED, S.SCHEDULED, S.DEFERRED]
        reached, frontier = set(starts), list(starts)
        while frontier:
            for target in TRANSITIONS[frontier.pop()]:
                if target not in reached:
                    reached.add(target)
                    frontier.append(target)
        assert reached == set(JobState)

    def test_a_scheduled_job_only_becomes_ready(self):
        # not claimable, not finishable, before it is due and received (or cancelled)
        assert TRANSITIONS[S.SCHEDULED] == {S.RECEIVED, S.CANCELLED}
        # only a job waiting for its first attempt goes back to wait for a rate limit
        assert [s for s, targets in TRANSITIONS.items() if S.SCHEDULED in targets] == [S.RECEIVED]


class TestErrorInfo:
    @pytest.mark.parametrize(
        ("exc", "kind", "message"),
        [
            (ValueError("bad value"), "ValueError", "bad value"),
            (KeyError("k"), "KeyError", "'k'"),
            (RuntimeError(), "RuntimeError", ""),
            (ZeroDivisionError("division by zero"), "ZeroDivisionError", "division by zero"),
            (TimeoutError("slow"), "TimeoutError", "slow"),
        ],
    )
    def test_builtins_have_bare_names(self, exc, kind, message):
        assert ErrorInfo.from_exception(exc) == ErrorInfo(type=kind, message=message)

    def test_the_traceback_is_kept_with_the_frames_nearest_the_error(self):
        def deep(n: int) -> None:
            if n == 0:
                raise ValueError("at the bottom")
            deep(n - 1)

        try:
            deep(3)
        except ValueError as exc:
            info = ErrorInfo.from_exception(exc)
        assert info.traceback.startswith("Traceback (most recent call last):")
        assert info.traceback.count("in deep") == 4
        assert info.traceback.endswith("ValueError: at the bottom\n")

    def test_a_long_traceback_keeps_its_end(self):
        try:
            raise ValueError("x" * (2 * MAX_TRACEBACK_TEXT))
        except ValueError as exc:
            info = ErrorInfo.from_exception(exc)
        assert info.traceback.startswith("(")
        assert "characters cut) …" in info.traceback
        assert len(info.traceback) < MAX_TRACEBACK_TEXT + 40
        assert info.traceback.endswith("xxx\n")

    def test_a_long_message_is_cut_and_says_how_much(self):
        assert ErrorInfo.from_exception(ValueError("x" * MAX_ERROR_TEXT)).message == (
            "x" * MAX_ERROR_TEXT
        )
        cut = ErrorInfo.from_exception(ValueError("x" * (MAX_ERROR_TEXT + 5))).message
        assert cut == "x" * MAX_ERROR_TEXT + "… (5 more characters)"

    def test_user_exception_is_qualified_by_module(self):
        info = ErrorInfo.from_exception(UserError("boom"))
        assert info.type == f"{__name__}.UserError"
        assert info.type.endswith("test_records.UserError")
        assert info.message == "boom"

    def test_nested_class_uses_qualname(self):
        info = ErrorInfo.from_exception(Outer.NestedError("missing"))
        assert info.type == f"{__name__}.Outer.NestedError"
        assert info.message == "missing"

    def test_stdlib_exception_outside_builtins(self):
        with pytest.raises(json.JSONDecodeError) as caught:
            json.loads("{")
        info = ErrorInfo.from_exception(caught.value)
        assert info.type == "json.decoder.JSONDecodeError"
        assert info.message.startswith("Expecting property name")

    def test_trioqueue_exception_uses_public_name(self):
        info = ErrorInfo.from_exception(trioqueue.ConfigurationError("x"))
        assert info == ErrorInfo(type="trioqueue.ConfigurationError", message="x")

    def test_main_module_is_not_prefixed(self):
        main_error = type("MainError", (Exception,), {"__module__": "__main__"})
        assert ErrorInfo.from_exception(main_error("hi")) == ErrorInfo("MainError", "hi")

    def test_is_frozen_value(self):
        info = ErrorInfo.from_exception(ValueError("v"))
        assert info == ErrorInfo("ValueError", "v")
        assert hash(info) == hash(ErrorInfo("ValueError", "v"))
        with pytest.raises(AttributeError):
            info.message = "other"  # type: ignore[misc]


class TestRetention:
    def test_defaults(self):
        retention = Retention()
        assert (retention.max_count, retention.max_age) == (10_000, None)

    @pytest.mark.parametrize(
        ("max_count", "max_age"), [(None, None), (0, 0), (0, 0.0), (1, 1.5), (None, 3600)]
    )
    def test_accepts(self, max_count, max_age):
        retention = Retention(max_count=max_count, max_age=max_age)
        assert (retention.max_count, retention.max_age) == (max_count, max_age)

    @pytest.mark.parametrize("value", [-1, -0.5, math.nan])
    def test_bad_max_count(self, value):
        with pytest.raises(trioqueue.ConfigurationError, match=r"Retention\(max_count="):
            Retention(max_count=value)

    @pytest.mark.parametrize("value", [-1, -0.001, math.nan, -math.inf])
    def test_bad_max_age(self, value):
        with pytest.raises(trioqueue.ConfigurationError, match=r"Retention\(max_age="):
            Retention(max_age=value)

    @pytest.mark.parametrize("value", [1.5, 2.0, True, False, "3"])
    def test_max_count_must_be_a_whole_number(self, value):
        with pytest.raises(
            trioqueue.ConfigurationError,
            match=r"Retention\(max_count=.*\): use a whole number >= 0, or None",
        ):
            Retention(max_count=value)

    @pytest.mark.parametrize("value", [True, "3", -1])
    def test_a_bad_max_age_asks_for_seconds(self, value):
        with pytest.raises(
            trioqueue.ConfigurationError,
            match=r"Retention\(max_age=.*\): use a number of seconds >= 0, or None",
        ):
            Retention(max_age=value)

    def test_error_is_a_value_error(self):
        with pytest.raises(ValueError, match="max_age"):
            Retention(max_age=-5)


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (4_070_908_800.0 - 1e-6, "2099-01-01T00:00:00.000Z"),  # a hair early: still midnight
        (4_070_908_800.0 + 0.0126, "2099-01-01T00:00:00.013Z"),
        (4_070_908_800.0 + 0.0124, "2099-01-01T00:00:00.012Z"),
    ],
)
def test_iso_time_rounds_to_the_nearest_millisecond(seconds, shown):
    from trioqueue._record_json import iso_time

    assert iso_time(seconds) == shown
