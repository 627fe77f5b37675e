"""The workload of `unused_cost.py`, run on the trioqueue first on ``PYTHONPATH``.

    python benchmarks/_unused_workload.py JOBS REDIS_URL QUEUE_PREFIX

Prints one JSON object: jobs/s of each figure (see `unused_cost.py`). OpenTelemetry
is made unimportable first: the figures are of a process without it installed.
"""

from __future__ import annotations

import sys

sys.modules["opentelemetry"] = None  # type: ignore[assignment]  # "not installed"

import json  # noqa: E402
import time  # noqa: E402

import trio  # noqa: E402

import trioqueue  # noqa: E402


async def memory(jobs: int, io: bool) -> float:
    """Jobs/s of a memory-backend pool; each handler a checkpoint, or a TCP round trip (*io*)."""
    backend = trioqueue.MemoryBackend(capacity=64)
    queue = trioqueue.Queue(backend)
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]

    async def echo(stream: trio.SocketStream) -> None:
        async with stream:
            async for data in stream:
                await stream.send_all(data)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, echo, listeners)
        streams = [await trio.open_tcp_stream("127.0.0.1", port) for _ in range(32)]
        free = list(streams)  # one each for the 32 workers' handlers at once

        async def handler(job: trioqueue.Job) -> None:
            if not io:
                await trio.lowlevel.checkpoint()
                return
            stream = free.pop()
            try:
                await stream.send_all(b"x")
                await stream.receive_some(1)
            finally:
                free.append(stream)

        start = time.perf_counter()
        async with trioqueue.open_worker_pool(backend, handler, workers=32, prefetch=32):
            for i in range(jobs):
                await queue.enqueue({"i": i})
        elapsed = time.perf_counter() - start
        for stream in streams:
            await stream.aclose()
        nursery.cancel_scope.cancel()
    assert backend.metrics.snapshot().succeeded == jobs
    return jobs / elapsed


async def enqueue(jobs: int, url: str, queue_name: str) -> float:
    """Jobs/s of single `Queue.enqueue` calls on Redis."""
    async with trioqueue.RedisBackend(url, queue=queue_name, capacity=jobs + 1) as backend:
        queue = trioqueue.Queue(backend)
        start = time.perf_counter()
        for i in range(jobs):
            await queue.enqueue({"n": i, "to": f"user{i}@example.com"})
        return jobs / (time.perf_counter() - start)


async def redis(jobs: int, url: str, queue_name: str) -> float:
    """Jobs/s of a Redis pool through jobs queued before it starts; a GET per handler."""
    settings = {"capacity": jobs + 1, "min_idle": 30.0}
    async with trioqueue.RedisBackend(url, queue=queue_name, **settings) as backend:
        queue = trioqueue.Queue(backend)
        for first in range(0, jobs, 500):
            await queue.enqueue_many([{"n": i} for i in range(first, min(first + 500, jobs))])

        async def handler(job: trioqueue.Job) -> None:
            await trioqueue.current_redis().command("GET", "k")

        start = time.perf_counter()
        async with trioqueue.open_worker_pool(backend, handler, workers=32, prefetch=32):
            pass
        return jobs / (time.perf_counter() - start)


def main() -> None:
    jobs, url, prefix = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    rates = {
        "memory": trio.run(memory, jobs, False),
        "memory_io": trio.run(memory, jobs, True),
        "enqueue": trio.run(enqueue, jobs, url, prefix + "e"),
        "redis": trio.run(redis, jobs, url, prefix + "r"),
    }
    print(json.dumps(rates))


if __name__ == "__main__":
    main()
