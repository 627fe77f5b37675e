"""The embedded backend: everything in this process, on Trio primitives."""

from __future__ import annotations

from typing import Final, final

from ._adding import Adding
from ._claiming import Claiming
from ._entry import RECORD_BYTES
from ._inspecting import Inspecting
from ._settling import Settling

__all__ = ["MemoryBackend"]


@final
class MemoryBackend(Adding, Claiming, Settling, Inspecting):
    """Jobs held in this process: zero set-up, gone when the process ends.

    The default backend. Records, the ready queue, claims and dead letters are
    plain Python structures; waits use Trio parking lots and times use Trio's
    clock, so tests on a mock clock are exact (delayed jobs wait in a heap by
    due time on it). Share one instance between the
    `Queue` producers and the worker pools of one process.

    Cancellation: as the `Backend` protocol says; each call makes its change
    with no cancel point after it.

    Args:
        capacity: Most jobs on the ready queue. `Queue.enqueue` waits beyond it.
        retention: How long finished records are kept: a `Retention`, or an int
            as a shorthand for ``Retention(max_count=n)``. By default the latest
            10,000 finished records are kept.
        max_bytes: The most memory the records may hold, counted as each
            payload and result in bytes and `RECORD_COST` more per record
            (`memory_held`); None (the default) for no bound. A new job that
            would pass it first evicts the oldest finished records; if unfinished
            jobs and dead letters fill it, `Queue.enqueue` waits for room and
            `Queue.submit` and `Queue.try_enqueue` raise `MemoryFull` (as every
            call does for a job larger than the whole budget). Give one
            where producers may outrun the workers with submit or delays, or
            payloads are large: the capacity bounds only the ready queue.

    Raises:
        ConfigurationError: *capacity* is below 1, or *max_bytes* not a whole number >= 1.
    """

    # a pool in this process claims and settles in its workers (_backend_inline.InlineBackend)
    _INLINE: Final = True

    RECORD_COST: Final = RECORD_BYTES

    """Bytes the budget counts for one record beside its payload and result.

    Measured with tracemalloc on CPython 3.11: a record with a small payload
    takes about 500 bytes on the ready queue and 340 once finished (its entry,
    id, hash and places in the backend's structures); 1 KiB errs on the safe side.
    """
