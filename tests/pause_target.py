"""A worker process for the pause test: one job, whose handler waits or blocks.

    python pause_target.py sleeps|blocks SECONDS

The pool's lease is 1.5 s (a renewal every 0.5 s). It prints ``started`` when the
handler starts, and exits once the job is done; its log goes to standard error.
"""

from __future__ import annotations

import logging
import sys
import time

import trio

import trioqueue


async def main(mode: str, seconds: float) -> None:
    async def handler(job: trioqueue.Job) -> None:
        await trio.sleep(0.3)  # the pool's lease renewal is under way by now
        print("started", flush=True)
        if mode == "blocks":
            time.sleep(seconds)  # noqa: ASYNC251 - the blocking handler the warning is about
        else:
            await trio.sleep(seconds)

    backend = trioqueue.MemoryBackend()
    async with trioqueue.open_worker_pool(backend, handler, lease=1.5):
        await trioqueue.Queue(backend).enqueue("x", id="the-job")


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    trio.run(main, sys.argv[1], float(sys.argv[2]))
