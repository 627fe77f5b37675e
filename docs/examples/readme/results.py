import trio

import trioqueue


async def thumbnail(job: trioqueue.Job) -> dict[str, int]:
    await trio.sleep(0.01)  # the work
    return {"width": job.payload["width"] // 4}  # kept on the record, as JSON


async def main() -> None:
    backend = trioqueue.MemoryBackend()
    queue = trioqueue.Queue(backend)
    async with trioqueue.open_worker_pool(backend, thumbnail):
        # request/response: with an id, asking again returns the same job's result
        print(await queue.enqueue_and_wait({"width": 640}, id="thumb-640"))
        ids = [f"thumb-{width}" for width in (800, 1024, 2048)]
        for job_id in ids:
            await queue.enqueue({"width": int(job_id[6:])}, id=job_id)
        async with queue.results(ids) as results:  # as they finish
            async for job_id, outcome in results:
                print(job_id, outcome.unwrap())
        with trio.fail_after(5):  # a wait composes with Trio's timeouts
            print(await queue.result("thumb-800"))


trio.run(main)
