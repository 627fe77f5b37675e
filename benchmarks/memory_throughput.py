"""Memory-backend throughput against the bare Trio channel floor, measured side by side.

    python benchmarks/memory_throughput.py [--jobs N] [--workers N] [--rounds N] [--scale]

Prints jobs/s for each and the ratio (pool / floor) per round and the median.
Absolute numbers drift on shared machines; the ratio is the figure to quote.
With ``--scale``, each round also runs the pool through 10 x N jobs and prints
how much longer that took than N (linear: at most 10.5 x).
"""

from __future__ import annotations

import argparse
import statistics
import time

import trio
from floors import bare_channel

import trioqueue


async def pool(jobs: int, workers: int) -> float:
    """Jobs/s through MemoryBackend + open_worker_pool with a no-op handler."""
    backend = trioqueue.MemoryBackend(capacity=64)
    queue = trioqueue.Queue(backend)

    async def handler(job: trioqueue.Job) -> None:
        pass

    start = time.perf_counter()
    async with trioqueue.open_worker_pool(backend, handler, workers=workers, prefetch=32):
        for i in range(jobs):
            await queue.enqueue({"i": i})
    elapsed = time.perf_counter() - start
    assert backend.metrics.snapshot().succeeded == jobs
    return jobs / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--workers", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scale", action="store_true", help="also run 10 x --jobs")
    args = parser.parse_args()
    ratios, growths = [], []
    for n in range(1, args.rounds + 1):
        floor = trio.run(bare_channel, args.jobs, args.workers)
        ours = trio.run(pool, args.jobs, args.workers)
        ratios.append(ours / floor)
        print(
            f"round {n}: bare channel {floor:,.0f} items/s, pool {ours:,.0f} jobs/s, "
            f"ratio {ours / floor:.3f}"
        )
        if args.scale:
            larger = trio.run(pool, 10 * args.jobs, args.workers)
            growths.append(10 * ours / larger)  # 10 x the jobs took this many times as long
            print(f"round {n}: 10 x the jobs, {larger:,.0f} jobs/s: {growths[-1]:.2f} x the time")
    print(f"median ratio pool/floor: {statistics.median(ratios):.3f} (target >= 0.5)")
    if growths:
        print(
            f"10 x the jobs took {statistics.median(growths):.2f} x the time, median "
            f"(range {min(growths):.2f}-{max(growths):.2f}; linear: at most 10.5)"
        )


if __name__ == "__main__":
    main()
