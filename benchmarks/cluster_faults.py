"""Redis Cluster faults, measured: the URL's own node killed, and the queue's slot moved.

    python benchmarks/cluster_faults.py [--rounds 3] [--retained 0,2000,10000]

Each round starts a private cluster of 3 masters and 3 replicas (node timeout
1 s; ``tests/redis_cluster.py``), with a producer sending 600 jobs, one every
2 ms, to a pool of 8 workers whose handler takes 10 ms.

- **Failover**: the URL names two nodes, the first of which serves the queue;
  at a third of the jobs that node is killed. Reported: when its replica became
  master, when the first handler started after the kill, jobs lost, jobs run twice.
- **Reshard**: the queue first keeps *retained* finished records (its retention);
  at a third of the jobs its slot moves to another master, 100 keys per
  ``MIGRATE`` as ``redis-cli --cluster reshard`` sends them. Reported: keys
  moved, how long the move took, the longest time no handler started during
  it, jobs lost, jobs run twice.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

import trioqueue

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

ROOT = Path(__file__).resolve().parent.parent
JOBS = 600


def tag_on(master: int) -> str:
    """A fresh queue name whose slot master *master* of a fresh cluster serves."""
    from tests.redis_cluster import master_index
    from trioqueue._backends.redis._keys import hash_slot

    while True:
        name = "{f-" + uuid.uuid4().hex[:8] + "}"
        if master_index(hash_slot(name)) == master:
            return name


async def run(
    url: str, name: str, fault: Callable[[], Awaitable[None]], retained: int
) -> tuple[dict[int, list[float]], int]:
    """The jobs through a producer and a pool, *fault* at a third; each job's start times."""
    starts: collections.defaultdict[int, list[float]] = collections.defaultdict(list)
    a_third = trio.Event()

    async def handler(job: trioqueue.Job) -> None:
        if isinstance(job.payload, int):
            starts[job.payload].append(time.monotonic())
        await trio.sleep(0.01)

    async def produce(queue: trioqueue.Queue) -> None:
        for n in range(JOBS):
            while True:
                try:
                    await queue.enqueue(n, id=f"j{n}")
                    break
                except trioqueue.BackendUnavailable:
                    await trio.sleep(0.05)
            if n == JOBS // 3:
                a_third.set()
            await trio.sleep(0.002)

    retention = trioqueue.Retention(max_count=retained + JOBS)
    async with trioqueue.RedisBackend(url, queue=name, min_idle=3, retention=retention) as backend:
        queue = trioqueue.Queue(backend)
        if retained:  # the records a busy queue keeps: finished, in the slot
            async with trioqueue.open_worker_pool(backend, handler, workers=8):
                for start in range(0, retained, 500):
                    ids = [f"old{n}" for n in range(start, min(start + 500, retained))]
                    await queue.enqueue_many(["old"] * len(ids), ids=ids)
        async with trioqueue.open_worker_pool(backend, handler, workers=8, prefetch=0):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(produce, queue)
                await a_third.wait()
                await fault()
            # every job accepted: wait until all have finished (the Redis counters)
            while (await backend.stats()).succeeded < retained + JOBS:  # noqa: ASYNC110
                await trio.sleep(0.1)
        lost = [await queue.status(f"j{n}") for n in range(JOBS)].count(None)
    return starts, lost


def failover(cluster: Any) -> dict[str, float]:
    name = tag_on(0)
    doomed, other = cluster.masters[0], cluster.masters[1]
    url = f"redis://127.0.0.1:{doomed.port},127.0.0.1:{other.port}?cluster=yes"
    killed: list[float] = []
    promoted: list[float] = []

    def watch() -> None:
        while not promoted:
            try:
                if cluster.replication(cluster.replicas[0]).get("role") == "master":
                    promoted.append(time.monotonic())
            except OSError:
                pass
            time.sleep(0.01)

    async def kill() -> None:
        killed.append(time.monotonic())
        doomed.stop(kill=True)
        threading.Thread(target=watch, daemon=True).start()

    starts, lost = trio.run(run, url, name, kill, 0)
    resumed = min(t for times in starts.values() for t in times if t > killed[0] + 0.05)
    return {
        "promoted_s": promoted[0] - killed[0],
        "resumed_s": resumed - killed[0],
        "lost": lost,
        "twice": sum(1 for times in starts.values() if len(times) > 1),
        "missing": JOBS - len(starts),
    }


def reshard(cluster: Any, retained: int) -> dict[str, float]:
    from trioqueue._backends.redis._keys import hash_slot

    name = tag_on(1)
    source, target = cluster.masters[1], cluster.masters[2]
    span: list[float] = []
    moved: list[int] = []

    async def move() -> None:
        span.append(time.monotonic())
        count = await trio.to_thread.run_sync(
            lambda: cluster.move_slot(hash_slot(name), source, target, batch=100, pause=0)
        )
        span.append(time.monotonic())
        moved.append(count)

    url = cluster.masters[0].url + "?cluster=yes"
    starts, lost = trio.run(run, url, name, move, retained)
    moments = sorted(t for times in starts.values() for t in times)
    during = [span[0], *(t for t in moments if span[0] < t < span[1] + 5), span[1]]
    return {
        "retained": retained,
        "keys_moved": moved[0],
        "move_s": span[1] - span[0],
        "longest_pause_s": max(b - a for a, b in itertools.pairwise(during)),
        "lost": lost,
        "twice": sum(1 for times in starts.values() if len(times) > 1),
        "missing": JOBS - len(starts),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--retained", default="0,2000,10000", help="finished records kept")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from tests.redis_cluster import started_cluster

    retained = [int(n) for n in args.retained.split(",")]
    failovers, reshards = [], collections.defaultdict(list)
    for n in range(1, args.rounds + 1):
        with started_cluster() as cluster:
            failovers.append(failover(cluster))
        print(f"round {n}, failover of the URL's node: {failovers[-1]}", flush=True)
        for count in retained:
            with started_cluster() as cluster:
                reshards[count].append(reshard(cluster, count))
            print(f"round {n}, reshard: {reshards[count][-1]}", flush=True)
    print("\nmedians over the rounds (range):")
    for key in ("promoted_s", "resumed_s"):
        values = [f[key] for f in failovers]
        median, low, high = statistics.median(values), min(values), max(values)
        print(f"  failover {key}: {median:.2f} ({low:.2f}-{high:.2f})")
    counts = [(f["lost"], f["twice"], f["missing"]) for f in failovers]
    print(f"  failover lost/twice/missing: {counts}")
    for count, runs in reshards.items():
        for key in ("keys_moved", "move_s", "longest_pause_s"):
            values = [r[key] for r in runs]
            print(
                f"  reshard with {count} retained, {key}: {statistics.median(values):.2f} "
                f"({min(values):.2f}-{max(values):.2f})"
            )
        print(
            f"  reshard with {count} retained, lost/twice/missing: "
            f"{[(r['lost'], r['twice'], r['missing']) for r in runs]}"
        )


if __name__ == "__main__":
    main()
