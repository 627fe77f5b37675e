"""How-to: a handler's own Redis calls, on the connections its pool already holds."""

import os

import trio

import trioqueue

REDIS_URL = os.environ.get("TRIOQUEUE_REDIS_URL", "redis://localhost:6379/0")


async def count_visit(job: trioqueue.Job) -> None:
    # the pool's own Redis: no client to open, and the command shares its connections
    redis = trioqueue.current_redis()
    await redis.command("HINCRBY", "{visits}.by_page", job.payload["page"], 1)


async def main() -> None:
    async with trioqueue.RedisBackend(REDIS_URL, queue="{visits}", min_idle=30) as backend:
        print("using", backend)  # which Redis (its password hidden) and which queue
        await backend.command("DEL", "{visits}.by_page")  # a fresh count for this example
        queue = trioqueue.Queue(backend)
        for page in ("/", "/about", "/", "/", "/about"):
            await queue.enqueue({"page": page})
        async with trioqueue.open_worker_pool(backend, count_visit) as pool:
            pool.mark_producer_finished()  # leave the block once every job is done
        counts = await backend.command("HGETALL", "{visits}.by_page")
        # the default client gives RESP2 replies: a flat list of names and values
        pairs = dict(zip(counts[::2], counts[1::2], strict=True))
        for page, visits in sorted(pairs.items()):
            print(f"{page.decode()}: {int(visits)} visits")


if __name__ == "__main__":
    trio.run(main)
