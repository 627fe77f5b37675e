"""A worker process for the crash tests: runs a pool on Redis until it is killed.

    python kill_target.py URL QUEUE MIN_IDLE [simple | stream | backoff]

With ``stream``, QUEUE names a stream read through the group ``workers``.

Each handler prints ``started <id>`` and then works for a long time; with
``backoff`` it asks for a retry in 4 s instead (``Retry(delay=4)``), so the pool
holds the job while it sleeps out the backoff.
"""

from __future__ import annotations

import sys

import trio

import trioqueue

BACKOFF = 4.0


async def main(url: str, queue: str, min_idle: float, mode: str) -> None:
    async def handler(job: trioqueue.Job) -> None:
        print("started", job.id, flush=True)
        if mode == "backoff":
            raise trioqueue.Retry(delay=BACKOFF)
        await trio.sleep(3600)

    async with (
        open_backend(url, queue, min_idle, mode) as backend,
        trioqueue.open_worker_pool(backend, handler, workers=1, poll_interval=0.2) as pool,
    ):
        await pool.wait_stopped()


def open_backend(url: str, name: str, min_idle: float, mode: str) -> trioqueue.RedisBackend:
    if mode == "stream":
        return trioqueue.RedisBackend(url, stream=name, group="workers", min_idle=min_idle)
    return trioqueue.RedisBackend(url, queue=name, min_idle=min_idle, reliable=mode != "simple")


if __name__ == "__main__":
    trio.run(main, sys.argv[1], sys.argv[2], float(sys.argv[3]), "".join(sys.argv[4:]))
