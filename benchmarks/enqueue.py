"""Enqueue rates on a private Redis: one job per call against `enqueue_many`, side by side.

    python benchmarks/enqueue.py [--jobs 20000] [--rounds 3] [--batch 500]

Each round empties the queue, then times one producer task enqueuing ``--jobs`` jobs
one at a time (`Queue.enqueue`, one round trip each), then the same number in batches
of ``--batch`` (`Queue.enqueue_many`). Prints jobs/s for each and the ratio per
round; the ratio is the figure to quote (absolute rates drift on shared machines).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import trio
from _common import RedisServer, find_server_binary

import trioqueue


def payloads(jobs: int) -> list[dict[str, Any]]:
    """The jobs both ways enqueue: a small JSON object each, as a mail job's."""
    return [{"n": i, "to": f"user{i}@example.com"} for i in range(jobs)]


async def bulk_rate(url: str, jobs: int, batch: int, queue: str) -> float:
    """Jobs/s of `Queue.enqueue_many` in batches of *batch*, on the fresh queue *queue*."""
    settings = {"capacity": jobs + 1, "min_idle": 30}
    async with trioqueue.RedisBackend(url, queue=queue, **settings) as backend:
        every = payloads(jobs)
        start = time.perf_counter()
        for first in range(0, jobs, batch):
            chunk = every[first : first + batch]
            ids = [f"j{i}" for i in range(first, first + len(chunk))]
            results = await trioqueue.Queue(backend).enqueue_many(chunk, ids=ids)
            assert all(isinstance(r, trioqueue.Receipt) for r in results)
        rate = jobs / (time.perf_counter() - start)
        assert await backend.pending() == jobs
    return rate


async def one_round(url: str, jobs: int, batch: int, n: int) -> tuple[float, float]:
    """Jobs/s of single enqueues, then of bulk enqueues, on fresh queues."""
    settings = {"capacity": jobs + 1, "min_idle": 30}
    async with trioqueue.RedisBackend(url, queue=f"{{single{n}}}", **settings) as single:
        queue = trioqueue.Queue(single)
        start = time.perf_counter()
        for i, payload in enumerate(payloads(jobs)):
            await queue.enqueue(payload, id=f"j{i}")
        single_rate = jobs / (time.perf_counter() - start)
        assert await single.pending() == jobs
    return single_rate, await bulk_rate(url, jobs, batch, f"{{bulk{n}}}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=500)
    args = parser.parse_args()
    server = RedisServer(find_server_binary())
    server.start()
    ratios = []
    try:
        for n in range(1, args.rounds + 1):
            single, bulk = trio.run(one_round, server.url, args.jobs, args.batch, n)
            ratios.append(bulk / single)
            print(
                f"round {n}: enqueue {single:,.0f} jobs/s, enqueue_many({args.batch}) "
                f"{bulk:,.0f} jobs/s, ratio {bulk / single:.1f}"
            )
    finally:
        server.close()
    print(f"median ratio enqueue_many/enqueue: {statistics.median(ratios):.1f}")


if __name__ == "__main__":
    main()
