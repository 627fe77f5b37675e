"""What a Redis queue holds at one moment, for operators."""

from __future__ import annotations

import attrs

__all__ = ["QueueInfo"]


@attrs.frozen
class QueueInfo:
    """What a Redis queue holds at one moment (`RedisBackend.inspect`)."""

    ready: int
    """Jobs on the ready list."""
    stored: int
    """Jobs accepted while the ready list was full, waiting for room."""
    processing: int
    """Jobs a blocking wait moved off the ready list whose claim is not registered yet."""
    claims: int
    """Leases in the claims set: jobs claimed by a worker, running or waiting to retry."""
    oldest_claim_age: float | None
    """Seconds since the longest-held claim was made; None when nothing is claimed."""
    dead: int
    """Dead letters."""
    finished_kept: int
    """Finished records the retention still keeps."""
    scheduled: int = 0
    """Jobs stored until their due time (delayed jobs)."""
    deferred: int = 0
    """Jobs waiting for the jobs they run after (``enqueue(..., after=[...])``)."""
