"""taskiq's benchmark adapter: taskiq-redis brokers + taskiq's Receiver (see ``_adapter.py``).

Variants:

``list`` (``ListQueueBroker``)
    LPUSH to enqueue, BRPOP (timeout 0: blocks, never polls) to take one job at a
    time. At-most-once by design: a job popped by a worker that dies is lost; the
    broker has no acks, so nothing to configure there.
``stream`` (``RedisStreamBroker``)
    XADD to enqueue; a consumer group read with XREADGROUP (``xread_block`` 2 s,
    the default: the read blocks and returns as soon as a job arrives, the 2 s is
    only how often an idle worker wakes up; ``xread_count`` 100, the default), an
    XACK per job, and XAUTOCLAIM of jobs idle for ``idle_timeout`` (10 min, the
    default) after each batch. Acks at the default time, ``when_saved`` (after the
    result is "saved", which with no result backend is right after the handler).
    The client calls ``broker.startup()`` before its first ``kiq``, as taskiq's
    examples do: that creates the consumer group before the first XADD, so the
    group's default start id ``$`` does not skip jobs enqueued before the worker
    starts.

Settings common to both: no result backend (taskiq's default dummy one: the
benchmark reads no results), the default JSON serializer, the queue name
``args.queue``, parameter validation on (the default). The worker runs in this
process through ``taskiq.api.run_receiver_task``, taskiq's public way to run a
receiver programmatically (the ``taskiq worker`` CLI would fork worker processes
and configure INFO logging, one line per job), on asyncio (taskiq runs on asyncio
only; uvloop is not installed, so plain asyncio, as the CLI would use here), with
``max_async_tasks`` = the concurrency and ``max_prefetch`` 0 (the default: taking
jobs beyond the free slots measured no faster, since the broker hands the receiver
one job per ``listen()`` step, and the receiver drops prefetched jobs at shutdown,
which loses them on the list broker).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from _adapter import Args, Recorder, main
from _round_trip import asyncio_round_trip, recorded
from taskiq.api import run_receiver_task
from taskiq_redis import ListQueueBroker, RedisStreamBroker

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from taskiq import AsyncBroker, AsyncTaskiqDecoratedTask


def make_broker(
    args: Args, on_job: Callable[[dict[str, Any]], Awaitable[None]]
) -> tuple[AsyncBroker, AsyncTaskiqDecoratedTask[[dict[str, Any]], Any]]:
    broker: AsyncBroker
    if args.variant == "stream":
        broker = RedisStreamBroker(args.url, queue_name=args.queue)
    else:
        broker = ListQueueBroker(args.url, queue_name=args.queue)

    @broker.task(task_name="noop")
    async def noop(payload: dict[str, Any]) -> None:
        await on_job(payload)

    return broker, noop


async def never(payload: dict[str, Any]) -> None:
    raise AssertionError("the enqueueing process runs no jobs")


def enqueue(args: Args) -> None:
    async def run() -> None:
        broker, noop = make_broker(args, never)
        await broker.startup()
        try:
            for i in range(args.jobs):
                delay = args.delay(i)
                if delay:
                    await asyncio.sleep(delay)
                await noop.kiq(args.payload(i))
        finally:
            await broker.shutdown()

    asyncio.run(run())


def work(args: Args, recorder: Recorder) -> None:
    async def run() -> None:
        round_trip = await asyncio_round_trip(args)

        broker, _ = make_broker(args, recorded(recorder, round_trip))
        broker.is_worker_process = True
        await broker.startup()
        recorder.start()
        await run_receiver_task(broker, max_async_tasks=args.concurrency)

    asyncio.run(run())


if __name__ == "__main__":
    main(enqueue, work, variants=("list", "stream"))
