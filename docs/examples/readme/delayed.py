import datetime

import trio

import trioqueue


async def main() -> None:
    backend = trioqueue.MemoryBackend()
    queue = trioqueue.Queue(backend)
    start = trio.current_time()

    async def remind(job: trioqueue.Job) -> None:
        print(f"{job.payload} at {trio.current_time() - start:.1f} s")

    async with trioqueue.open_worker_pool(backend, remind):
        soon = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=1)
        await queue.enqueue("second", id="r2", at=soon)
        receipt = await queue.enqueue("first", id="r1", delay=0.5)
        print(receipt.scheduled, (await queue.status("r1")).state)  # True scheduled
    # leaving the block waited for both: a delayed job is a pending job


trio.run(main)
