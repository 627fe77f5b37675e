"""Redis, on the server's own clock: one rate key's backlog across two worker pools.

The contract suite checks the per-key limit's arithmetic on Trio's mock clock;
here two pools, each with its own connection as two processes would have, share
one key's backlog on the server's clock: the jobs start in the order they were
enqueued, and never more than the limit allows in a window. The start times are
the server's, read from each record as its handler begins (the claim's time,
not the handler's, which a busy machine delays). How much of the limit the
starts use is timing, not a contract: `benchmarks/key_rate.py` measures it
(about 97 %); the contract suite checks on the mock clock that a job waking
late takes the next free start.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import trio

import trioqueue
from trioqueue import Queue, RateLimit

if TYPE_CHECKING:
    from .redis_server import RedisServer

JOBS, RATE = 30, 20


async def test_two_pools_start_one_keys_backlog_in_order_at_its_rate(redis_server: RedisServer):
    queue_name = "{rk-" + uuid.uuid4().hex[:10] + "}"
    starts: list[tuple[float, int]] = []
    reader: Queue | None = None

    async def handler(job: trioqueue.Job) -> None:
        assert reader is not None
        record = await reader.status(job.id)
        assert record is not None
        assert record.state is trioqueue.JobState.PROCESSING
        starts.append((record.updated_at, job.payload["n"]))  # set by the claim

    async def pool(done: trio.Event) -> None:
        async with (
            trioqueue.RedisBackend(redis_server.url, queue=queue_name, min_idle=30) as backend,
            trioqueue.open_worker_pool(backend, handler, workers=4),
        ):
            await done.wait()

    async with trioqueue.RedisBackend(redis_server.url, queue=queue_name) as backend:
        queue = reader = Queue(backend)
        await queue.set_rate_limits(per_key=RateLimit(RATE))
        ids = [f"j{n}" for n in range(JOBS)]
        await queue.enqueue_many([{"n": n} for n in range(JOBS)], ids=ids, rate_key="A")
        done = trio.Event()
        with trio.fail_after(JOBS / RATE * 4 + 10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(pool, done)
                nursery.start_soon(pool, done)
                for job_id in ids:
                    await queue.result(job_id)
                done.set()
    starts.sort()
    order = [n for _, n in starts]
    assert order == list(range(JOBS)), f"the key's jobs started out of order: {order}"
    times = [at for at, _ in starts]
    # never more than RATE in a second (less a millisecond: the stamps are rounded)
    for i, first in enumerate(times):
        assert sum(1 for t in times[i:] if t < first + 1.0 - 0.001) <= RATE, times
