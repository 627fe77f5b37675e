"""decide(): what happens to a job after one attempt."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

import trioqueue
from trioqueue._outcome import Ack, DeadLetter, Discard, RetryAfter, decide
from trioqueue._records import ErrorInfo
from trioqueue._retry import RetryPolicy

POLICY = RetryPolicy(max_attempts=3, base_delay=1.0, max_delay=10.0)


def rng() -> random.Random:
    return random.Random(2024)


class _NoRandom(random.Random):
    """Fails the test if decide() draws a random number."""

    def uniform(self, a: float, b: float) -> float:
        raise AssertionError("decide() should not draw a delay here")


class TestSuccessAndDrop:
    @pytest.mark.parametrize("attempt", [1, 2, 3, 4])
    def test_none_is_ack(self, attempt):
        assert decide(None, attempt, POLICY, _NoRandom()) == Ack()

    def test_drop_with_reason_is_discard(self):
        outcome = decide(trioqueue.Drop("spam"), 1, POLICY, _NoRandom())
        assert outcome == Discard(reason="spam")

    def test_drop_without_reason_has_default_reason(self):
        outcome = decide(trioqueue.Drop(), 1, POLICY, _NoRandom())
        assert outcome == Discard(reason="dropped by the handler")

    def test_drop_wins_even_when_attempts_are_exhausted(self):
        outcome = decide(trioqueue.Drop("late"), 3, POLICY, _NoRandom())
        assert outcome == Discard(reason="late")

    def test_a_drop_alone_in_an_exception_group_is_a_drop(self):
        # a handler whose nursery raised Drop: the group holds only the signal
        outcome = decide(ExceptionGroup("g", [trioqueue.Drop("spam")]), 1, POLICY, _NoRandom())
        assert outcome == Discard(reason="spam")

    def test_a_group_of_a_drop_and_an_error_is_a_failure(self):
        group = ExceptionGroup("g", [trioqueue.Drop("x"), ValueError("v")])
        outcome = decide(group, 1, POLICY, rng())
        assert isinstance(outcome, RetryAfter)
        assert outcome.error is not None
        assert outcome.error.type == "ExceptionGroup"


class TestRetrySignal:
    @pytest.mark.parametrize("attempt", [1, 2])
    def test_retry_without_delay_requeues_at_once(self, attempt):
        outcome = decide(trioqueue.Retry(), attempt, POLICY, _NoRandom())
        assert outcome == RetryAfter(delay=0, error=None)
        assert isinstance(outcome.delay, float)

    @pytest.mark.parametrize("delay", [2, 2.5, 0, 0.0, 3600])
    def test_retry_with_delay_uses_it(self, delay):
        outcome = decide(trioqueue.Retry(delay=delay), 1, POLICY, _NoRandom())
        assert outcome == RetryAfter(delay=delay, error=None)

    def test_retry_delay_is_not_capped_by_policy(self):
        outcome = decide(trioqueue.Retry(delay=100), 1, POLICY, _NoRandom())
        assert outcome == RetryAfter(delay=100, error=None)

    @pytest.mark.parametrize("attempt", [3, 4, 10])
    def test_retry_when_exhausted_dead_letters_without_error(self, attempt):
        outcome = decide(trioqueue.Retry(delay=2), attempt, POLICY, _NoRandom())
        assert isinstance(outcome, DeadLetter)
        assert outcome.error is None
        assert "Retry" in outcome.reason
        assert f"attempt {attempt} of 3" in outcome.reason

    def test_single_attempt_policy_never_retries(self):
        policy = RetryPolicy(max_attempts=1)
        assert isinstance(decide(trioqueue.Retry(), 1, policy, _NoRandom()), DeadLetter)
        assert isinstance(decide(ValueError("x"), 1, policy, _NoRandom()), DeadLetter)

    @pytest.mark.parametrize("delay", [-1, 1e308, 101 * 365.25 * 86_400])
    def test_a_retry_delay_below_zero_or_beyond_100_years_is_refused(self, delay):
        with pytest.raises(trioqueue.ConfigurationError, match="from 0 to 100 years"):
            trioqueue.Retry(delay=delay)


class TestFailure:
    @pytest.mark.parametrize("attempt", [1, 2])
    def test_error_with_attempts_left_backs_off(self, attempt):
        outcome = decide(ValueError("bad input"), attempt, POLICY, rng())
        assert isinstance(outcome, RetryAfter)
        assert 0.0 <= outcome.delay <= POLICY.backoff_bound(attempt)
        assert outcome.delay == POLICY.backoff(attempt, rng())
        assert outcome.error == ErrorInfo(type="ValueError", message="bad input")

    @given(
        max_attempts=st.integers(2, 50),
        data=st.data(),
        seed=st.integers(0, 2**32),
        base=st.floats(0.0, 5.0),
    )
    def test_error_backoff_property(self, max_attempts, data, seed, base):
        policy = RetryPolicy(max_attempts=max_attempts, base_delay=base, max_delay=base * 4)
        attempt = data.draw(st.integers(1, max_attempts - 1))
        outcome = decide(KeyError("k"), attempt, policy, random.Random(seed))
        assert isinstance(outcome, RetryAfter)
        assert 0.0 <= outcome.delay <= min(base * 4, base * 2 ** (attempt - 1))
        assert outcome.error == ErrorInfo(type="KeyError", message="'k'")

    def test_same_rng_state_gives_same_delay(self):
        first = decide(ValueError("v"), 2, POLICY, random.Random(5))
        second = decide(ValueError("v"), 2, POLICY, random.Random(5))
        assert first == second

    @pytest.mark.parametrize("attempt", [3, 4])
    def test_exhausted_dead_letters_and_keeps_error(self, attempt):
        outcome = decide(ValueError("still bad"), attempt, POLICY, _NoRandom())
        assert isinstance(outcome, DeadLetter)
        assert outcome.error == ErrorInfo(type="ValueError", message="still bad")
        assert "attempts" in outcome.reason
        assert f"{attempt} of 3" in outcome.reason

    def test_user_exception_type_is_qualified(self):
        class CustomError(Exception):
            pass

        outcome = decide(CustomError("oops"), 1, POLICY, rng())
        assert isinstance(outcome, RetryAfter)
        assert outcome.error is not None
        assert outcome.error.type.endswith("CustomError")
        assert outcome.error.type != "CustomError"
        assert outcome.error.message == "oops"

    def test_trioqueue_error_is_an_ordinary_failure(self):
        outcome = decide(trioqueue.ConfigurationError("c"), 3, POLICY, _NoRandom())
        assert isinstance(outcome, DeadLetter)
        assert outcome.error == ErrorInfo("trioqueue.ConfigurationError", "c")
