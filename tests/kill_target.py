"""A worker process for the crash tests: runs a pool on Redis until it is killed.

    python kill_target.py URL QUEUE MIN_IDLE [simple]

Each handler prints ``started <id>`` and then works for a long time.
"""

from __future__ import annotations

import sys

import trio

import trioqueue


async def main(url: str, queue: str, min_idle: float, reliable: bool) -> None:
    async def handler(job: trioqueue.Job) -> None:
        print("started", job.id, flush=True)
        await trio.sleep(3600)

    async with (
        trioqueue.RedisBackend(url, queue=queue, min_idle=min_idle, reliable=reliable) as backend,
        trioqueue.open_worker_pool(backend, handler, workers=1, poll_interval=0.2) as pool,
    ):
        await pool.wait_stopped()


if __name__ == "__main__":
    trio.run(main, sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4:] != ["simple"])
