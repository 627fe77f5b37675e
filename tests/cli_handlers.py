"""Handlers for the ``trioqueue worker`` tests, imported by the worker subprocess.

Each prints a line per job to standard output, which the tests read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    import trioqueue


async def record(job: trioqueue.Job) -> None:
    print("ran", job.id, flush=True)


async def slow(job: trioqueue.Job) -> None:
    print("started", job.id, flush=True)
    await trio.sleep(3600)
    print("ran", job.id, flush=True)


async def brief(job: trioqueue.Job) -> None:
    print("started", job.id, flush=True)
    await trio.sleep(0.5)
    print("ran", job.id, flush=True)


async def failing(job: trioqueue.Job) -> None:
    print("failing", job.id, flush=True)
    raise RuntimeError("failing on purpose")


def not_async(job: trioqueue.Job) -> None:
    print("never", job.id)
