"""Tutorial, part 3: the same queue on Redis, shared by every process that names it."""

import os

import trio

import trioqueue

REDIS_URL = os.environ.get("TRIOQUEUE_REDIS_URL", "redis://localhost:6379/0")


async def main() -> None:
    # the queue's name in braces: Redis Cluster keeps all its keys on one node;
    # the block holds the connections (a MemoryBackend needs none)
    async with trioqueue.RedisBackend(REDIS_URL, queue="{images}") as backend:
        print("using", backend)  # which Redis (its password hidden) and which queue
        queue = trioqueue.Queue(backend)
        for name, width in (("cat.png", 320), ("dog.png", 640), ("owl.png", 1280)):
            await queue.enqueue({"image": name, "width": width}, id=f"resize-{name}")
        info = await backend.inspect()
        print(f"{info.ready} jobs wait in Redis for a worker, in any process")


if __name__ == "__main__":
    trio.run(main)
