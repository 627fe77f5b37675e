import trio

import trioqueue


async def send_email(job: trioqueue.Job) -> None:
    await trio.sleep(0.01)  # talk to the mail server


async def main() -> None:
    async with trioqueue.RedisBackend(
        "redis://localhost:6379/0", queue="{mail}", min_idle=10
    ) as backend:
        queue = trioqueue.Queue(backend)
        async with trioqueue.open_worker_pool(backend, send_email, workers=8):
            for n in range(1000):
                await queue.enqueue({"to": f"user{n}@example.com"}, id=f"welcome-{n}")
        print(await queue.stats())  # the queue's shared counters, as every process sees them


trio.run(main)
