"""The pool's settings, validated, and the report a shutdown returns."""

from __future__ import annotations

import math

import attrs

from .._exceptions import ConfigurationError
from .._payload import MAX_PAYLOAD
from .._retry import RetryPolicy

__all__ = ["PoolConfig", "ShutdownReport", "check_number"]


def check_number(
    name: str,
    value: float | None,
    *,
    minimum: float,
    allow_none: bool = False,
    where: str = "open_worker_pool",
) -> None:
    """Refuse *value* unless it is a finite number >= *minimum* (or None if allowed).

    Raises:
        ConfigurationError: Naming *where* and *name*, and the range to use.
    """
    if value is None and allow_none:
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < minimum
    ):
        raise ConfigurationError(
            f"{where}({name}={value!r}): use a finite number >= {minimum}"
            + (", or None" if allow_none else "")
        )


@attrs.frozen
class PoolConfig:
    """What `open_worker_pool` was asked for, checked at construction."""

    workers: int
    retry: RetryPolicy
    handler_timeout: float | None
    prefetch: int
    batch_size: int
    lease: float
    sweep_interval: float
    poll_interval: float
    io_timeout: float
    max_result: int = MAX_PAYLOAD

    def __attrs_post_init__(self) -> None:
        for name in ("workers", "batch_size", "max_result"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(
                    f"open_worker_pool({name}={value!r}): use a whole number >= 1"
                )
        if isinstance(self.prefetch, bool) or not isinstance(self.prefetch, int):
            raise ConfigurationError(f"open_worker_pool(prefetch={self.prefetch!r}): use an int")
        check_number("prefetch", self.prefetch, minimum=0)
        check_number("handler_timeout", self.handler_timeout, minimum=0, allow_none=True)
        for name in ("lease", "sweep_interval", "poll_interval", "io_timeout"):
            check_number(name, getattr(self, name), minimum=1e-3)
        if not isinstance(self.retry, RetryPolicy):
            raise ConfigurationError(
                f"open_worker_pool(retry={self.retry!r}): pass a trioqueue.RetryPolicy"
            )


@attrs.frozen
class ShutdownReport:
    """What `WorkerPool.shutdown` did."""

    finished: int
    """Handlers that were running at the start of the shutdown and finished in the grace period."""
    cancelled: int
    """Handlers cancelled when the grace period ran out."""
    released: int
    """Unfinished jobs put back in the backend: cancelled, prefetched, or waiting to retry."""
    unreturned: int = 0
    """Jobs the backend could not take back in time (an outcome or a put-back that did
    not land): the sweeper recovers them when their leases run out."""

    @property
    def clean(self) -> bool:
        """True when no handler had to be cancelled and every job went back in time."""
        return self.cancelled == 0 and self.unreturned == 0
