"""RetryPolicy: validation, the capped exponential bound, full jitter, determinism."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import trioqueue
from trioqueue._retry import RetryPolicy

delays = st.floats(min_value=0.0, max_value=1e6, allow_nan=False, allow_infinity=False)
attempt_numbers = st.integers(min_value=1, max_value=2000)
seeds = st.integers(min_value=0, max_value=2**64)


def exact_bound(policy: RetryPolicy, attempts: int) -> float:
    """min(max_delay, base_delay * 2 ** (attempts - 1)), in exact arithmetic (no overflow)."""
    uncapped = Fraction(policy.base_delay) * 2 ** (attempts - 1)
    return float(min(Fraction(policy.max_delay), uncapped))


@st.composite
def policies(draw: st.DrawFn) -> RetryPolicy:
    base = draw(delays)
    cap = draw(st.floats(min_value=base, max_value=1e7, allow_nan=False, allow_infinity=False))
    return RetryPolicy(max_attempts=draw(st.integers(1, 10_000)), base_delay=base, max_delay=cap)


class _EdgeRandom(random.Random):
    """A Random whose uniform() returns one end of the interval it is given."""

    def __init__(self, upper: bool) -> None:
        super().__init__(0)
        self.upper = upper
        self.calls: list[tuple[float, float]] = []

    def uniform(self, a: float, b: float) -> float:
        self.calls.append((a, b))
        return b if self.upper else a


class TestValidation:
    def test_defaults(self):
        policy = RetryPolicy()
        assert (policy.max_attempts, policy.base_delay, policy.max_delay) == (8, 1.0, 600.0)

    def test_the_defaults_outlast_a_short_outage(self):
        # every retry delay's upper bound, summed: the longest a failing job lives
        policy = RetryPolicy()
        bounds = [policy.backoff_bound(n) for n in range(1, policy.max_attempts)]
        assert bounds == [1, 2, 4, 8, 16, 32, 64]
        assert sum(bounds) == 127

    @pytest.mark.parametrize("value", [0, -1, -100])
    def test_max_attempts_below_one(self, value):
        with pytest.raises(trioqueue.ConfigurationError, match=r"max_attempts="):
            RetryPolicy(max_attempts=value)

    @pytest.mark.parametrize("value", [True, False])
    def test_max_attempts_bool(self, value):
        with pytest.raises(trioqueue.ConfigurationError, match=r"max_attempts="):
            RetryPolicy(max_attempts=value)

    @pytest.mark.parametrize("value", [1.5, 2.0, "3", None])
    def test_max_attempts_not_an_int(self, value):
        with pytest.raises(trioqueue.ConfigurationError, match=r"max_attempts="):
            RetryPolicy(max_attempts=value)

    @pytest.mark.parametrize("field", ["base_delay", "max_delay"])
    @pytest.mark.parametrize(
        "value", [-0.001, -1, math.nan, math.inf, -math.inf, "1", None, 1e308, 3.2e9]
    )
    def test_bad_delay(self, field, value):
        with pytest.raises(trioqueue.ConfigurationError, match=rf"RetryPolicy\({field}="):
            RetryPolicy(**{field: value})

    def test_max_delay_below_base_delay(self):
        with pytest.raises(trioqueue.ConfigurationError, match=r"max_delay=1\.0.*base_delay=2\.0"):
            RetryPolicy(base_delay=2.0, max_delay=1.0)

    def test_configuration_error_is_a_value_error(self):
        with pytest.raises(ValueError, match="max_attempts"):
            RetryPolicy(max_attempts=0)

    @pytest.mark.parametrize(
        ("attempts", "base", "cap"), [(1, 0.0, 0.0), (1, 0, 0), (3, 2.0, 2.0), (10_000, 0.5, 60)]
    )
    def test_edge_values_accepted(self, attempts, base, cap):
        policy = RetryPolicy(max_attempts=attempts, base_delay=base, max_delay=cap)
        assert (policy.max_attempts, policy.base_delay, policy.max_delay) == (attempts, base, cap)

    def test_frozen(self):
        policy = RetryPolicy()
        with pytest.raises(AttributeError):
            policy.max_attempts = 9  # type: ignore[misc]


class TestBackoff:
    @given(policy=policies(), attempts=attempt_numbers, seed=seeds)
    def test_backoff_within_bound(self, policy, attempts, seed):
        delay = policy.backoff(attempts, random.Random(seed))
        assert 0.0 <= delay <= exact_bound(policy, attempts)

    @given(policy=policies(), attempts=attempt_numbers)
    def test_bound_matches_formula(self, policy, attempts):
        assert policy.backoff_bound(attempts) == exact_bound(policy, attempts)

    @pytest.mark.parametrize("attempts", [1023, 1024, 1025, 1026, 1100, 2000, 10**6])
    def test_huge_attempt_numbers_do_not_overflow(self, attempts):
        policy = RetryPolicy(base_delay=0.1, max_delay=30.0)
        assert policy.backoff_bound(attempts) == 30.0
        assert 0.0 <= policy.backoff(attempts, random.Random(1)) <= 30.0

    @pytest.mark.parametrize("attempts", [1, 2, 1024, 1025, 2000])
    def test_zero_base_delay_means_no_delay(self, attempts):
        # min(max_delay, 0 * 2 ** (n - 1)) is 0 for every n
        policy = RetryPolicy(max_attempts=5000, base_delay=0.0, max_delay=30.0)
        assert policy.backoff_bound(attempts) == 0.0
        assert policy.backoff(attempts, random.Random(7)) == 0.0

    def test_tiny_base_delay_is_not_capped_early(self):
        # 1e-310 * 2 ** 1024 is about 0.018 s, well under the 30 s cap
        policy = RetryPolicy(max_attempts=5000, base_delay=1e-310, max_delay=30.0)
        assert policy.backoff_bound(1025) == pytest.approx(0.018, rel=0.01)
        assert policy.backoff_bound(1025) == 2 * policy.backoff_bound(1024)

    def test_bound_doubles_then_caps(self):
        policy = RetryPolicy(base_delay=1.0, max_delay=10.0)
        bounds = [policy.backoff_bound(n) for n in range(1, 8)]
        assert bounds == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0]

    @given(policy=policies(), attempts=st.integers(1, 1000))
    def test_bound_doubles_until_the_cap(self, policy, attempts):
        this, after = policy.backoff_bound(attempts), policy.backoff_bound(attempts + 1)
        assert after == min(policy.max_delay, 2 * this)
        assert after >= this

    def test_full_jitter_spans_zero_to_bound(self):
        policy = RetryPolicy(base_delay=0.5, max_delay=3.0)
        high, low = _EdgeRandom(upper=True), _EdgeRandom(upper=False)
        assert [policy.backoff(n, high) for n in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 3.0]
        assert [policy.backoff(n, low) for n in (1, 2, 3, 4)] == [0.0, 0.0, 0.0, 0.0]
        assert high.calls == [(0.0, 0.5), (0.0, 1.0), (0.0, 2.0), (0.0, 3.0)]

    def test_delays_are_spread_over_the_range(self):
        policy = RetryPolicy(base_delay=1.0, max_delay=1.0)
        rng = random.Random(12345)
        draws = [policy.backoff(5, rng) for _ in range(2000)]
        assert min(draws) < 0.05
        assert max(draws) > 0.95
        assert 0.4 < sum(draws) / len(draws) < 0.6

    @given(policy=policies(), seed=seeds)
    def test_same_seed_same_sequence(self, policy, seed):
        first, second = random.Random(seed), random.Random(seed)
        one = [policy.backoff(n, first) for n in range(1, 30)]
        two = [policy.backoff(n, second) for n in range(1, 30)]
        assert one == two

    @given(seed=seeds, other=seeds)
    def test_different_seeds_differ(self, seed, other):
        assume(seed != other)
        policy = RetryPolicy(base_delay=1.0, max_delay=60.0)
        first, second = random.Random(seed), random.Random(other)
        one = [policy.backoff(n, first) for n in range(1, 30)]
        two = [policy.backoff(n, second) for n in range(1, 30)]
        assert one != two


class TestAttemptsLeft:
    def test_examples(self):
        policy = RetryPolicy(max_attempts=3)
        assert [policy.attempts_left(n) for n in range(6)] == [
            True,
            True,
            True,
            False,
            False,
            False,
        ]

    def test_single_attempt_means_no_retries(self):
        policy = RetryPolicy(max_attempts=1)
        assert policy.attempts_left(0)
        assert not policy.attempts_left(1)

    @given(max_attempts=st.integers(1, 10_000), attempts=st.integers(0, 20_000))
    def test_property(self, max_attempts, attempts):
        policy = RetryPolicy(max_attempts=max_attempts)
        assert policy.attempts_left(attempts) is (attempts < max_attempts)
