"""Workload 3: throughput and end-to-end latency across fail rate × queue capacity.

Each job fails an attempt with probability *fail_rate*, decided by a hash of
(job, attempt) so every run fails the same attempts; failures are retried with
full-jitter backoff (1 ms doubling to 16 ms, up to 25 attempts, so none is
dead-lettered). Eight producer tasks enqueue as fast as the capacity lets them
(a single producer would measure its own round trips, not the queue), into a
pool of 32 workers (no prefetch: the capacity is the only buffer) in the same
process. Throughput is jobs/s from the first enqueue to the drain; end-to-end
latency is enqueue to completion, retries included (the backend's
``end_to_end`` histogram).
"""

from __future__ import annotations

import time
import zlib
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import TYPE_CHECKING, Any

import trio

import trioqueue

if TYPE_CHECKING:
    from collections.abc import Callable

WORKERS = 32
PRODUCERS = 8
RETRY = trioqueue.RetryPolicy(max_attempts=25, base_delay=0.001, max_delay=0.016)


def fails(i: int, attempt: int, fail_rate: float) -> bool:
    """Whether attempt *attempt* of job *i* fails: the same answer in every run."""
    return zlib.crc32(f"{i}/{attempt}".encode()) < fail_rate * 2**32


async def produce(queue: trioqueue.Queue, numbers: range) -> None:
    """Enqueue the jobs *numbers*, each waiting for room."""
    for i in numbers:
        await queue.enqueue({"i": i})


async def one_run(
    open_backend: Callable[[], AbstractAsyncContextManager[trioqueue.Backend]],
    jobs: int,
    fail_rate: float,
) -> dict[str, Any]:
    """Push *jobs* jobs through a pool on a fresh backend; jobs/s and latency."""

    async def handler(job: trioqueue.Job) -> None:
        if fails(job.payload["i"], job.attempt, fail_rate):
            raise RuntimeError("a simulated failure")

    async with open_backend() as backend:
        queue = trioqueue.Queue(backend)
        started = time.perf_counter()
        async with (
            trioqueue.open_worker_pool(backend, handler, workers=WORKERS, retry=RETRY),
            trio.open_nursery() as producers,
        ):
            for first in range(PRODUCERS):
                producers.start_soon(produce, queue, range(first, jobs, PRODUCERS))
        elapsed = time.perf_counter() - started
        snapshot = backend.metrics.snapshot()
    if snapshot.succeeded != jobs:
        raise RuntimeError(f"{snapshot.succeeded} of {jobs} jobs succeeded: {snapshot}")
    return {
        "jobs_per_s": jobs / elapsed,
        "end_to_end_p50": snapshot.end_to_end.p50,
        "end_to_end_p99": snapshot.end_to_end.p99,
        "retries": snapshot.retries,
    }


def memory(capacity: int) -> Callable[[], AbstractAsyncContextManager[trioqueue.Backend]]:
    """A fresh MemoryBackend per run."""
    return lambda: nullcontext(trioqueue.MemoryBackend(capacity=capacity))


def redis(url: str, capacity: int) -> Callable[[], AbstractAsyncContextManager[trioqueue.Backend]]:
    """A RedisBackend (reliable, min_idle 30 s) on a fresh queue per run."""
    names = iter(range(1_000_000))
    return lambda: trioqueue.RedisBackend(
        url, queue=f"{{sweep-{capacity}-{next(names)}}}", capacity=capacity, min_idle=30
    )


def run(
    open_backend: Callable[[], AbstractAsyncContextManager[trioqueue.Backend]],
    jobs: int,
    fail_rate: float,
) -> dict[str, Any]:
    """One run in a fresh Trio loop."""
    return trio.run(one_run, open_backend, jobs, fail_rate)
