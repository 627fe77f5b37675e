"""The retry policy: how many attempts, and capped exponential backoff with full jitter."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import attrs

from ._exceptions import ConfigurationError
from ._util import MAX_DELAY

if TYPE_CHECKING:
    import random

__all__ = ["RetryPolicy"]


def _positive_int(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(
            f"RetryPolicy({attribute.name}={value!r}): use a whole number >= 1 (1 means no retries)"
        )


def _non_negative(instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if isinstance(value, bool) or not (
        isinstance(value, int | float) and math.isfinite(value) and 0 <= value <= MAX_DELAY
    ):
        raise ConfigurationError(
            f"RetryPolicy({attribute.name}={value!r}): use a number of seconds from 0 to "
            f"100 years ({MAX_DELAY:.0f})"
        )


@attrs.frozen
class RetryPolicy:
    """How often a failing job is tried, and how long to wait between tries.

    After the *n*-th failed attempt the job waits a delay drawn uniformly from
    ``[0, min(max_delay, base_delay * 2 ** (n - 1))]`` ("full jitter"), then goes
    back on the queue. After *max_attempts* failed attempts it is dead-lettered.

    The defaults (8 attempts, 1 s doubling, at most 10 minutes) spread a failing
    job's retries over about one to two minutes: an outage of what the handler
    talks to (a restart, a deploy, a network blip) does not dead-letter the jobs
    that met it, and a job that can never succeed still reaches the dead letters
    soon enough to be seen. Tighten them for fast feedback, loosen them for
    slow-healing dependencies.

    Raises:
        ConfigurationError: *max_attempts* < 1, a negative delay, or
            *max_delay* < *base_delay*.
    """

    max_attempts: int = attrs.field(default=8, validator=_positive_int)
    """Attempts in all, the first included."""
    base_delay: float = attrs.field(default=1.0, validator=_non_negative)
    """Upper bound of the first delay, in seconds; it doubles per failure."""
    max_delay: float = attrs.field(default=600.0, validator=_non_negative)
    """Cap on the upper bound of any delay, in seconds."""

    def __attrs_post_init__(self) -> None:
        if self.max_delay < self.base_delay:
            raise ConfigurationError(
                f"RetryPolicy(max_delay={self.max_delay!r}) is below base_delay="
                f"{self.base_delay!r}: raise max_delay or lower base_delay"
            )

    def attempts_left(self, attempts: int) -> bool:
        """Whether a job that has ended *attempts* attempts may be tried again."""
        return attempts < self.max_attempts

    def backoff_bound(self, attempts: int) -> float:
        """The largest delay after *attempts* failed attempts (``attempts >= 1``)."""
        try:
            bound = math.ldexp(self.base_delay, max(attempts - 1, 0))  # base * 2 ** (n - 1)
        except OverflowError:  # past the float range: the cap has long applied
            return self.max_delay
        return min(self.max_delay, bound)

    def backoff(self, attempts: int, rng: random.Random) -> float:
        """Draw the delay after *attempts* failed attempts, using *rng*."""
        return rng.uniform(0.0, self.backoff_bound(attempts))
