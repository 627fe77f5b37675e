"""streaQ's benchmark adapter: one ``streaq.Worker`` on anyio (see ``_adapter.py``).

Variants: ``trio`` and ``asyncio``, the anyio backend both the worker and the
enqueueing client run on (``Worker(anyio_backend=...)``; plain asyncio, no uvloop).

streaQ keeps each job's data in its own key and its id in a Redis stream read by a
consumer group; a job is acknowledged (XACK + XDEL) after it ran, and one that
stays unacknowledged for ``idle_timeout`` (60 s, the default) is claimed again by
a worker, so delivery is at-least-once by design; left at its defaults. The
worker reads with a non-blocking read first, then XREADGROUP blocking up to
``idle_timeout``: it returns as soon as a job arrives, so it does not poll (the
0.5 s loop that moves delayed jobs into the stream plays no part for jobs
enqueued without a delay).

Settings: ``concurrency`` = the concurrency (32 consumer tasks sharing one
capacity limiter), ``prefetch`` left at its default (= the concurrency), the
queue name ``args.queue``, the default pickle serializer. The task is registered
with ``ttl=0``: streaQ stores no result for it (the benchmark reads none; by
default it would keep each result in Redis for 5 minutes), and ``silent=True``:
no per-job log lines (the benchmark configures no logging, and streaQ builds the
message even when nobody listens). ``max_tries`` (3), ``timeout`` (none) and
``unique`` (off) keep their defaults. The worker runs in this process through
``Worker.run_async`` (the ``streaq`` CLI would do the same via ``run_sync``, after
configuring INFO logging).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import anyio
from _adapter import Args, Recorder, main
from _round_trip import asyncio_round_trip, recorded, trio_round_trip
from streaq import Worker

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from streaq.task import AsyncRegisteredTask


def make_worker(
    args: Args, on_job: Callable[[dict[str, Any]], Awaitable[None]]
) -> tuple[Worker[Any], AsyncRegisteredTask[[dict[str, Any]], None]]:
    worker: Worker[Any] = Worker(
        redis_url=args.url,
        concurrency=args.concurrency,
        queue_name=args.queue,
        anyio_backend=args.variant,  # type: ignore[arg-type]  # "trio" or "asyncio"
    )

    @worker.task(name="noop", ttl=0, silent=True)
    async def noop(payload: dict[str, Any]) -> None:
        await on_job(payload)

    return worker, noop


async def never(payload: dict[str, Any]) -> None:
    raise AssertionError("the enqueueing process runs no jobs")


def enqueue(args: Args) -> None:
    async def run() -> None:
        worker, noop = make_worker(args, never)
        async with worker:
            for i in range(args.jobs):
                delay = args.delay(i)
                if delay:
                    await anyio.sleep(delay)
                await noop.enqueue(args.payload(i))

    anyio.run(run, backend=args.variant)


def work(args: Args, recorder: Recorder) -> None:
    async def run() -> None:
        async with contextlib.AsyncExitStack() as stack:
            if args.variant == "trio":
                round_trip = await stack.enter_async_context(trio_round_trip(args))
            else:
                round_trip = await asyncio_round_trip(args)

            worker, _ = make_worker(args, recorded(recorder, round_trip))
            recorder.start()
            await worker.run_async()

    anyio.run(run, backend=args.variant)


if __name__ == "__main__":
    main(enqueue, work, variants=("trio", "asyncio"))
