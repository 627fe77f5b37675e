"""The memory backend's rate limits in one place (`RateGate`)."""

from __future__ import annotations

import math

from trioqueue import RateLimit, RateLimits
from trioqueue._backends.memory._rate_gate import RateGate


def test_without_limits_every_ready_job_may_start_and_none_waits():
    gate = RateGate()
    assert gate.room(0.0, ready=7) == 7
    assert gate.next_start(0.0) == math.inf
    assert gate.turn("a", "k", 0.0) is None
    assert not gate.limits_queue


def test_the_queue_limit_spreads_starts_and_a_new_limit_starts_afresh():
    gate = RateGate()
    gate.set(RateLimits(queue=RateLimit(2, per=1.0)))  # one start every 0.5 s
    assert gate.limits_queue
    assert gate.room(0.0, ready=5) == 1
    gate.started(0.0, 1)
    assert gate.room(0.1, ready=5) == 0
    assert gate.next_start(0.1) == 0.5
    assert gate.room(0.5, ready=5) == 1
    gate.set(RateLimits(queue=RateLimit(10, per=1.0)))  # changed: the old times go
    assert gate.room(0.1, ready=5) == 1
    gate.set(gate.limits)  # the same limits again: the times stay
    assert gate.room(0.1, ready=5) == 1


def test_a_key_promises_later_starts_in_order_and_one_that_leaves_moves_the_rest_up():
    gate = RateGate()
    gate.set(RateLimits(per_key=RateLimit(1, per=1.0)))
    assert gate.turn("a", "k", 0.0) is None  # starts now
    assert gate.turn("b", "k", 0.0) == 1.0  # promised the next start
    assert gate.turn("c", "k", 0.0) == 2.0  # and the one after
    assert gate.turn("x", "other", 0.0) is None  # another key is not held back
    gate.leave("b", "k")
    assert gate.turn("c", "k", 0.0) == 1.0  # b's start is c's now
    gate.set(RateLimits())  # no per-key limit: nothing waits
    assert gate.turn("d", "k", 0.0) is None
