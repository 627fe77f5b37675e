"""Tutorial, part 1: a first queue, in this process (the memory backend)."""

import trio

import trioqueue


async def resize(job: trioqueue.Job) -> None:
    """The handler: runs once per attempt at a job; returning completes it."""
    await trio.sleep(job.payload["width"] / 1000)  # the work: a pause standing for real I/O
    print(f"resized {job.payload['image']} to {job.payload['width']} px")


async def main() -> None:
    backend = trioqueue.MemoryBackend(capacity=100)  # at most 100 jobs wait
    queue = trioqueue.Queue(backend)
    async with trioqueue.open_worker_pool(backend, resize, workers=4):
        for name, width in (("cat.png", 320), ("dog.png", 640), ("owl.png", 1280)):
            # the id makes the enqueue idempotent: the same call again adds nothing
            await queue.enqueue({"image": name, "width": width}, id=f"resize-{name}")
        await queue.enqueue({"image": "cat.png", "width": 320}, id="resize-cat.png")
    # leaving the block waited until every job had finished
    record = await queue.status("resize-cat.png")
    assert record is not None
    print(record.state.value, "after", record.attempts, "attempt")
    print("completed:", (await queue.stats()).succeeded)


if __name__ == "__main__":
    trio.run(main)
