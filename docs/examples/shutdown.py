"""Tutorial, part 5: shutdown, which drains or cancels and loses nothing."""

import trio

import trioqueue


async def transcode(job: trioqueue.Job) -> None:
    """A long job: 2 s per video."""
    await trio.sleep(2)


async def main() -> None:
    backend = trioqueue.MemoryBackend()
    queue = trioqueue.Queue(backend)
    async with trioqueue.open_worker_pool(backend, transcode, workers=2) as pool:
        for n in range(5):
            await queue.enqueue({"video": n}, id=f"video-{n}")
        await trio.sleep(3)  # two videos done, two running, one waiting
        # stop claiming; running handlers get half a second, then are cancelled and
        # put back (a second before they would have finished)
        report = await pool.shutdown(grace=0.5)
    print(f"cancelled {report.cancelled}, put back {report.released}")
    stats = await queue.stats()
    print(f"completed {stats.succeeded}, waiting again {stats.gauges.queue_depth}")


if __name__ == "__main__":
    trio.run(main)
