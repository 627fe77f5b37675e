"""Handlers for the benchmark workers: ``noop_handlers:noop`` does nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import trioqueue


async def noop(job: trioqueue.Job) -> None:
    """Return at once: the benchmark measures the queue, not the work."""
