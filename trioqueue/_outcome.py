"""What to do with a job after an attempt: a pure decision, no I/O."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from ._exceptions import Drop, Retry
from ._records import ErrorInfo

if TYPE_CHECKING:
    import random

    from ._retry import RetryPolicy

__all__ = ["Ack", "Cancel", "DeadLetter", "Discard", "Outcome", "RetryAfter", "decide"]


@attrs.frozen
class Ack:
    """The handler returned: complete the job, with what it returned."""

    result: bytes | None = None  # its return value as JSON; None when it returned None
    result_error: str | None = None  # why the return value could not be stored


@attrs.frozen
class RetryAfter:
    """Try again after *delay* seconds."""

    delay: float
    error: ErrorInfo | None  # None when the handler raised Retry


@attrs.frozen
class DeadLetter:
    """No attempts left: keep the job as a dead letter."""

    reason: str
    error: ErrorInfo | None


@attrs.frozen
class Discard:
    """The handler raised `Drop`: finish the job as dropped."""

    reason: str


@attrs.frozen
class Cancel:
    """The job was cancelled (`Queue.cancel`) while the pool held it: end it so."""


Outcome = Ack | RetryAfter | DeadLetter | Discard | Cancel


def _signal_in_group(error: Exception) -> Exception:
    """A `Drop` or `Retry` that a handler's nursery wrapped, if the group holds only that."""
    if not isinstance(error, ExceptionGroup):
        return error
    for signal in (Drop, Retry):
        matched, rest = error.split(signal)
        if matched is not None and rest is None:
            leaf: Exception = matched
            while isinstance(leaf, ExceptionGroup):
                leaf = leaf.exceptions[0]
            return leaf
    return error


def decide(
    error: Exception | None, attempt: int, policy: RetryPolicy, rng: random.Random
) -> Outcome:
    """Decide the outcome of attempt number *attempt* (from 1) that ended with *error*."""
    if error is None:
        return Ack()
    error = _signal_in_group(error)
    if isinstance(error, Drop):
        return Discard(reason=error.reason or "dropped by the handler")
    info = None if isinstance(error, Retry) else ErrorInfo.from_exception(error)
    if not policy.attempts_left(attempt):
        if info is None:
            reason = f"the handler raised Retry after attempt {attempt} of {policy.max_attempts}"
        else:
            reason = f"failed {attempt} of {policy.max_attempts} attempts"
        return DeadLetter(reason=reason, error=info)
    if isinstance(error, Retry):
        return RetryAfter(delay=error.delay or 0.0, error=None)
    return RetryAfter(delay=policy.backoff(attempt, rng), error=info)
