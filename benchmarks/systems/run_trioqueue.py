"""trioqueue's benchmark adapter: RedisBackend + open_worker_pool (see ``_adapter.py``).

Variants: ``reliable`` (the default mode: BLMOVE into a processing list, leases,
the recovery set and fencing all on; min_idle 30 s), ``simple`` (at-most-once
lists), both on trioqueue's own client (hiredis on Trio's sockets). Settings:
``workers`` = ``prefetch`` = the concurrency, claims and acks batched (the
defaults), a capacity large enough for every job. With ``--handler-io redis``
the handler makes its ``SET`` as a user's handler should: on the pool's own
connection, ``trioqueue.current_redis()``.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

import trio
from _adapter import Args, Recorder, main
from _round_trip import recorded

import trioqueue

if TYPE_CHECKING:
    from collections.abc import Mapping

CAPACITY = 1_000_000  # the benchmark measures speed, not backpressure


def backend(args: Args) -> trioqueue.RedisBackend:
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


async def pool_round_trip(payload: Mapping[str, Any]) -> None:
    """The handler's ``SET``, on the connection its pool holds."""
    await trioqueue.current_redis().command("SET", f"io:{payload['i']}", payload["i"])


def work(args: Args, recorder: Recorder) -> None:
    async def run() -> None:
        on_job = recorded(recorder, None if args.handler_io == "none" else pool_round_trip)

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
    main(enqueue, work, variants=("reliable", "simple"))
