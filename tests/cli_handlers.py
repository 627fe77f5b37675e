"""Handlers for the ``trioqueue worker`` tests, imported by the worker subprocess.

Each prints a line per job to standard output, which the tests read.
"""

from __future__ import annotations

import contextlib
import json
import threading
from typing import TYPE_CHECKING

import trio

import trioqueue

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


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


async def cancellable(job: trioqueue.Job) -> None:
    print("started", job.id, "attempt", job.attempt, flush=True)
    try:
        await trio.sleep(3600)
    except trio.Cancelled:
        print("cancelled", job.id, flush=True)
        raise
    finally:
        print("finally", job.id, flush=True)


async def double(job: trioqueue.Job) -> dict[str, int]:
    return {"double": job.payload["n"] * 2}


def not_async(job: trioqueue.Job) -> None:
    print("never", job.id)


@contextlib.asynccontextmanager
async def lifespan() -> AsyncIterator[trioqueue.Handler]:
    """A lifespan for ``--lifespan``: opens a shared resource, yields the handler."""
    shared = {"opened": True}
    print("opened", flush=True)

    async def handle(job: trioqueue.Job) -> None:
        print("ran", job.id, "shared" if shared["opened"] else "closed", flush=True)

    try:
        yield handle
    finally:
        shared["opened"] = False
        print("closed", flush=True)


@contextlib.asynccontextmanager
async def yields_no_handler() -> AsyncIterator[None]:
    yield None


async def shout(job: trioqueue.Job) -> None:
    print("shout", job.id, flush=True)


async def whisper(job: trioqueue.Job) -> None:
    print("whisper", job.id, flush=True)


tasks = {"shout": shout, "whisper": whisper}
"""A table of handlers for one worker: each job runs with the one its task names."""


def whisper_in_a_thread(job: trioqueue.Job) -> None:
    where = "thread" if threading.current_thread() is not threading.main_thread() else "loop"
    print("whisper", job.id, flush=True)
    print("whispered in a", where, flush=True)


task_list = [
    trioqueue.Task("shout", shout, max_attempts=2),
    trioqueue.Task("whisper", whisper_in_a_thread, run_sync=True),
]
"""The same tasks as a list of `trioqueue.Task`, one of them a plain function in a thread."""


async def halfway(job: trioqueue.Job) -> None:
    """Reports half done, says so, then works until it is stopped."""
    await trioqueue.report_progress({"done": 1, "of": 2})
    print("started", job.id, flush=True)
    await trio.sleep(3600)


async def show_headers(job: trioqueue.Job) -> None:
    print("headers", job.id, json.dumps(job.headers, sort_keys=True), flush=True)
