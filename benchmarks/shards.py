"""One logical queue on a local Redis Cluster: 1 shard against 3 shards on 3 masters.

    python benchmarks/shards.py [--rounds 3] [--jobs 20000] [--processes 3] [--json]

``nox -s bench`` runs this. A queue's keys share one hash slot, so a queue
without shards lives on one master; with ``--shards 3`` its shards' slots fall on
the three masters. Each round fills the queue, then starts worker processes at
once (each a pool of 16 workers whose handler makes one Redis round trip on the
cluster, as real handlers do) and times them until the queue is drained. The
two layouts alternate within each round; the ratio of each round is the figure.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import trio

import trioqueue

ROOT = Path(__file__).resolve().parent.parent
WORKERS = 16  # per process


def shard_placement(cluster: Any, queue: str, shards: int) -> list[int]:
    """Which master serves each shard of *queue*."""
    from trioqueue._backends.redis._shards import shard_names

    placement = []
    for name in shard_names(queue, shards) if shards > 1 else [queue]:
        master = cluster.master_of(name)
        placement.append(cluster.masters.index(master))
    return placement


def backend(url: str, queue: str, shards: int) -> trioqueue.RedisBackend | trioqueue.ShardedBackend:
    if shards == 1:
        return trioqueue.RedisBackend(url, queue=queue, min_idle=30, capacity=1_000_000)
    return trioqueue.ShardedBackend.on_redis(
        url, queue=queue, shards=shards, min_idle=30, capacity=1_000_000
    )


async def fill(url: str, queue: str, shards: int, jobs: int) -> None:
    async with backend(url, queue, shards) as filled:
        queue_ = trioqueue.Queue(filled)
        for start in range(0, jobs, 1000):
            await queue_.enqueue_many(
                [{"n": n} for n in range(start, min(jobs, start + 1000))],
                ids=[f"j{n}" for n in range(start, min(jobs, start + 1000))],
            )


async def worker(url: str, queue: str, shards: int) -> None:
    """One worker process: connect, say ready, wait for 'go', drain, report."""
    # the handlers' own GETs go through a second RedisBackend's connections (one
    # logical queue over shards has no single backend to share, as current_redis() would)
    reads = trioqueue.RedisBackend(url, queue="{bench-io}")
    done = 0

    async def handler(job: trioqueue.Job) -> None:
        nonlocal done
        await reads.command("GET", f"key:{job.payload['n'] % 1000}")  # one round trip
        done += 1

    async with reads, backend(url, queue, shards) as own:
        await own.pending()  # connected
        print("ready", flush=True)
        await trio.to_thread.run_sync(sys.stdin.readline)
        started = time.perf_counter()
        async with trioqueue.open_worker_pool(own, handler, workers=WORKERS) as pool:
            pool.mark_producer_finished()
        print("done", done, time.perf_counter() - started, flush=True)


def spread_name(shards: int) -> str:
    """A fresh queue name whose shards fall on *shards* different masters (of 3)."""
    from tests.redis_cluster import master_index
    from trioqueue._backends.redis._keys import hash_slot
    from trioqueue._backends.redis._shards import shard_names

    while True:
        queue = f"bench-{uuid.uuid4().hex[:6]}"
        names = shard_names(queue, shards) if shards > 1 else ["{" + queue + "}"]
        if len({master_index(hash_slot(name)) for name in names}) == min(shards, 3):
            return queue if shards > 1 else names[0]


def one_run(url: str, shards: int, jobs: int, processes: int) -> tuple[float, str]:
    queue = spread_name(shards)
    command = [sys.executable, __file__, "--worker", url, queue, str(shards)]
    procs = [
        subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(processes)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline().strip()
            if line != "ready":
                raise RuntimeError(f"a worker process said {line!r} instead of 'ready'")
        trio.run(fill, url, queue, shards, jobs)
        started = time.perf_counter()
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        counts = []
        for proc in procs:
            assert proc.stdout is not None
            counts.append(int(proc.stdout.readline().split()[1]))
        elapsed = time.perf_counter() - started
    finally:
        for proc in procs:
            proc.wait(timeout=60)
    if sum(counts) != jobs:
        raise RuntimeError(f"{sum(counts)} jobs ran, {jobs} were enqueued")
    return jobs / elapsed, queue


def measure(rounds: int, jobs: int, processes: int) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    from tests.redis_cluster import started_cluster

    results: dict[str, list[float]] = {"1 shard": [], "3 shards": []}
    placements: dict[str, list[int]] = {}
    with started_cluster() as cluster:
        url = cluster.url + "?cluster=yes"
        for n in range(1, rounds + 1):
            for label, shards in (("1 shard", 1), ("3 shards", 3)):
                rate, queue = one_run(url, shards, jobs, processes)
                results[label].append(rate)
                placements[label] = shard_placement(cluster, queue, shards)
            ratio = results["3 shards"][-1] / results["1 shard"][-1]
            print(
                f"round {n}: 1 shard {results['1 shard'][-1]:,.0f} jobs/s, 3 shards "
                f"{results['3 shards'][-1]:,.0f} jobs/s, ratio {ratio:.2f}",
                flush=True,
            )
    ratios = [b / a for a, b in zip(results["1 shard"], results["3 shards"], strict=True)]
    return {
        "jobs": jobs,
        "processes": processes,
        "workers_per_process": WORKERS,
        "handler": "one GET on the cluster (a second RedisBackend's command())",
        "jobs_per_s": {label: statistics.median(v) for label, v in results.items()},
        "rounds": results,
        "ratio_median": statistics.median(ratios),
        "ratio_range": [min(ratios), max(ratios)],
        "masters_used": placements,
    }


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        trio.run(worker, sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()
    result = measure(args.rounds, args.jobs, args.processes)
    print(json.dumps(result, indent=2) if args.json else result["jobs_per_s"], flush=True)


if __name__ == "__main__":
    main()
