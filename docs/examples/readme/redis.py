import os

import trio

import trioqueue

REDIS_URL = os.environ.get("TRIOQUEUE_REDIS_URL", "redis://localhost:6379/0")


async def send_email(job: trioqueue.Job) -> None:
    await trio.sleep(0.01)  # talk to the mail server


async def main() -> None:
    async with trioqueue.RedisBackend(REDIS_URL, queue="{mail}", min_idle=10) as backend:
        print("using", backend)  # which Redis (its password hidden) and which queue
        queue = trioqueue.Queue(backend)
        async with trioqueue.open_worker_pool(backend, send_email, workers=8):
            for n in range(1000):
                await queue.enqueue({"to": f"user{n}@example.com"}, id=f"welcome-{n}")
        print(await queue.stats())  # the queue's shared counters, as every process sees them


trio.run(main)
