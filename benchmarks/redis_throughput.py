"""Redis throughput: one ``trioqueue worker`` process against a bare BLMOVE+LREM loop.

    python benchmarks/redis_throughput.py [--jobs 20000] [--concurrency 32] [--rounds 3]

Workload 1 of the benchmark issue, trioqueue's side: enqueue --jobs no-op jobs on
a private Redis, start one worker process with --concurrency handlers (reliable
mode: leases, recovery and fencing on), and time from its start to the last
completion. The floor is the same number of items through a bare reliable-queue
loop on the same client library: BLMOVE into a processing list, then LREM, from
--concurrency tasks. Prints jobs/s for each and their ratio per round and the
median; absolute numbers drift on shared machines, the ratio is the figure.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import coredis
import trio

import trioqueue

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent / "tests"))
from redis_server import RedisServer, find_server_binary  # noqa: E402


async def bare_loop(url: str, items: int, concurrency: int) -> float:
    """Items/s through BLMOVE + LREM with *concurrency* tasks: the floor."""
    async with coredis.Redis.from_url(url, decode_responses=False) as client:
        await client.delete(["floor", "floor.processing"])
        for start in range(0, items, 1000):
            await client.lpush("floor", [str(i).encode() for i in range(start, start + 1000)])
        done = 0

        async def consume() -> None:
            nonlocal done
            while done < items:
                item = await client.blmove("floor", "floor.processing", "RIGHT", "LEFT", 0.05)
                if item is None:
                    continue
                await client.lrem("floor.processing", 1, item)
                done += 1

        started = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for _ in range(concurrency):
                nursery.start_soon(consume)
        return items / (time.perf_counter() - started)


async def enqueue(url: str, queue: str, jobs: int) -> None:
    async with trioqueue.RedisBackend(url, queue=queue, capacity=jobs, min_idle=30) as backend:
        producer = trioqueue.Queue(backend)
        for i in range(jobs):
            await producer.enqueue({"i": i})


async def succeeded(url: str, queue: str, jobs: int) -> int:
    async with trioqueue.RedisBackend(url, queue=queue, capacity=jobs, min_idle=30) as backend:
        return (await backend.stats()).succeeded


def worker_rate(url: str, queue: str, jobs: int, concurrency: int) -> float:
    """Jobs/s of one worker process, from its start to the last completion."""
    trio.run(enqueue, url, queue, jobs)
    command = [
        sys.executable, "-m", "trioqueue", "-q", "worker", "noop_handlers:noop",
        "--redis", url, "--queue", queue, "--capacity", str(jobs),
        "--workers", str(concurrency), "--prefetch", str(concurrency),
    ]  # fmt: skip
    started = time.perf_counter()
    worker = subprocess.Popen(
        command, cwd=HERE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        while trio.run(succeeded, url, queue, jobs) < jobs:
            time.sleep(0.02)
        return jobs / (time.perf_counter() - started)
    finally:
        worker.terminate()
        worker.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    server = RedisServer(find_server_binary())
    server.start()
    try:
        ratios = []
        for n in range(1, args.rounds + 1):
            floor = trio.run(bare_loop, server.url, args.jobs, args.concurrency)
            ours = worker_rate(server.url, "{bench-" + str(n) + "}", args.jobs, args.concurrency)
            ratios.append(ours / floor)
            print(
                f"round {n}: bare BLMOVE+LREM {floor:,.0f} items/s, trioqueue worker "
                f"{ours:,.0f} jobs/s, ratio {ours / floor:.2f}",
                flush=True,
            )
        print(f"median ratio worker/floor: {statistics.median(ratios):.2f}")
    finally:
        server.close()


if __name__ == "__main__":
    main()
