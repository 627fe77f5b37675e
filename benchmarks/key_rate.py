"""How much of a per-key rate limit a backlog on one key gets, and whether its order holds.

    python benchmarks/key_rate.py [--rounds 3] [--jobs 60] [--rate 20] [--json]

A backlog of ``--jobs`` jobs of one rate key, under ``per_key=RateLimit(--rate)``,
is run by worker pools of 1, 4 and 32 workers: on the memory backend in this
process, and on a private Redis server by 1 and by 3 worker processes. Each
handler records when it started, then waits on I/O as a handler that does some
would (on Redis one round trip, a GET on its pool's connection; on the memory
backend a 5 ms sleep). The pools start first, then the backlog is enqueued in
one call.

Each figure is the achieved rate divided by the limit, ``(jobs - 1) / (last
start - first start) / rate``, median and range over the rounds, and how many
jobs each round started out of enqueue order (the fewest that, taken out, leave
the rest in order). Target (issue 54): at least 0.95, in order. Across
processes, pools idle in ``BLMOVE`` when the backlog lands each take a job at
the same moment, and the first claim script to run starts its job first,
whichever was enqueued first: that first start may be out of order.
"""

from __future__ import annotations

import argparse
import bisect
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from typing import IO, Any

import trio
from _common import RedisServer, find_server_binary, machine, write_results

import trioqueue

WORKERS = (1, 4, 32)
PROCESSES = (1, 3)


def handler_recording(starts: list[tuple[float, int]], *, redis: bool) -> trioqueue.Handler:
    """A handler that notes ``(start time, n)``, then does its I/O."""

    async def handler(job: trioqueue.Job) -> None:
        starts.append((time.time(), job.payload["n"]))
        if redis:
            await trioqueue.current_redis().command("GET", "key-rate-probe")
        else:
            await trio.sleep(0.005)

    return handler


async def worker(url: str, queue: str, workers: int, jobs: int) -> None:
    """One worker process: say ready, run until every job finished, print the starts.

    It waits for the jobs once told (a line on its stdin) that the backlog is in.
    """
    starts: list[tuple[float, int]] = []
    async with (
        trioqueue.RedisBackend(url, queue=queue, min_idle=30) as backend,
        trioqueue.open_worker_pool(
            backend, handler_recording(starts, redis=True), workers=workers
        ) as pool,
    ):
        print("ready", flush=True)
        await trio.to_thread.run_sync(sys.stdin.readline)  # the backlog is in
        queue = trioqueue.Queue(backend)
        for n in range(jobs):
            await queue.result(f"j{n}")  # every job finished, whichever process ran it
        await pool.shutdown(grace=5)
    print("\n".join(f"{at!r} {n}" for at, n in starts), flush=True)


def start_worker(
    url: str, queue: str, workers: int, jobs: int, errors: IO[str]
) -> subprocess.Popen[str]:
    command = [sys.executable, __file__, "--worker", url, queue, str(workers), str(jobs)]
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, text=True
    )
    assert process.stdout is not None
    if process.stdout.readline().strip() != "ready":
        process.kill()
        errors.seek(0)
        raise RuntimeError(f"a worker process did not start:\n{errors.read()[-3000:]}")
    return process


async def enqueue_backlog(backend: trioqueue.Backend, jobs: int, rate: int) -> None:
    queue = trioqueue.Queue(backend)
    await queue.set_rate_limits(per_key=trioqueue.RateLimit(rate))
    await queue.enqueue_many(
        [{"n": n} for n in range(jobs)], ids=[f"j{n}" for n in range(jobs)], rate_key="A"
    )


def redis_round(
    url: str, processes: int, workers: int, jobs: int, rate: int
) -> list[tuple[float, int]]:
    queue = "{rate-" + uuid.uuid4().hex[:8] + "}"

    async def limit_first() -> None:
        async with trioqueue.RedisBackend(url, queue=queue) as backend:
            await trioqueue.Queue(backend).set_rate_limits(per_key=trioqueue.RateLimit(rate))

    async def send() -> None:
        async with trioqueue.RedisBackend(url, queue=queue) as backend:
            await enqueue_backlog(backend, jobs, rate)

    trio.run(limit_first)
    starts: list[tuple[float, int]] = []
    with tempfile.TemporaryFile("w+") as errors:
        running = [start_worker(url, queue, workers, jobs, errors) for _ in range(processes)]
        try:
            trio.run(send)
            for process in running:
                out, _ = process.communicate("go\n", timeout=jobs / rate * 4 + 60)
                if process.returncode != 0:
                    errors.seek(0)
                    raise RuntimeError(f"a worker process failed:\n{errors.read()[-3000:]}")
                starts += [
                    (float(at), int(n)) for at, n in (line.split() for line in out.splitlines())
                ]
        finally:
            for process in running:
                if process.poll() is None:
                    process.kill()
    return starts


def memory_round(workers: int, jobs: int, rate: int) -> list[tuple[float, int]]:
    starts: list[tuple[float, int]] = []

    async def run() -> None:
        backend = trioqueue.MemoryBackend()
        async with trioqueue.open_worker_pool(
            backend, handler_recording(starts, redis=False), workers=workers
        ) as pool:
            await enqueue_backlog(backend, jobs, rate)
            pool.mark_producer_finished()
            await pool.wait_stopped()

    trio.run(run)
    return starts


def achieved(starts: list[tuple[float, int]], jobs: int, rate: int) -> tuple[float, int]:
    """The achieved rate ÷ the limit, and how many jobs started out of enqueue order.

    Out of order: the fewest jobs that, taken out, leave the rest started in enqueue
    order (the jobs less the longest increasing run of the start order).
    """
    if len(starts) != jobs:
        raise RuntimeError(f"{len(starts)} of {jobs} jobs started")
    starts = sorted(starts)
    span = starts[-1][0] - starts[0][0]
    tails: list[int] = []  # the smallest last job of an increasing run of each length
    for _, n in starts:
        tails[bisect.bisect_left(tails, n) : bisect.bisect_left(tails, n) + 1] = [n]
    return (jobs - 1) / span / rate, jobs - len(tails)


def measure(rounds: int, jobs: int, rate: int) -> dict[str, Any]:
    runs: dict[str, tuple[list[float], list[int]]] = {}

    def note(name: str, starts: list[tuple[float, int]]) -> None:
        ratio, out_of_order = achieved(starts, jobs, rate)
        ratios, orders = runs.setdefault(name, ([], []))
        ratios.append(ratio)
        orders.append(out_of_order)

    server = RedisServer(find_server_binary())
    server.start()
    try:
        for n in range(1, rounds + 1):
            for workers in WORKERS:
                note(f"memory, 1 process, {workers} workers", memory_round(workers, jobs, rate))
                for processes in PROCESSES:
                    note(
                        f"redis, {processes} processes, {workers} workers each",
                        redis_round(server.url, processes, workers, jobs, rate),
                    )
            print(f"round {n} done", flush=True)
    finally:
        server.close()
    return {
        "jobs": jobs,
        "rate_per_s": rate,
        "handler": "notes its start, then one GET on its pool's Redis (memory: a 5 ms sleep)",
        "figures": {
            name: {
                "rate_over_limit": {
                    "median": statistics.median(ratios),
                    "min": min(ratios),
                    "max": max(ratios),
                    "runs": ratios,
                },
                "out_of_order": orders,
            }
            for name, (ratios, orders) in runs.items()
        },
        "machine": machine(),
    }


def main() -> None:
    if len(sys.argv) == 6 and sys.argv[1] == "--worker":
        url, queue, workers, jobs = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
        trio.run(worker, url, queue, workers, jobs)
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=60)
    parser.add_argument("--rate", type=int, default=20)
    parser.add_argument("--json", action="store_true", help="also write results/key_rate.json")
    args = parser.parse_args()
    found = measure(args.rounds, args.jobs, args.rate)
    lines = [
        f"{args.jobs} jobs of one key at {args.rate}/s: achieved rate ÷ limit, median (range)",
        f"{'pools':<38} {'rate ÷ limit':<22} jobs out of order, each round",
    ]
    for name, figure in found["figures"].items():
        ratio = figure["rate_over_limit"]
        lines.append(
            f"{name:<38} {ratio['median']:.3f} ({ratio['min']:.3f}–{ratio['max']:.3f})"
            f"{'':<5} {' '.join(map(str, figure['out_of_order']))}"
        )
    print("\n".join(lines))
    if args.json:
        write_results("key_rate", found, "```\n" + "\n".join(lines) + "\n```\n")


if __name__ == "__main__":
    main()
