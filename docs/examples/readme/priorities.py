import trio

import trioqueue


async def main() -> None:
    backend = trioqueue.MemoryBackend()
    queue = trioqueue.Queue(backend)
    await queue.enqueue("weekly report", priority=-1)
    await queue.enqueue("thumbnail")
    await queue.enqueue("password reset", priority=2)
    print((await queue.stats()).gauges.ready_by_priority)

    async def handle(job: trioqueue.Job) -> None:
        print(job.priority, job.payload)

    async with trioqueue.open_worker_pool(backend, handle, workers=1):
        pass  # prints: 2 password reset, 0 thumbnail, -1 weekly report


trio.run(main)
