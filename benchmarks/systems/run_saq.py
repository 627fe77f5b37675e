"""saq's benchmark adapter: a Redis ``saq.Queue`` and one ``saq.Worker`` (see ``_adapter.py``).

Settings, each chosen as what a user who wants speed would deploy:

- ``concurrency`` = the benchmark's concurrency, in this one worker process: saq
  runs that many dequeue loops, each blocked in its own ``BLMOVE queued -> active``.
- ``dequeue_timeout=0`` (the default): that ``BLMOVE`` blocks until a job comes,
  so saq does not poll for ready jobs and there is no poll interval to tune
  (its 1 s ``schedule`` timer only moves *scheduled* jobs, which this benchmark
  does not make).
- ``ttl=-1`` on every job: saq's documented switch that deletes the job's record
  when it finishes instead of keeping it (and its result) for 600 s; the
  benchmark never reads results.
- Delivery kept at saq's defaults: the job stays in the ``active`` list while it
  runs and is swept back after its ``timeout`` (10 s) if its worker died;
  ``retries=1`` (no retry, as the handler never fails), no heartbeat.
- Keys: ``saq:<queue>:*`` plus ``saq:job:<queue>:<key>`` per job.
"""

from __future__ import annotations

import asyncio
from typing import Any

from _adapter import Args, Recorder, main
from _round_trip import asyncio_round_trip, recorded
from saq import Job, Queue, Worker

FUNCTION = "noop"


def enqueue(args: Args) -> None:
    async def run() -> None:
        queue = Queue.from_url(args.url, name=args.queue)
        await queue.connect()
        try:
            for i in range(args.jobs):
                delay = args.delay(i)
                if delay:
                    await asyncio.sleep(delay)
                # saq's scheduled: when the job is due, in seconds since the epoch; 0 (an
                # int: its script compares the text with '0') is now, 0.0 would never run
                scheduled = 0 if args.defer is None else args.due(i)
                job = Job(function=FUNCTION, kwargs=args.payload(i), ttl=-1, scheduled=scheduled)
                await queue.enqueue(job)
        finally:
            await queue.disconnect()

    asyncio.run(run())


def work(args: Args, recorder: Recorder) -> None:
    async def startup(ctx: dict[str, Any]) -> None:
        recorder.start()  # saq calls this right before its dequeue loops begin

    async def run() -> None:
        on_job = recorded(recorder, await asyncio_round_trip(args))

        async def noop(ctx: dict[str, Any], **payload: Any) -> None:
            await on_job(payload)

        queue = Queue.from_url(args.url, name=args.queue)
        worker = Worker(
            queue,
            functions=[(FUNCTION, noop)],
            concurrency=args.concurrency,
            startup=startup,
        )
        await queue.connect()
        await worker.start()

    asyncio.run(run())


if __name__ == "__main__":
    main(enqueue, work)
