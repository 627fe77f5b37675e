"""trioqueue's benchmark adapter: RedisBackend + open_worker_pool (see ``_adapter.py``).

Variants: ``reliable`` (the default mode: BLMOVE into a processing list, leases,
the recovery set and fencing all on; min_idle 30 s), ``simple`` (at-most-once
lists), both on the default client (valkey-glide), and ``reliable-coredis``
(reliable, on the coredis client: ``TRIOQUEUE_REDIS_CLIENT=coredis``).
Settings: ``workers`` = ``prefetch`` = the concurrency, claims and acks batched
(the defaults), a capacity large enough for every job.
"""

from __future__ import annotations

import datetime
import os

import trio
from _adapter import Args, Recorder, main
from _round_trip import recorded, trio_round_trip

import trioqueue

CAPACITY = 1_000_000  # the benchmark measures speed, not backpressure


def backend(args: Args) -> trioqueue.RedisBackend:
    if args.variant == "reliable-coredis":
        os.environ["TRIOQUEUE_REDIS_CLIENT"] = "coredis"
    if args.variant == "simple":
        return trioqueue.RedisBackend(
            args.url, queue="{" + args.queue + "}", capacity=CAPACITY, reliable=False
        )
    return trioqueue.RedisBackend(
        args.url, queue="{" + args.queue + "}", capacity=CAPACITY, min_idle=30
    )


def enqueue(args: Args) -> None:
    async def run() -> None:
        async with backend(args) as redis:
            queue = trioqueue.Queue(redis)
            for i in range(args.jobs):
                delay = args.delay(i)
                if delay:
                    await trio.sleep(delay)
                if args.defer is None:
                    await queue.enqueue(args.payload(i))
                else:
                    at = datetime.datetime.fromtimestamp(args.due(i), datetime.UTC)
                    await queue.enqueue(args.payload(i), at=at)

    trio.run(run)


def work(args: Args, recorder: Recorder) -> None:
    async def run() -> None:
        on_job = recorded(recorder, await trio_round_trip(args))

        async def handler(job: trioqueue.Job) -> None:
            await on_job(job.payload)

        recorder.start()
        async with (
            backend(args) as redis,
            trioqueue.open_worker_pool(
                redis, handler, workers=args.concurrency, prefetch=args.concurrency
            ),
        ):
            await trio.sleep_forever()

    trio.run(run)


if __name__ == "__main__":
    main(enqueue, work, variants=("reliable", "simple", "reliable-coredis"))
