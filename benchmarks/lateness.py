"""Lateness of delayed jobs on Redis, beside the latency of jobs enqueued for at once.

    python benchmarks/lateness.py [--rounds 3] [--seconds 3] [--json]

A worker pool (8 workers, in its own process) and a producer (this process) on a
private Redis server. Each handler records when it started, then makes one Redis
round trip (a GET), as a handler that does I/O would. Each round measures:

- **idle**: one delayed job at a time (due 50-200 ms after it is sent), sent
  while the pool waits for work in ``BLMOVE``: the wake element and the claim's
  due-time cap are what start it. Lateness = start - due time.
- **paced**: 1,000 jobs due per second for ``--seconds``, all enqueued ahead of
  time (``at=``). Lateness = start - due time.
- **immediate** (the floor): the same pacing, each job enqueued at its moment
  without a delay. Latency = start - the moment it was sent.

Target (issue 17): p99 lateness under 10 ms on an idle worker. The figures are
p50/p99 in milliseconds, median and range over the rounds.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from typing import IO, Any

import trio
from _common import RedisServer, find_server_binary, percentiles

import trioqueue

WORKERS = 8
RATE = 1_000  # jobs due per second in the paced runs
IDLE_JOBS = 100
CAPACITY = 100_000  # given by both sides: whichever writes first creates the queue


async def worker(url: str, queue: str, expected: int) -> None:
    """The pool's process: print each job's start time as ``id start`` lines, then stop."""
    import coredis

    starts: list[str] = []
    done = trio.Event()
    client = coredis.Redis.from_url(url)

    async def handler(job: trioqueue.Job) -> None:
        starts.append(f"{job.id} {time.time()!r}")
        await client.get("lateness-probe")  # one round trip: a handler that does I/O
        if len(starts) == expected:
            done.set()

    async with (
        client,
        trioqueue.RedisBackend(url, queue=queue, capacity=CAPACITY, min_idle=30) as backend,
        trioqueue.open_worker_pool(backend, handler, workers=WORKERS) as pool,
    ):
        print("ready", flush=True)
        await done.wait()
        await pool.shutdown(grace=5)
    print("\n".join(starts), flush=True)


def start_worker(url: str, queue: str, expected: int, errors: IO[str]) -> subprocess.Popen[str]:
    """The worker process, once it says it is ready; its stderr goes to *errors*.

    A file, not a pipe: a pipe nobody reads while the producer runs could fill and stall it.
    """
    command = [sys.executable, __file__, "--worker", url, queue, str(expected)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True)
    assert process.stdout is not None
    if process.stdout.readline().strip() != "ready":
        process.kill()
        raise RuntimeError(f"the worker process did not start:\n{tail(errors)}")
    return process


def tail(errors: IO[str], lines: int = 30) -> str:
    errors.seek(0)
    return "".join(errors.readlines()[-lines:])


def starts_of(process: subprocess.Popen[str], errors: IO[str]) -> dict[str, float]:
    out, _ = process.communicate(timeout=120)
    if process.returncode != 0:
        raise RuntimeError(f"the worker process failed ({process.returncode}):\n{tail(errors)}")
    return {job_id: float(at) for job_id, at in (line.split() for line in out.splitlines())}


def epoch(seconds: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)


async def send_idle(url: str, queue: str) -> dict[str, float]:
    """One delayed job at a time, each sent once the last is past; their due times."""
    due: dict[str, float] = {}
    async with trioqueue.RedisBackend(url, queue=queue, capacity=CAPACITY) as backend:
        producer = trioqueue.Queue(backend)
        for n in range(IDLE_JOBS):
            job_id = f"idle-{n}"
            delay = 0.05 + 0.15 * ((n * 7919) % 100) / 100
            due[job_id] = time.time() + delay
            await producer.enqueue(n, id=job_id, at=epoch(due[job_id]))
            await trio.sleep(delay + 0.1)  # it has run: the pool is idle again
    return due


async def send_paced(url: str, queue: str, jobs: int, *, delayed: bool) -> dict[str, float]:
    """*jobs* due at RATE per second: enqueued ahead with at= (delayed), or at their moment.

    Returns each job's due time (delayed) or the moment it was sent (immediate).
    """
    marks: dict[str, float] = {}
    async with trioqueue.RedisBackend(url, queue=queue, capacity=CAPACITY) as backend:
        producer = trioqueue.Queue(backend)
        if delayed:
            begin = time.time() + 1.0 + jobs / 3_000  # after every enqueue has landed
            async with trio.open_nursery() as nursery:
                for lane in range(8):

                    async def send(lane: int = lane) -> None:
                        for n in range(lane, jobs, 8):
                            marks[f"p-{n}"] = begin + n / RATE
                            await producer.enqueue(n, id=f"p-{n}", at=epoch(marks[f"p-{n}"]))

                    nursery.start_soon(send)
            if time.time() > begin:
                raise RuntimeError("the enqueues took longer than the head start")
        else:
            begin = trio.current_time() + 0.2
            for n in range(jobs):
                await trio.sleep_until(begin + n / RATE)
                marks[f"p-{n}"] = time.time()
                await producer.enqueue(n, id=f"p-{n}")
    return marks


def one(url: str, kind: str, jobs: int) -> list[float]:
    """Run one kind of measurement in a fresh queue; return every job's lateness (s)."""
    queue = "{late-" + uuid.uuid4().hex[:8] + "}"
    expected = IDLE_JOBS if kind == "idle" else jobs
    with tempfile.TemporaryFile("w+") as errors:
        process = start_worker(url, queue, expected, errors)
        try:
            if kind == "idle":
                marks = trio.run(send_idle, url, queue)
            else:
                paced = functools.partial(send_paced, delayed=kind == "paced")
                marks = trio.run(paced, url, queue, jobs)
            starts = starts_of(process, errors)
        finally:
            if process.poll() is None:
                process.kill()
    return [starts[job_id] - mark for job_id, mark in marks.items()]


def measure(rounds: int, seconds: float) -> dict[str, Any]:
    jobs = int(RATE * seconds)
    server = RedisServer(find_server_binary())
    server.start()
    figures: dict[str, dict[str, list[float]]] = {
        kind: {"p50": [], "p99": [], "max": []} for kind in ("idle", "paced", "immediate")
    }
    try:
        for n in range(1, rounds + 1):
            for kind in ("idle", "paced", "immediate"):
                found = percentiles(one(server.url, kind, jobs))
                for name in ("p50", "p99", "max"):
                    figures[kind][name].append(found[name] * 1000)
            print(
                f"round {n}: "
                + ", ".join(
                    f"{kind} p50 {figures[kind]['p50'][-1]:.1f} ms p99 "
                    f"{figures[kind]['p99'][-1]:.1f} ms"
                    for kind in figures
                ),
                flush=True,
            )
    finally:
        server.close()
    return {
        "rate_per_s": RATE,
        "paced_jobs": jobs,
        "idle_jobs": IDLE_JOBS,
        "workers": WORKERS,
        "handler": "records its start, then one GET on the same Redis",
        "ms": {
            kind: {
                name: {
                    "median": statistics.median(values),
                    "min": min(values),
                    "max": max(values),
                }
                for name, values in by_name.items()
            }
            for kind, by_name in figures.items()
        },
        "target_idle_p99_ms": 10.0,
    }


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        trio.run(worker, sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    data = measure(args.rounds, args.seconds)
    if args.json:
        print(json.dumps(data, indent=2))
        return
    for kind, by_name in data["ms"].items():
        print(
            f"{kind:9} p50 {by_name['p50']['median']:6.1f} ms  p99 {by_name['p99']['median']:6.1f}"
            f" ms ({by_name['p99']['min']:.1f}-{by_name['p99']['max']:.1f})  max "
            f"{by_name['max']['median']:.1f} ms"
        )
    idle = data["ms"]["idle"]["p99"]["median"]
    verdict = "met" if idle < data["target_idle_p99_ms"] else "missed"
    print(f"target: idle p99 < {data['target_idle_p99_ms']:g} ms: {verdict} ({idle:.1f} ms)")


if __name__ == "__main__":
    main()
