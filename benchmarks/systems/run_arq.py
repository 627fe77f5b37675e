"""arq's benchmark adapter: ``ArqRedis.enqueue_job`` and one ``arq.Worker`` (see ``_adapter.py``).

Settings, each chosen as what a user who wants speed would deploy:

- ``max_jobs`` = the benchmark's concurrency, in this one worker process.
- ``keep_result=0``: arq's documented switch to not store results (the default
  keeps each job's result for an hour); the benchmark never reads them.
- ``poll_delay`` = POLL_DELAY (10 ms; the default is 0.5 s). arq has no
  blocking pop: its worker polls the queue's sorted set with ``ZRANGEBYSCORE``
  and sleeps ``poll_delay`` between polls, so that sleep is added to every
  job's latency and also caps throughput (each poll starts at most
  ``queue_read_limit`` jobs, 5 x ``max_jobs`` by default: about 320 jobs/s at the
  default delay). 10 ms is the low-latency setting a user would pick, at about
  100 cheap reads a second per idle worker (at 200 jobs/s: p50 12 ms, against
  350 ms at the default and 77 ms at 0.1 s).
- Delivery kept at arq's defaults: a job stays in the queue's sorted set while
  it runs, guarded by an ``in-progress`` key that expires ``job_timeout`` (300 s)
  + 10 s after it started, so a dead worker's job is run again then;
  ``max_tries=5``; the default pickle serializer.
- Keys: the sorted set is named after the queue; arq's per-job keys
  (``arq:job:*``, ``arq:in-progress:*``, ``arq:retry:*``) have a fixed prefix.
"""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

from _adapter import Args, Recorder, main
from _round_trip import asyncio_round_trip
from arq import Worker, create_pool, func
from arq.connections import RedisSettings

FUNCTION = "noop"
POLL_DELAY = 0.01  # seconds between polls of the queue


def enqueue(args: Args) -> None:
    async def run() -> None:
        redis = await create_pool(RedisSettings.from_dsn(args.url), default_queue_name=args.queue)
        try:
            for i in range(args.jobs):
                delay = args.delay(i)
                if delay:
                    await asyncio.sleep(delay)
                if args.defer is None:
                    await redis.enqueue_job(FUNCTION, args.payload(i))
                else:
                    due = datetime.datetime.fromtimestamp(args.due(i), datetime.UTC)
                    await redis.enqueue_job(FUNCTION, args.payload(i), _defer_until=due)
        finally:
            await redis.aclose()

    asyncio.run(run())


def work(args: Args, recorder: Recorder) -> None:
    async def noop(ctx: dict[str, Any], payload: dict[str, Any]) -> None:
        recorder.record(payload)
        if ctx["round_trip"] is not None:
            await ctx["round_trip"](payload)

    async def startup(ctx: dict[str, Any]) -> None:
        ctx["round_trip"] = await asyncio_round_trip(args)  # on arq's own event loop
        recorder.start()  # arq calls this once connected, right before its first poll

    worker = Worker(
        functions=[func(noop, name=FUNCTION)],
        queue_name=args.queue,
        redis_settings=RedisSettings.from_dsn(args.url),
        on_startup=startup,
        max_jobs=args.concurrency,
        keep_result=0,
        poll_delay=POLL_DELAY,
    )
    worker.run()


if __name__ == "__main__":
    main(enqueue, work)
