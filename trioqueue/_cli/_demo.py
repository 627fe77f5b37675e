"""``trioqueue demo``: jobs with simulated failures through a pool, then the full report."""

from __future__ import annotations

import hashlib
import os
import random
import sys
import uuid
from typing import TYPE_CHECKING, Final, TextIO

import trio

try:
    from tqdm import tqdm

    _BAR = True
except ImportError:  # the cli extra is not installed: plain progress lines
    _BAR = False

from .._backends.memory._backend import MemoryBackend
from .._pool._lifecycle import open_worker_pool
from .._queue import Queue
from .._retry import RetryPolicy
from ._types import printable

if TYPE_CHECKING:
    import argparse

    from .._backend import Backend
    from .._backends.redis._backend import RedisBackend
    from .._metrics import MetricsSnapshot
    from .._pool._handlers import Handler
    from .._records import Job

__all__ = ["SimulatedFailure", "run_demo"]

_BAR_REFRESH: Final = 0.1  # seconds between progress-bar updates on a terminal
_LINE_EVERY: Final = 1.0  # seconds between progress lines when not on a terminal
_DEMO_KEY_TTL: Final = 3600.0  # a Redis demo queue disappears an hour after the run


class SimulatedFailure(Exception):
    """The failure ``trioqueue demo --fail-rate`` injects."""


def _redis_backend(args: argparse.Namespace) -> RedisBackend:
    from .._backends.redis._backend import RedisBackend  # lazily: the optional extra

    name = args.queue or "{trioqueue-demo-" + uuid.uuid4().hex[:8] + "}"
    return RedisBackend(
        args.redis, queue=name, capacity=args.capacity, min_idle=30, key_ttl=_DEMO_KEY_TTL
    )


def fails(seed: int, job_id: str, attempt: int, fail_rate: float) -> bool:
    """Whether the demo fails this attempt: a function of the seed, the job and the attempt.

    Not of the order in which workers happen to run the jobs, so a run with the
    same ``--seed`` gives the same successes, failures, retries and dead letters.
    """
    digest = hashlib.blake2b(f"{seed}:{job_id}:{attempt}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64 < fail_rate


async def run_demo(args: argparse.Namespace) -> MetricsSnapshot:
    """Run the demo the arguments describe; return the queue's final stats."""
    seed = random.randrange(2**32) if args.seed is None else args.seed
    work = args.handler_ms / 1000

    async def handler(job: Job) -> None:
        await trio.sleep(work)
        if fails(seed, job.id, job.attempt, args.fail_rate):
            raise SimulatedFailure(f"simulated failure of job {job.id} attempt {job.attempt}")

    if args.redis is None:
        return await _run(MemoryBackend(capacity=args.capacity), handler, args)
    backend = _redis_backend(args)
    print(
        f"trioqueue demo: running on the Redis queue {printable(backend.keys.ready)} (its keys "
        f"expire {_DEMO_KEY_TTL / 3600:g} hour after the run); see its dead letters with "
        f"`trioqueue dead list --queue '{printable(backend.keys.ready)}' --capacity "
        f"{args.capacity} --key-ttl {_DEMO_KEY_TTL:g}` and the same Redis URL",
        file=sys.stderr,
        flush=True,
    )
    async with backend:
        return await _run(backend, handler, args)


async def _run(backend: Backend, handler: Handler, args: argparse.Namespace) -> MetricsSnapshot:
    retry = RetryPolicy(max_attempts=args.max_attempts, base_delay=0.005, max_delay=0.2)
    queue = Queue(backend)
    async with trio.open_nursery() as nursery:
        if not args.json:
            nursery.start_soon(_show_progress, backend, args.jobs, sys.stderr)
        async with open_worker_pool(
            backend,
            handler,
            workers=args.workers,
            retry=retry,
            seed=args.seed,
            batch_size=min(64, args.capacity),
        ):
            for i in range(args.jobs):
                await queue.enqueue({"i": i}, id=f"demo-{i}")
        nursery.cancel_scope.cancel()
    return await backend.stats()


async def _show_progress(backend: Backend, total: int, stream: TextIO) -> None:
    """A bar with rates on a terminal; a plain line a second otherwise. Runs until cancelled.

    The bar needs tqdm (the ``cli`` extra); without it a terminal gets the lines.
    """
    if stream.isatty() and _BAR:
        # a terminal that reports no size (a bare pty) would get no bar at all
        sized = os.get_terminal_size(stream.fileno()).columns > 0
        size = {"dynamic_ncols": True} if sized else {"ncols": 80, "nrows": 24}
        with tqdm(total=total, unit="job", file=stream, **size) as bar:
            try:
                while True:
                    _draw(bar, backend.metrics.snapshot())
                    await trio.sleep(_BAR_REFRESH)
            finally:  # cancelled when the run ends: draw the final count
                _draw(bar, backend.metrics.snapshot())
    started, last = trio.current_time(), 0
    while True:
        await trio.sleep(_LINE_EVERY)
        snap = backend.metrics.snapshot()
        rate = (snap.finished - last) / _LINE_EVERY
        last = snap.finished
        print(
            f"progress: {snap.finished}/{total} finished ({rate:.0f}/s), "
            f"{snap.retries} retries, {snap.dead_lettered} dead, "
            f"{trio.current_time() - started:.0f}s",
            file=stream,
            flush=True,
        )


def _draw(bar: tqdm[None], snap: MetricsSnapshot) -> None:
    bar.set_postfix(retries=snap.retries, dead=snap.dead_lettered, refresh=False)
    bar.update(snap.finished - bar.n)
