"""The handler the dashboard test's service runs (imported by ``trioqueue serve``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import trioqueue

_failed: set[str] = set()


async def fails_once_when_asked(job: trioqueue.Job) -> None:
    """Fail the first attempt of a job whose payload asks for it; pass every other."""
    if isinstance(job.payload, dict) and job.payload.get("fail") and job.id not in _failed:
        _failed.add(job.id)
        raise RuntimeError("failing once, on purpose")
